"""Files the CLI writes: never one of its inputs, replaced only by a run that
succeeds, and output that cannot be written is a failure."""
import errno
import hashlib
import os
import pathlib
import resource
import signal
import subprocess

import pytest


def cli(cli_path, *args, **kwargs):
    return subprocess.run([str(cli_path), *map(str, args)], capture_output=True, text=True, timeout=300, **kwargs)


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(directory, *keep):
    """Files in `directory` other than `keep` (temporaries a run left behind)."""
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


@pytest.fixture(scope="module")
def tiny_model(cli_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("outputs") / "tiny.gguf"
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "-o", str(path)], check=True, capture_output=True)
    return path


@pytest.fixture
def model(tiny_model, tmp_path):
    """A private copy: a test that fails by destroying it spoils no other test."""
    path = tmp_path / "m.gguf"
    path.write_bytes(tiny_model.read_bytes())
    return path


def assert_refused(r, model, before):
    assert r.returncode == 1, r.stderr
    assert "it is the input" in r.stderr, r.stderr
    assert digest(model) == before


def test_pack_refuses_to_replace_its_model(cli_path, model):
    before = digest(model)
    assert_refused(cli(cli_path, "pack", model, "-o", model), model, before)
    # The same file by another spelling.
    (model.parent / "sub").mkdir()
    assert_refused(cli(cli_path, "pack", model, "-o", model.parent / "sub" / ".." / model.name), model, before)


def test_logits_and_trace_record_refuse_to_overwrite_the_model(cli_path, model):
    before = digest(model)
    assert_refused(cli(cli_path, "logits", "-m", model, "--tokens", "1,2", "--out", model), model, before)
    assert_refused(cli(cli_path, "trace", "record", "-m", model, "--prompt", "2", "--tokens", "1", "-o", model), model,
                   before)
    link = model.parent / "link.gguf"
    link.symlink_to(model)
    assert_refused(cli(cli_path, "logits", "-m", model, "--tokens", "1", "--out", link), model, before)
    assert leftovers(model.parent, "m.gguf", "link.gguf") == []


def test_run_refuses_to_save_its_state_over_an_input(cli_path, model):
    prompt = model.parent / "prompt.txt"
    prompt.write_text("hello world")
    before, text_before = digest(model), digest(prompt)
    for target in (model, prompt):
        r = cli(cli_path, "run", "-m", model, "-f", prompt, "-n", "2", "--save-state", target)
        assert_refused(r, model, before)
        assert r.stdout == ""  # refused before anything was generated
    assert digest(prompt) == text_before
    r = cli(cli_path, "run", "-m", model, "--tokens", "1", "-n", "2", "--save-state", model.parent)
    assert r.returncode == 1 and "is a directory" in r.stderr and r.stdout == "", r.stderr
    assert leftovers(model.parent, "m.gguf", "prompt.txt") == []


@pytest.mark.parametrize("args", [
    ["run", "-m", "{first}", "--tokens", "1", "-n", "2", "--save-state", "{shard}"],
    ["logits", "-m", "{first}", "--tokens", "1,2", "--out", "{shard}"],
    ["trace", "record", "-m", "{first}", "--prompt", "2", "--tokens", "1", "-o", "{shard}"],
    ["run", "-m", "{first}", "--tokens", "1", "-n", "2", "--save-state", "{first}.moepack"],
    ["pack", "{first}", "-o", "{shard}"],
])
def test_outputs_are_checked_against_every_file_of_the_model(cli_path, model, args):
    # The first shard of a split set names the others (the library opens
    # PREFIX-0000K-of-0000N.gguf beside PREFIX-00001-of-0000N.gguf), and the
    # packed file the library looks for is MODEL.moepack: checked before the
    # model is opened, so nothing runs (the copy of a model that is not split
    # would open; the names alone make the set).
    first, shard = model.parent / "s-00001-of-00002.gguf", model.parent / "s-00002-of-00002.gguf"
    first.write_bytes(model.read_bytes())
    target = pathlib.Path(args[-1].format(first=first, shard=shard))
    target.write_bytes(b"not to be replaced")
    r = cli(cli_path, *[a.format(first=first, shard=shard) for a in args])
    assert_refused(r, target, hashlib.sha256(b"not to be replaced").hexdigest())
    assert r.stdout == "", r.stdout
    assert f"it is the input {target}" in r.stderr, r.stderr


def test_run_saves_its_state_beside_a_prompt_read_from_standard_input(cli_path, model, tmp_path):
    # -f - reads standard input, not a file named "-": a state file named
    # "-" (./-) is no input of the run and is written.
    (tmp_path / "-").write_bytes(b"old")
    r = cli(cli_path, "run", "-m", model, "-f", "-", "-n", "0", "--save-state", "-", input="hello", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "-").read_bytes()[:4] != b"old", r.stderr


