"""Draws decode tok/s and hit rate against the memory budget from
``moestream bench --sweep ... --json`` output.

    /usr/bin/python3 -m moestream.plot BENCH.json -o curve.png

matplotlib is optional (Debian: python3-matplotlib); without it this prints
what to install and exits with status 3.
"""
import argparse
import json
import sys

# The fields of a successful run that the plot reads, and their JSON types.
_RUN_FIELDS = {"io_mode_requested": str, "io_mode": str, "budget_bytes": (int, float), "decode_tok_s": (int, float),
               "hit_rate": (int, float)}


def _check_run(path, index, run):
    for name, kind in _RUN_FIELDS.items():
        value = run.get(name)
        # bool is an int to Python but never a number in bench output.
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"{path}: run {index} has no valid '{name}': not moestream bench --json output")


def load_runs(path):
    """The bench document and its successful runs; ValueError naming what is wrong with a file
    that is not bench JSON (not an object, no run list, a run without the fields the plot reads)."""
    with open(path) as f:
        try:
            data = json.load(f)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError: their text does not name the file
            raise ValueError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise ValueError(f"{path}: no 'runs' list: not moestream bench --json output")
    runs = []
    for i, r in enumerate(data["runs"]):
        if not isinstance(r, dict):
            raise ValueError(f"{path}: run {i} is not an object: not moestream bench --json output")
        if r.get("ok") is True:
            _check_run(path, i, r)
            runs.append(r)
    if not runs:
        raise ValueError(f"{path}: no successful runs")
    return data, runs


def series(data, runs):
    """{label: [(budget_share, tok_s, hit_rate or None), ...]} sorted by budget. A resident run is
    an mmap run with the file preloaded: it is labelled apart, not joined to the mmap line. The
    hit rate is None where the engine kept no cache of its own (the run's mode was mmap)."""
    size = data.get("file_bytes")
    size = float(size) if isinstance(size, (int, float)) and size > 0 else 1.0
    out = {}
    for r in runs:
        label = "resident" if r.get("resident") is True else r["io_mode_requested"]
        hit = None if r["io_mode"] == "mmap" else 100.0 * r["hit_rate"]
        out.setdefault(label, []).append((100.0 * r["budget_bytes"] / size, r["decode_tok_s"], hit))
    return {label: sorted(points, key=lambda p: p[:2]) for label, points in out.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m moestream.plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("bench_json")
    ap.add_argument("-o", "--output", default="curve.png")
    args = ap.parse_args(argv)
    try:
        data, runs = load_runs(args.bench_json)
    except (OSError, ValueError) as e:
        print(f"moestream.plot: {e}", file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("moestream.plot: matplotlib is not installed (Debian: apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 3
    fig, (speed, hits) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, points in series(data, runs).items():
        speed.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        with_hits = [p for p in points if p[2] is not None]
        if with_hits:
            hits.plot([p[0] for p in with_hits], [p[2] for p in with_hits], marker="o", label=label)
    speed.set(xlabel="memory budget (% of model)", ylabel="decode tok/s", title="Decode speed")
    hits.set(xlabel="memory budget (% of model)", ylabel="expert cache hit rate (%)", title="Hit rate", ylim=(0, 100))
    for ax in (speed, hits):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.suptitle(str(data.get("model", "")), fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=120)
    except (OSError, ValueError) as e:  # an unwritable path; an extension matplotlib has no format for
        print(f"moestream.plot: cannot write {args.output}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
