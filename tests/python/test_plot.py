"""python -m moestream.plot: what it draws from bench JSON and how it fails
on input that is not bench JSON, an output it cannot write, or no matplotlib."""
import json
import subprocess
import sys

import pytest

from moestream import plot


def run(**fields):
    r = {"ok": True, "io_mode_requested": "direct", "io_mode": "direct", "budget_bytes": 50, "decode_tok_s": 2.0,
         "hit_rate": 0.5}
    r.update(fields)
    return r


def plot_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "moestream.plot", *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kw)


def test_resident_runs_are_a_series_of_their_own():
    # A resident run is requested as mmap: joined to the mmap line it would zigzag between two speeds per budget.
    data = {"file_bytes": 100}
    runs = [run(io_mode_requested="mmap", io_mode="mmap", budget_bytes=50, decode_tok_s=1.0, resident=False),
            run(io_mode_requested="mmap", io_mode="mmap", budget_bytes=50, decode_tok_s=9.0, resident=True),
            run(budget_bytes=50)]
    s = plot.series(data, runs)
    assert set(s) == {"mmap", "resident", "direct"}
    assert s["mmap"] == [(50.0, 1.0, None)] and s["resident"] == [(50.0, 9.0, None)]
    # The hit rate is drawn only where the engine kept a cache: not for auto that chose mmap.
    auto = plot.series(data, [run(io_mode_requested="auto", io_mode="mmap")])
    assert auto == {"auto": [(50.0, 2.0, None)]}
    assert plot.series(data, [run()]) == {"direct": [(50.0, 2.0, 50.0)]}


@pytest.mark.parametrize("text,what", [
    ('{"runs": [', "Expecting value"),
    ("[1, 2]", "no 'runs' list"),
    ('{"runs": null}', "no 'runs' list"),
    ('{"runs": [5]}', "run 0 is not an object"),
    ('{"runs": [{"ok": true}]}', "run 0 has no valid 'io_mode_requested'"),
    ('{"runs": [{"ok": true, "io_mode_requested": "direct", "io_mode": "direct", "budget_bytes": "50%",'
     ' "decode_tok_s": 1, "hit_rate": 0}]}', "run 0 has no valid 'budget_bytes'"),
    ('{"runs": [{"ok": false, "error": "x"}]}', "no successful runs"),
])
def test_input_that_is_not_bench_json_is_named_not_a_traceback(tmp_path, text, what):
    bad = tmp_path / "bench.json"
    bad.write_text(text)
    r = plot_cli(bad, "-o", tmp_path / "curve.png")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"moestream.plot: {bad}: ") and what in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "curve.png").exists()


def test_an_output_it_cannot_write_is_an_error(tmp_path):
    pytest.importorskip("matplotlib")
    good = tmp_path / "bench.json"
    good.write_text(json.dumps({"file_bytes": 100, "runs": [run()]}))
    for out in (tmp_path / "missing" / "curve.png", tmp_path / "curve.nosuchformat"):
        r = plot_cli(good, "-o", out)
        assert r.returncode == 1 and r.stderr.startswith(f"moestream.plot: cannot write {out}: "), r.stderr
        assert "Traceback" not in r.stderr
    r = plot_cli(good, "-o", tmp_path / "curve.png")
    assert r.returncode == 0 and (tmp_path / "curve.png").stat().st_size > 0, r.stderr


def test_without_matplotlib_it_says_what_to_install(tmp_path):
    good = tmp_path / "bench.json"
    good.write_text(json.dumps({"file_bytes": 100, "runs": [run()]}))
    # A matplotlib that cannot be imported shadows any installed one.
    (tmp_path / "hide" / "matplotlib").mkdir(parents=True)
    (tmp_path / "hide" / "matplotlib" / "__init__.py").write_text("raise ImportError('hidden for the test')\n")
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "hide"), *sys.path]))
    r = plot_cli(good, "-o", tmp_path / "curve.png", env=env)
    assert r.returncode == 3 and "python3-matplotlib" in r.stderr, r.stderr
    assert not (tmp_path / "curve.png").exists()