def test_traces_refuse_to_overwrite_the_text_or_heat_they_read(cli_path, model):
    text = model.parent / "text.txt"
    text.write_text("hello world")
    heat = model.parent / "heat.json"
    heat.write_text('{"heat": [[1, 2, 3, 4], [4, 3, 2, 1]], "k": 2}')
    before, text_before, heat_before = digest(model), digest(text), digest(heat)
    assert_refused(cli(cli_path, "trace", "record", "-m", model, "-f", text, "-o", text), model, before)
    assert_refused(cli(cli_path, "trace", "synth", "--heat", heat, "-n", "8", "-o", heat), model, before)
    assert (digest(text), digest(heat)) == (text_before, heat_before)
    assert leftovers(model.parent, "m.gguf", "text.txt", "heat.json") == []


def test_a_failed_logits_run_keeps_the_earlier_file(cli_path, model):
    out = model.parent / "l.bin"
    good = cli(cli_path, "logits", "-m", model, "--tokens", "1,2,3", "--out", out, "--threads", "1")
    assert good.returncode == 0, good.stderr
    before = out.read_bytes()
    assert len(before) > 0
    # The second step fails (an id outside the vocabulary) after the first wrote its record.
    bad = cli(cli_path, "logits", "-m", model, "--tokens", "1,2,99999999", "--batch", "2", "--all", "--out", out)
    assert bad.returncode == 1, bad.stderr
    assert out.read_bytes() == before
    fresh = model.parent / "fresh.bin"
    bad = cli(cli_path, "logits", "-m", model, "--tokens", "1,99999999", "--batch", "1", "--out", fresh)
    assert bad.returncode == 1 and not fresh.exists()
    assert leftovers(model.parent, "m.gguf", "l.bin") == []


