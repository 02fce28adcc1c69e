"""moestream demo without --model: the model it keeps in the user's cache
directory. The demo model is several GiB, so every run here that would write
it is held to a small file size limit: the write fails early, and what the
demo did before and around it is what is checked."""
import os
import resource
import signal
import subprocess

import pytest

# The cached model's name (src/cli/demo_model.cpp): a file left at it is what a later run finds.
MODEL_NAME = "demo-qwen3moe-q4_k_m-g2.gguf"
LIMIT = 16 << 20


def demo(cli_path, cache, *args, killed_at_limit=False):
    """Runs demo with XDG_CACHE_HOME=cache and files limited to LIMIT bytes: past it a write fails
    (EFBIG), or with killed_at_limit the process dies of SIGXFSZ, as an interrupted run would."""
    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL if killed_at_limit else signal.SIG_IGN)

    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    return subprocess.run([str(cli_path), "demo", *args], capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=limit_file_size)


def files_under(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


def test_an_interrupted_generation_leaves_nothing_behind(cli_path, tmp_path):
    first = demo(cli_path, tmp_path, killed_at_limit=True)
    assert first.returncode == -signal.SIGXFSZ, (first.returncode, first.stderr)
    # Where the file system has unnamed files the killed run left nothing; else its
    # partial file, which the next run removes before writing its own.
    second = demo(cli_path, tmp_path)
    assert second.returncode == 1 and "moestream demo: " in second.stderr, second.stderr
    assert files_under(tmp_path / "moestream") == []


def test_what_a_killed_generation_left_in_the_partial_directory_is_removed(cli_path, tmp_path):
    # A run killed where the library had to name its temporary (no O_TMPFILE) left it here.
    partial = tmp_path / "moestream" / "partial"
    partial.mkdir(parents=True)
    (partial / f".{MODEL_NAME}.tmp.Ab12Cd").write_bytes(bytes(4096))
    r = demo(cli_path, tmp_path)
    assert r.returncode == 1 and "moestream demo: " in r.stderr, r.stderr
    assert files_under(tmp_path / "moestream") == []


def test_a_damaged_cached_model_is_written_again(cli_path, tmp_path):
    cache = tmp_path / "moestream"
    cache.mkdir()
    (cache / MODEL_NAME).write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(100))  # cut off in its header
    r = demo(cli_path, tmp_path)
    assert "The cached demo model cannot be used (" in r.stdout and "writing a random-weight" in r.stdout, r.stdout
    # The write of the new one failed at the size limit: the damaged file is gone all the same.
    assert r.returncode == 1 and "moestream demo: " in r.stderr, r.stderr
    assert files_under(cache) == []


def test_a_cache_directory_that_cannot_be_made_is_named(cli_path, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    r = demo(cli_path, not_a_dir)
    assert r.returncode == 1, r.stderr
    assert f"cannot create the cache directory {not_a_dir}: Not a directory" in r.stderr, r.stderr
    assert "--model" in r.stderr


@pytest.mark.parametrize("budget", ["0%", "lots", "-5"])
def test_a_bad_budget_is_refused_before_the_model_is_written(cli_path, tmp_path, budget):
    r = demo(cli_path, tmp_path, "--budget", budget)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"moestream demo: --budget takes a positive share or size (50%, 512MiB, 1.5GiB, ...), got '{budget}'" \
        in r.stderr, r.stderr
    assert not (tmp_path / "moestream").exists() or files_under(tmp_path / "moestream") == []
