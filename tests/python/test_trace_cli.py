"""Trace tools through the CLI and the Python binding."""
import json
import os
import struct
import subprocess

import pytest


def run(cli, *args):
    return subprocess.run([str(cli), *map(str, args)], check=True, capture_output=True, text=True).stdout


def test_synth_info_replay_cli(cli_path, tmp_path):
    trace = tmp_path / "t.trace"
    out = run(cli_path, "trace", "synth", "--layers", "6", "--experts", "64", "--top-k", "4", "-n", "600",
              "--reuse", "0.3", "--expert-bytes", "1MiB", "-o", trace)
    assert "wrote" in out
    info = json.loads(run(cli_path, "trace", "info", trace, "--json"))
    assert info["n_tokens"] == 600 and info["n_layer"] == 6 and info["n_expert"] == 64
    assert info["expert_bytes"] == 6 * 64 * 2**20
    assert abs(info["reuse"] - 0.3) < 0.03
    rep = json.loads(run(cli_path, "trace", "replay", trace, "--budget", "25%,100%", "--policy", "all", "--json"))
    runs = rep["runs"]
    assert {r["policy"] for r in runs} == {"lru", "lfu-decay", "pinned-hot", "reuse-aware", "belady"}
    for r in runs:
        belady = next(b for b in runs if b["policy"] == "belady" and b["budget"] == r["budget"])
        assert r["hits"] <= belady["hits"]
        assert r["bytes_read"] == r["misses"] * 2**20
        if r["budget"] == "100%":
            assert r["slots"] == 6 * 64
    text = run(cli_path, "trace", "replay", trace, "--budget", "50%", "--policy", "lru")
    assert "lru" in text and "belady" in text


def test_synth_window_brings_experts_back(cli_path, tmp_path, binding):
    """--window/--recall (and the binding's window/recall) make recent experts come back: LRU gains."""
    def lru_hits(trace):
        rep = json.loads(run(cli_path, "trace", "replay", trace, "--budget", "50%", "--policy", "lru", "--json"))
        return next(r["hits"] for r in rep["runs"] if r["policy"] == "lru")

    common = ("--layers", "4", "--experts", "64", "-n", "800", "--seed", "3")
    plain, windowed, bound = tmp_path / "plain.trace", tmp_path / "windowed.trace", tmp_path / "bound.trace"
    run(cli_path, "trace", "synth", *common, "-o", plain)
    run(cli_path, "trace", "synth", *common, "--window", "12", "--recall", "0.5", "-o", windowed)
    binding.trace_synth(bound, n_tokens=800, n_layer=4, n_expert=64, seed=3, window=12, recall=0.5)
    assert bound.read_bytes() == windowed.read_bytes() != plain.read_bytes()
    assert lru_hits(windowed) > 1.1 * lru_hits(plain)
    for args in (("--recall", "0.5"), ("--window", "8", "--recall", "1.5"), ("--window", "-1")):
        bad = subprocess.run([str(cli_path), "trace", "synth", *args, "-o", tmp_path / "x"], capture_output=True,
                             text=True)
        assert bad.returncode == 2, args
    assert not (tmp_path / "x").exists()
    with pytest.raises(binding.Error) as refused:  # the library refuses it too, not only the CLI
        binding.trace_synth(tmp_path / "x", n_tokens=10, n_layer=2, n_expert=16, recall=0.5)
    assert refused.value.status == binding.Status.INVALID_ARGUMENT and "window" in str(refused.value)
    assert not (tmp_path / "x").exists()


def test_synth_refuses_nan_as_the_cli_does(cli_path, tmp_path, binding):
    """NaN is not "use the default" (only a negative value is): the library refuses it like the CLI."""
    for name in ("reuse", "skew"):
        bad = subprocess.run([str(cli_path), "trace", "synth", "--" + name, "nan", "-o", tmp_path / "x"],
                             capture_output=True, text=True)
        assert bad.returncode == 2, name
        with pytest.raises(binding.Error) as refused:
            binding.trace_synth(tmp_path / "x", n_tokens=10, n_layer=2, n_expert=16, **{name: float("nan")})
        assert refused.value.status == binding.Status.INVALID_ARGUMENT and name in str(refused.value)
        assert not (tmp_path / "x").exists()
    binding.trace_synth(tmp_path / "default.trace", n_tokens=10, n_layer=2, n_expert=16, reuse=-1, skew=-1)
    assert (tmp_path / "default.trace").exists()


def test_cli_rejects_bad_input(cli_path, tmp_path):
    bad = subprocess.run([str(cli_path), "trace", "replay", tmp_path / "missing.trace"], capture_output=True, text=True)
    assert bad.returncode == 1 and "missing.trace" in bad.stderr
    bad = subprocess.run([str(cli_path), "trace", "synth", "--reuse", "2", "-o", tmp_path / "x"], capture_output=True,
                         text=True)
    assert bad.returncode == 2