def test_an_output_name_at_the_entry_limit_is_written(cli_path, model):
    # 255 bytes, the most a directory entry holds: the temporary beside it
    # takes a shorter form of the name, so the output is written all the same.
    out = model.parent / ("l" * 255)
    r = cli(cli_path, "logits", "-m", model, "--tokens", "1,2", "--out", out, "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
    assert leftovers(model.parent, "m.gguf", out.name) == []


def test_logits_still_write_to_a_pipe(cli_path, model):
    # A pipe cannot be replaced by a rename: it is written directly.
    r = subprocess.run([str(cli_path), "logits", "-m", str(model), "--tokens", "1,2", "--out", "/dev/stdout"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) > 0 and len(r.stdout) % 4 == 0


def test_logits_write_through_symbolic_links(cli_path, model):
    # /dev/stdout redirected to a file, and a link to a file: the bytes reach
    # what the link points at, and the link stays a link.
    with open(model.parent / "redirected.bin", "wb") as out:
        r = subprocess.run([str(cli_path), "logits", "-m", str(model), "--tokens", "1,2", "--out", "/dev/stdout"],
                           stdout=out, stderr=subprocess.PIPE, timeout=300)
    assert r.returncode == 0, r.stderr
    size = (model.parent / "redirected.bin").stat().st_size
    assert size > 0 and size % 4 == 0
    real, link = model.parent / "real.bin", model.parent / "link.bin"
    real.write_bytes(b"old")
    link.symlink_to(real)
    r = cli(cli_path, "logits", "-m", model, "--tokens", "1,2", "--out", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and real.stat().st_size == size


def test_trace_record_copies_into_pipes_and_through_links(cli_path, model):
    # The library renames a finished trace over the path it is given, which
    # would replace a link (or, for root, /dev/stdout itself): the CLI gives it
    # a file of its own and copies the trace into the target at the end.
    # /proc/self/fd/1 is such a link that no rename can replace.
    r = subprocess.run([str(cli_path), "trace", "record", "-m", str(model), "--prompt", "3", "--tokens", "2",
                        "-o", "/proc/self/fd/1"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    piped = model.parent / "piped.trace"
    piped.write_bytes(r.stdout.split(b"wrote ")[0])
    real, link = model.parent / "real.trace", model.parent / "link.trace"
    real.write_bytes(b"old")
    link.symlink_to(real)
    r = cli(cli_path, "trace", "record", "-m", model, "--prompt", "3", "--tokens", "2", "-o", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and real.read_bytes() == piped.read_bytes()
    info = cli(cli_path, "trace", "info", real)
    assert info.returncode == 0 and "tokens" in info.stdout, info.stdout + info.stderr
    # Through a link a failed run keeps the earlier trace too (written beside the file, renamed).
    bad = cli(cli_path, "trace", "record", "-m", model, "--prompt", "100000", "-o", link)
    assert bad.returncode == 1 and real.read_bytes() == piped.read_bytes()
    dangling = model.parent / "dangling.trace"
    dangling.symlink_to(model.parent / "nowhere" / "x.trace")
    bad = cli(cli_path, "trace", "record", "-m", model, "-o", dangling)
    assert bad.returncode == 1 and "symbolic link to nothing" in bad.stderr, bad.stderr
    assert leftovers(model.parent, "m.gguf", "piped.trace", "real.trace", "link.trace", "dangling.trace") == []


def test_pack_and_generate_follow_links_and_refuse_pipes(cli_path, model):
    real, link = model.parent / "real.gguf", model.parent / "link.gguf"
    real.write_bytes(b"old")
    link.symlink_to(real)
    r = cli(cli_path, "generate", "--preset", "tiny", "-o", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and digest(real) == digest(model)
    fifo = model.parent / "fifo"
    os.mkfifo(fifo)
    r = cli(cli_path, "generate", "--preset", "tiny", "-o", fifo)
    assert r.returncode == 1 and "not a plain file" in r.stderr, r.stderr
    assert fifo.is_fifo()
    assert leftovers(model.parent, "m.gguf", "real.gguf", "link.gguf", "fifo") == []


def test_a_refused_generate_prints_only_why(cli_path, tmp_path):
    # Nothing about a generation that never starts: no "generating ..." line,
    # no blank line before the error, which is the library's and names the target.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, why in ((tmp_path, f"moestream_generate_model: cannot write {tmp_path}: it is not a plain file"),
                        (fifo, f"moestream_generate_model: cannot write {fifo}: it is not a plain file"),
                        (tmp_path / "absent" / "m.gguf", "No such file or directory")):
        r = cli(cli_path, "generate", "--preset", "tiny", "-o", target)
        assert r.returncode == 1 and r.stdout == "", r.stderr
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("moestream generate: ") and why in r.stderr, \
            r.stderr


def test_a_failed_trace_record_leaves_no_trace_and_keeps_the_earlier_one(cli_path, model):
    trace = model.parent / "r.trace"
    good = cli(cli_path, "trace", "record", "-m", model, "--prompt", "3", "--tokens", "2", "-o", trace)
    assert good.returncode == 0, good.stderr
    before = trace.read_bytes()
    # Longer than the context: refused once the model is open, after the trace file was set up.
    bad = cli(cli_path, "trace", "record", "-m", model, "--prompt", "100000", "-o", trace)
    assert bad.returncode == 1 and "--prompt 100000" in bad.stderr, bad.stderr
    assert trace.read_bytes() == before
    fresh = model.parent / "fresh.trace"
    bad = cli(cli_path, "trace", "record", "-m", model, "--prompt", "100000", "-o", fresh)
    assert bad.returncode == 1 and not fresh.exists()
    # Too large for any count: a usage error naming the option, before anything is written.
    huge = cli(cli_path, "trace", "record", "-m", model, "--prompt", "1000000000000000", "-o", fresh)
    assert huge.returncode == 2 and "--prompt" in huge.stderr, huge.stderr
    assert not fresh.exists()
    assert leftovers(model.parent, "m.gguf", "r.trace") == []


def test_running_out_of_memory_is_an_error_not_an_abort(cli_path, model, tmp_path):
    # Tokenizing 256 MiB needs a 1 GiB id buffer on top of the text: more than the address space allowed.
    if os.environ.get("MOESTREAM_SANITIZE"):
        pytest.skip("a sanitized CLI reserves terabytes of shadow address space at start-up")
    text = tmp_path / "big.txt"
    with open(text, "wb") as f:
        f.truncate(256 << 20)

    def limit_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    r = cli(cli_path, "tokenize", "-m", model, "-f", text, "--threads", "1", preexec_fn=limit_address_space)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "out of memory" in r.stderr


@pytest.mark.parametrize("args", [["version"], ["generate", "--preset", "tiny", "--size-only"], ["trace", "--help"],
                                  # Flushes its output before each run it forks: the error is seen there first.
                                  ["bench", "-m", "{model}", "-n", "2", "--prompt", "2", "--warm", "--io-mode", "mmap"]])
def test_output_that_cannot_be_written_fails_the_command(cli_path, tiny_model, args):
    with open("/dev/full", "w") as full:
        r = subprocess.run([str(cli_path), *[a.format(model=tiny_model) for a in args]], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    assert r.stderr.endswith(f"cannot write output: {os.strerror(errno.ENOSPC)}\n"), r.stderr


@pytest.mark.parametrize("prompt", [["--tokens", "1,2"], ["-p", "hello"]])
def test_run_stops_generating_when_its_output_is_gone(cli_path, model, prompt):
    # A reader that has gone away (`| head -1`) with SIGPIPE ignored, as some
    # supervisors start programs: every write fails with EPIPE, and run must
    # stop there rather than generate every token it was asked for.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([str(cli_path), "run", "-m", str(model), *prompt, "-n", "4000", "--ctx", "4096",
                            "--threads", "1"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300,
                           preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN))
    finally:
        os.close(write_end)
    assert r.returncode == 1, r.stderr
    assert "cannot write output: Broken pipe" in r.stderr, r.stderr
    assert "generated" not in r.stderr, r.stderr
