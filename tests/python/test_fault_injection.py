"""Expert read faults through a public context (MOESTREAM_FAULT_INJECT, read
at moestream_open; docs/errors.md, "Fault injection"): a failed or short read
makes moestream_step return MOESTREAM_ERR_IO naming the layer, the expert and
the errno; a delayed read changes nothing but the time; corrupted bytes from
a packed file fail its checksum; the failed step keeps nothing, and after
moestream_reset the context gives the logits of a context that never saw a
fault. Every call here returns; ctest's timeout catches a hang."""
import ctypes
import shutil

import pytest

from moestream import _ffi
from moestream._errors import Status

ENV = "MOESTREAM_FAULT_INJECT"
PROMPT = [5, 17, 150, 3, 99, 42, 7]
N_VOCAB = 200


@pytest.fixture(scope="module")
def models(lib, tmp_path_factory):
    """plain/m.gguf (experts read from the GGUF) and packed/m.gguf with its m.gguf.moepack."""
    pytest.importorskip("numpy")
    from tools.make_model import ModelSpec, make_model
    root = tmp_path_factory.mktemp("faults")
    (root / "plain").mkdir()
    (root / "packed").mkdir()
    make_model(root / "plain" / "m.gguf",
               ModelSpec(arch="qwen3moe", n_embd=128, n_layer=3, n_head=4, n_head_kv=2, n_expert=8,
                         n_expert_used=2, n_ff_expert=128, n_vocab=N_VOCAB, n_ctx=64, quant_mix="mixed", seed=4))
    shutil.copy(root / "plain" / "m.gguf", root / "packed" / "m.gguf")
    lib.moestream_pack(str(root / "packed" / "m.gguf").encode(), None)
    assert (root / "packed" / "m.gguf.moepack").exists()
    return root


def open_ctx(lib, model, io_mode=3):  # MOESTREAM_IO_PREAD
    params = _ffi.Params()
    lib.moestream_params_init(ctypes.byref(params))
    params.model_path = str(model).encode()
    params.n_threads = 2
    params.n_ctx = 32
    params.io_mode = io_mode
    params.prefetch = 1  # off: every read is a demand read, numbered in the order the pass needs them
    params.profile_path = b""
    out = _ffi.ContextPtr()
    status = lib.raw("moestream_open")(ctypes.byref(params), ctypes.byref(out))
    return status, out


def step(lib, ctx, tokens=PROMPT):
    arr = (ctypes.c_int32 * len(tokens))(*tokens)
    logits = (ctypes.c_float * N_VOCAB)()
    status = lib.raw("moestream_step")(ctx, arr, len(tokens), logits)
    return status, bytes(logits)


@pytest.fixture(scope="module")
def reference(lib, models):
    """Logits of the prompt from contexts that see no fault."""
    out = {}
    for kind in ("plain", "packed"):
        status, ctx = open_ctx(lib, models / kind / "m.gguf")
        assert status == 0, lib.last_error()
        try:
            status, logits = step(lib, ctx)
            assert status == 0, lib.last_error()
            out[kind] = logits
        finally:
            lib.moestream_close(ctx)
    return out


def fails_then_recovers(lib, model, want, expect_words):
    status, ctx = open_ctx(lib, model)
    assert status == 0, lib.last_error()
    try:
        status, _ = step(lib, ctx)
        message = lib.last_error()
        assert status == Status.IO, message
        for word in expect_words:
            assert word in message, message
        assert lib.moestream_n_past(ctx) == 0  # nothing of the failed step is kept
        assert lib.raw("moestream_reset")(ctx) == 0
        status, logits = step(lib, ctx)
        assert status == 0, lib.last_error()
        assert logits == want
    finally:
        lib.moestream_close(ctx)


@pytest.mark.parametrize("spec", ["error:errno=5", "error:errno=5:after=4", "error:errno=61:after=9"])
def test_failed_read_names_layer_expert_and_errno(lib, models, reference, monkeypatch, spec):
    monkeypatch.setenv(ENV, spec)
    errno = spec.split("errno=")[1].split(":")[0]
    fails_then_recovers(lib, models / "plain" / "m.gguf", reference["plain"],
                        ["layer ", "expert ", f"(errno {errno})"])


@pytest.mark.parametrize("kind", ["plain", "packed"])
def test_short_read(lib, models, reference, monkeypatch, kind):
    monkeypatch.setenv(ENV, "short:after=2")
    fails_then_recovers(lib, models / kind / "m.gguf", reference[kind], ["layer ", "expert ", "short read"])


def test_corrupt_bytes_fail_the_packed_checksum(lib, models, reference, monkeypatch):
    monkeypatch.setenv(ENV, "corrupt:after=1")
    fails_then_recovers(lib, models / "packed" / "m.gguf", reference["packed"],
                        ["layer ", "expert ", "fails its checksum"])


def test_every_read_failing_never_hangs(lib, models, monkeypatch):
    monkeypatch.setenv(ENV, "error:count=0")
    status, ctx = open_ctx(lib, models / "plain" / "m.gguf")
    assert status == 0, lib.last_error()
    try:
        for _ in range(3):
            assert step(lib, ctx)[0] == Status.IO
            assert lib.raw("moestream_reset")(ctx) == 0
        assert lib.moestream_n_past(ctx) == 0
    finally:
        lib.moestream_close(ctx)


def test_delayed_reads_change_only_the_time(lib, models, reference, monkeypatch):
    # Every read handed back 2 ms late at the earliest, and one failing after
    # that: the failure is reported as without the delay, and the logits after
    # a reset are exact.
    monkeypatch.setenv(ENV, "error:errno=5:after=4,delay:ms=2:count=0")
    fails_then_recovers(lib, models / "plain" / "m.gguf", reference["plain"], ["layer ", "expert ", "(errno 5)"])


@pytest.mark.parametrize("spec", ["explode", "error:errno=x", "short:at=3", "corrupt:bytes=1", "error:after",
                                  "error:errno=0", "short:count=-1", "delay:errno=5", "error,",
                                  "error:after=1,bogus"])
def test_bad_spec_fails_open(lib, models, monkeypatch, spec):
    monkeypatch.setenv(ENV, spec)
    status, ctx = open_ctx(lib, models / "plain" / "m.gguf")
    assert status == Status.INVALID_ARGUMENT
    assert not ctx
    assert ENV in lib.last_error()


def test_mapped_model_refuses_fault_injection(lib, models, monkeypatch):
    monkeypatch.setenv(ENV, "error")
    status, ctx = open_ctx(lib, models / "plain" / "m.gguf", io_mode=1)
    assert status == Status.INVALID_ARGUMENT
    assert "io_mode" in lib.last_error()


def test_through_the_binding(lib, models, reference, monkeypatch):
    import moestream
    monkeypatch.setenv(ENV, "error:errno=5:after=3")
    with moestream.Context(models / "plain" / "m.gguf", n_ctx=32, n_threads=2, io_mode="pread", prefetch="off",
                           profile_path="") as ctx:
        with pytest.raises(moestream.Error) as err:
            ctx.step(PROMPT)
        assert err.value.status == Status.IO
        assert "errno 5" in str(err.value) and "layer " in str(err.value)
        assert ctx.n_past == 0
        ctx.reset()
        logits = ctx.step(PROMPT)
        import numpy as np
        assert np.asarray(logits, dtype=np.float32).tobytes() == reference["plain"]
