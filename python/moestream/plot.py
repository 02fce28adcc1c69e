"""Draws decode tok/s and hit rate against the memory budget from
``moestream bench --sweep ... --json`` output.

    /usr/bin/python3 -m moestream.plot BENCH.json -o curve.png

matplotlib is optional (Debian: python3-matplotlib); without it this prints
what to install and exits with status 3.
"""
import argparse
import json
import sys


def load_runs(path):
    with open(path) as f:
        data = json.load(f)
    runs = [r for r in data.get("runs", []) if r.get("ok")]
    if not runs:
        raise ValueError(f"{path}: no successful runs")
    return data, runs


def series(data, runs):
    """{io_mode: [(budget_share, tok_s, hit_rate), ...]} sorted by budget."""
    size = float(data.get("file_bytes") or 1)
    out = {}
    for r in runs:
        out.setdefault(r["io_mode_requested"], []).append(
            (100.0 * r["budget_bytes"] / size, r["decode_tok_s"], 100.0 * r["hit_rate"]))
    return {mode: sorted(points) for mode, points in out.items()}


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
    for mode, points in series(data, runs).items():
        x = [p[0] for p in points]
        speed.plot(x, [p[1] for p in points], marker="o", label=mode)
        if mode != "mmap":
            hits.plot(x, [p[2] for p in points], marker="o", label=mode)
    speed.set(xlabel="memory budget (% of model)", ylabel="decode tok/s", title="Decode speed")
    hits.set(xlabel="memory budget (% of model)", ylabel="expert cache hit rate (%)", title="Hit rate", ylim=(0, 100))
    for ax in (speed, hits):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(data.get("model", ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
