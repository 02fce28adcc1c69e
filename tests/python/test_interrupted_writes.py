"""A command ended by Ctrl-C (SIGINT) or SIGTERM while it writes a file leaves
no temporary file behind: the library's temporaries have no name until they
are renamed into place, the CLI's own are removed by its signal handler."""
import os
import signal
import subprocess
import time

import pytest


@pytest.fixture(scope="module")
def big_model(cli_path, tmp_path_factory):
    """Large enough (about 100 MB) that packing it takes a while."""
    path = tmp_path_factory.mktemp("interrupted") / "m.gguf"
    subprocess.run([str(cli_path), "generate", "--preset", "small", "--layers", "8", "--experts", "32",
                    "--ff-expert", "512", "--embd", "512", "--quant", "q8_0", "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    return path


def files_open_in(pid, directory):
    """What the process has open inside `directory` (a temporary, named or not)."""
    found = []
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith(str(directory) + "/"):
            found.append(target)
    return found


def interrupt_while_writing(cli_path, args, out_dir, sig):
    """Runs the CLI, sends `sig` once it has a file open in `out_dir`, and
    returns its exit status (negative: the signal that ended it)."""
    def default_disposition():
        signal.signal(sig, signal.SIG_DFL)  # a test runner may have started us with it ignored

    proc = subprocess.Popen([str(cli_path), *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=default_disposition)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if files_open_in(proc.pid, out_dir):
                proc.send_signal(sig)
                break
            time.sleep(0.0005)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, proc.stderr.read().decode()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("command", ["pack", "generate", "logits"])
def test_an_interrupted_command_leaves_no_temporary(cli_path, big_model, tmp_path, command, sig):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = {
        "pack": ["pack", big_model, "-o", out_dir / "m.moepack"],
        "generate": ["generate", "--preset", "small", "--layers", "8", "--experts", "32", "--ff-expert", "512",
                     "--embd", "512", "--quant", "q8_0", "-o", out_dir / "g.gguf"],
        # The CLI's own temporary: named, in the target's directory, opened before the model.
        "logits": ["logits", "-m", big_model, "--tokens", ",".join(["1"] * 64), "--batch", "1", "--all",
                   "--threads", "1", "--out", out_dir / "l.bin"],
    }[command]
    status, stderr = interrupt_while_writing(cli_path, args, out_dir, sig)
    assert status == -sig, (status, stderr)  # ended by the signal while writing
    assert sorted(p.name for p in out_dir.iterdir()) == []
