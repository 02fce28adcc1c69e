"""--packed PATH: the commands that open a model stream experts from the
packed expert file named, instead of looking for MODEL.moepack."""
import json
import subprocess

import pytest


def cli(cli_path, *args, **kwargs):
    return subprocess.run([str(cli_path), *map(str, args)], capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def packed_model(cli_path, tmp_path_factory):
    """A tiny model and its packed file at a path the library does not look at."""
    d = tmp_path_factory.mktemp("packed")
    model, packed = d / "m.gguf", d / "elsewhere.pack"
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "-o", model], check=True, capture_output=True)
    subprocess.run([str(cli_path), "pack", model, "-o", packed], check=True, capture_output=True)
    return model, packed


def bench_reason(cli_path, model, *extra):
    r = cli(cli_path, "bench", "-m", model, *extra, "-n", "2", "--prompt", "2", "--io-mode", "pread", "--warm",
            "--json")
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)["runs"][0]
    assert run["ok"], run["error"]
    return run["io_mode_reason"]


def test_bench_streams_from_the_packed_file_named(cli_path, packed_model):
    model, packed = packed_model
    assert "packed experts" in bench_reason(cli_path, model, "--packed", packed)
    # Without the option the library looks for m.gguf.moepack, which is not there.
    assert "packed" not in bench_reason(cli_path, model)


@pytest.mark.parametrize("command", [["run", "--tokens", "5,9,3", "-n", "6"],
                                     ["perplexity", "--tokens", "{ids}"],
                                     ["logits", "--tokens", "5,9,3", "--all", "--out", "{out}"]])
def test_the_packed_file_gives_the_same_results(cli_path, packed_model, tmp_path, command):
    model, packed = packed_model
    (tmp_path / "ids.txt").write_text("5 9 3 7 1")

    def result(*extra):
        out = tmp_path / "out.bin"
        args = [a.format(ids=tmp_path / "ids.txt", out=out) for a in command]
        r = cli(cli_path, args[0], "-m", model, "--io-mode", "pread", *extra, *args[1:])
        assert r.returncode == 0, r.stderr
        return r.stdout + (out.read_bytes().hex() if out.exists() else "")

    assert result("--packed", packed) == result()


@pytest.mark.parametrize("command", [["run", "--tokens", "1"], ["perplexity", "--tokens", "{ids}"],
                                     ["tokenize", "-p", "hi"], ["logits", "--tokens", "1", "--out", "{out}"],
                                     ["trace record", "--tokens", "2", "-o", "{out}"]])
def test_a_packed_file_that_is_not_there_is_refused(cli_path, packed_model, tmp_path, command):
    # A named file is never silently replaced by streaming from the GGUF.
    model, _ = packed_model
    (tmp_path / "ids.txt").write_text("1 2 3")
    missing = tmp_path / "absent.pack"
    args = [a.format(ids=tmp_path / "ids.txt", out=tmp_path / "out.bin") for a in command]
    r = cli(cli_path, *args[0].split(), "-m", model, "--packed", missing, *args[1:], cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.startswith(f"moestream {args[0]}: moestream_open: ") and str(missing) in r.stderr, r.stderr
    assert not (tmp_path / "out.bin").exists()


def test_bench_refuses_a_packed_file_that_is_not_there(cli_path, packed_model, tmp_path):
    model, _ = packed_model
    r = cli(cli_path, "bench", "-m", model, "--packed", tmp_path / "absent.pack", "-n", "2", "--prompt", "2",
            "--io-mode", "pread", "--warm", "--json")
    assert r.returncode == 1, (r.returncode, r.stderr)
    run = json.loads(r.stdout)["runs"][0]
    assert not run["ok"] and "absent.pack" in run["error"], run


@pytest.mark.parametrize("command", [["run", "-m", "{model}", "--tokens", "1"], ["bench", "-m", "{model}"]])
def test_an_empty_packed_path_is_a_usage_error(cli_path, packed_model, command):
    # "" would stand for no file named: the library would look for MODEL.moepack.
    model, _ = packed_model
    r = cli(cli_path, *[a.format(model=model) for a in command], "--packed", "")
    assert r.returncode == 2 and f"moestream {command[0]}: --packed needs a file name\n" in r.stderr, r.stderr


def test_the_state_file_may_not_replace_the_packed_file_named(cli_path, packed_model):
    model, packed = packed_model
    before = packed.read_bytes()
    r = cli(cli_path, "run", "-m", model, "--packed", packed, "--tokens", "1", "-n", "2", "--save-state", packed)
    assert r.returncode == 1 and f"it is the input {packed}" in r.stderr and r.stdout == "", r.stderr
    assert packed.read_bytes() == before