@pytest.mark.parametrize("args", [["trace", "info", "{fifo}"], ["trace", "replay", "{fifo}", "--budget", "50%"],
                                  ["trace", "synth", "--heat", "{fifo}", "-o", "{out}"], ["inspect", "{fifo}"]])
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(cli_path, tmp_path, args):
    # Opening a pipe for reading waits for a writer: the command would hang there.
    fifo = tmp_path / "named.pipe"
    os.mkfifo(fifo)
    args = [a.format(fifo=fifo, out=tmp_path / "out.trace") for a in args]
    r = subprocess.run([str(cli_path), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert str(fifo) in r.stderr and "not a regular file" in r.stderr, r.stderr


def test_info_rejects_expert_bytes_beyond_64_bits(cli_path, tmp_path):
    # 2 layers x 8 experts x 2^63 bytes: the total once wrapped to "expert bytes 0 B".
    trace = tmp_path / "huge.trace"
    header = b"MOETRACE" + struct.pack("<IIIIQQ", 1, 2, 8, 1, 2**63, 1)
    trace.write_bytes(header.ljust(64, b"\0") + struct.pack("<IHHH", 0, 0, 1, 3))
    bad = subprocess.run([str(cli_path), "trace", "info", trace], capture_output=True, text=True)
    assert bad.returncode == 1 and "9223372036854775808 bytes per expert" in bad.stderr


def test_python_binding_trace_functions(tmp_path, binding):
    moestream = binding
    trace = tmp_path / "p.trace"
    moestream.trace_synth(trace, n_tokens=300, n_layer=4, n_expert=32, n_expert_used=4, bytes_per_expert=100)
    info = moestream.trace_info(trace)
    assert info["n_tokens"] == 300 and info["n_expert_used"] == 4
    full = moestream.trace_replay(trace, 4 * 32 * 100, policy="lru")
    assert full["policy"] == "lru" and full["capacity_slots"] == 128
    belady = moestream.trace_replay(trace, 20 * 100, policy="belady")
    lru = moestream.trace_replay(trace, 20 * 100, policy="lru")
    assert lru["hits"] <= belady["hits"] and belady["policy"] == "belady"


def test_record_routing_of_a_generated_model(cli_path, tmp_path):
    model, trace = tmp_path / "m.gguf", tmp_path / "r.trace"
    subprocess.run([str(cli_path), "generate", "--preset", "small", "-o", str(model)], check=True, capture_output=True)
    out = run(cli_path, "trace", "record", "-m", model, "--prompt", "5", "--tokens", "7", "-o", trace)
    assert "wrote" in out
    info = json.loads(run(cli_path, "trace", "info", trace, "--json"))
    assert info["n_tokens"] == 12 and info["n_layer"] == 4 and info["n_expert"] == 16 and info["n_expert_used"] == 4
    assert info["bytes_per_expert"] > 0
    again = tmp_path / "again.trace"
    run(cli_path, "trace", "record", "-m", model, "--prompt", "5", "--tokens", "7", "-o", again)
    assert again.read_bytes() == trace.read_bytes()  # routing is deterministic
    rep = json.loads(run(cli_path, "trace", "replay", trace, "--budget", "100%", "--json"))
    assert all(r["hits"] <= next(b["hits"] for b in rep["runs"] if b["policy"] == "belady") for r in rep["runs"])


def test_record_the_routing_of_a_text(cli_path, lib, tmp_path):
    """-f feeds the text's tokens: the trace is the one a context writes when
    exactly those tokens are stepped through it."""
    from capi_support import opened, step
    model, trace, text = tmp_path / "m.gguf", tmp_path / "text.trace", tmp_path / "t.txt"
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "-o", str(model)], check=True, capture_output=True)
    text.write_text("The quick brown fox jumps over the lazy dog. " * 6)
    out = run(cli_path, "trace", "record", "-m", model, "-f", text, "-o", trace)
    ids = [int(t) for t in run(cli_path, "tokenize", "-m", model, "-f", text).split()]
    assert f"wrote {trace}: {len(ids)} tokens" in out
    expected = tmp_path / "expected.trace"
    with opened(lib, model, n_ctx=0, routing_trace_path=str(expected).encode()) as handle:
        assert step(lib, handle, ids) == 0, lib.last_error()
    assert trace.read_bytes() == expected.read_bytes()
    # Generated-token options do not mix with a text; a missing text writes nothing.
    bad = subprocess.run([str(cli_path), "trace", "record", "-m", str(model), "-f", str(text), "--tokens", "4",
                          "-o", str(tmp_path / "x.trace")], capture_output=True, text=True)
    assert bad.returncode == 2 and "--tokens" in bad.stderr
    missing = subprocess.run([str(cli_path), "trace", "record", "-m", str(model), "-f", str(tmp_path / "nope.txt"),
                              "-o", str(tmp_path / "y.trace")], capture_output=True, text=True)
    assert missing.returncode == 1 and "nope.txt" in missing.stderr
    assert not (tmp_path / "x.trace").exists() and not (tmp_path / "y.trace").exists()


def test_generated_model_routes_consecutive_tokens_like_independent_draws(cli_path, tmp_path):
    # Random-fed tokens of a generated model must not share experts more than
    # independent uniform draws do (k / n_expert = 4 / 16), also deep in the
    # stack where a component shared by all positions would pile up (at full
    # attention-output scale this 24-layer model overlaps 0.43).
    model, trace = tmp_path / "deep.gguf", tmp_path / "deep.trace"
    subprocess.run([str(cli_path), "generate", "--preset", "small", "--layers", "24", "-o", str(model)], check=True,
                   capture_output=True)
    run(cli_path, "trace", "record", "-m", model, "--feed", "random", "--prompt", "4", "--tokens", "100", "-o", trace)
    info = json.loads(run(cli_path, "trace", "info", trace, "--json"))
    assert info["n_tokens"] == 104 and info["n_layer"] == 24
    assert 0.2 < info["reuse"] < 0.3
    bad = subprocess.run([str(cli_path), "trace", "record", "-m", model, "--feed", "sometimes", "-o", trace],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "feed" in bad.stderr


@pytest.mark.parametrize("sub", [[], ["synth"], ["info"], ["replay"], ["record"]])
def test_help_of_every_trace_command(cli_path, sub):
    out = run(cli_path, "trace", *sub, "--help")  # exit status 0, or run() raises
    assert "moestream trace replay" in out and "%%" not in out
