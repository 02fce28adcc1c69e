"""Misuse of the context C API through raw ctypes calls: NULL handles and
outputs, wrong struct_size, bad token ids, n_tokens <= 0, a full context and the
tokenizer entry points of a build without a tokenizer. Every failure must come
back as a status with a message and leave the context as it was."""
import ctypes

import pytest

from capi_support import N_CTX, open_ctx, opened, step
from moestream import _ffi
from moestream._errors import Status

N_VOCAB = 300


@pytest.fixture(scope="session")
def model_path(tmp_path_factory):
    from tools.make_model import ModelSpec, make_model
    path = tmp_path_factory.mktemp("capi") / "m.gguf"
    make_model(path, ModelSpec(arch="qwen2moe", n_embd=128, n_layer=2, n_expert=6, n_expert_used=2,
                               n_vocab=N_VOCAB, quant_mix="q8_0", seed=11))
    return path


@pytest.fixture
def ctx(lib, model_path):
    with opened(lib, model_path) as handle:
        yield handle


def test_open_rejects_null_and_wrong_struct_size(lib, model_path):
    out = _ffi.ContextPtr()
    assert lib.raw("moestream_open")(None, ctypes.byref(out)) == Status.INVALID_ARGUMENT
    assert not out
    params = _ffi.Params()
    lib.moestream_params_init(ctypes.byref(params))
    params.model_path = str(model_path).encode()
    assert lib.raw("moestream_open")(ctypes.byref(params), None) == Status.INVALID_ARGUMENT
    params.struct_size = 16
    assert lib.raw("moestream_open")(ctypes.byref(params), ctypes.byref(out)) == Status.INVALID_ARGUMENT
    assert "struct_size" in lib.last_error()
    assert not out
    params.struct_size = ctypes.sizeof(_ffi.Params)
    params.model_path = None
    assert lib.raw("moestream_open")(ctypes.byref(params), ctypes.byref(out)) == Status.INVALID_ARGUMENT
    assert "model_path" in lib.last_error()


def test_open_accepts_the_layout_before_max_batch(lib, model_path):
    # A caller built against 0.2 / 0.3 passes sizeof = 112 (numa_placement ends
    # at 108, then 4 bytes of tail padding holding anything): max_batch is not read.
    assert _ffi.Params.max_batch.offset == 112 and _ffi.Params.reserved1.offset == 108
    status, out = open_ctx(lib, model_path, struct_size=112, reserved1=-1, max_batch=-5)
    assert status == Status.OK, lib.last_error()
    lib.moestream_close(out)
    status, out = open_ctx(lib, model_path, max_batch=-5)
    assert status == Status.INVALID_ARGUMENT and "max_batch -5" in lib.last_error()


def test_open_accepts_the_layout_before_numa_placement(lib, model_path):
    # A caller built against 0.1 passes sizeof = 104 (lookahead_layers ends at
    # 100, then 4 bytes of tail padding holding anything): neither reserved0
    # nor numa_placement is read, whatever the bytes after lookahead_layers hold.
    short = _ffi.Params.lookahead_layers.offset + 4
    short = (short + 7) // 8 * 8
    assert short == 104 and _ffi.Params.numa_placement.offset >= short
    status, out = open_ctx(lib, model_path, io_mode=2, struct_size=short, reserved0=-1, numa_placement=77)
    assert status == Status.OK, lib.last_error()
    lib.moestream_close(out)
    status, out = open_ctx(lib, model_path, io_mode=2, numa_placement=77)
    assert status == Status.INVALID_ARGUMENT and "numa_placement 77" in lib.last_error()
    assert not out


def test_open_rejects_bad_enums_and_missing_files(lib, model_path, tmp_path):
    for field, value in (("io_mode", 42), ("prefetch", -3), ("n_threads", -1), ("n_ctx", -5),
                         ("numa_placement", 2), ("cache_policy", 9)):
        for io_mode in (1, 3):  # checked whether or not the mode uses it (mmap has no cache policy)
            status, out = open_ctx(lib, model_path, **{"io_mode": io_mode, field: value})
            assert status == Status.INVALID_ARGUMENT, (field, io_mode)
            assert not out
    status, out = open_ctx(lib, tmp_path / "missing.gguf")
    assert status == Status.IO
    assert "missing.gguf" in lib.last_error()
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + b"\xff" * 60)
    status, out = open_ctx(lib, garbage)
    assert status == Status.BAD_FORMAT
    assert not out


def test_null_context_everywhere(lib):
    logits = (ctypes.c_float * 4)()
    assert step(lib, None, [1], logits) == Status.INVALID_ARGUMENT
    assert lib.raw("moestream_reset")(None) == Status.INVALID_ARGUMENT
    assert lib.raw("moestream_stats_reset")(None) == Status.INVALID_ARGUMENT
    stats = _ffi.Stats()
    lib.moestream_stats_init(ctypes.byref(stats))
    assert lib.raw("moestream_stats_get")(None, ctypes.byref(stats)) == Status.INVALID_ARGUMENT
    info = _ffi.ModelInfo()
    lib.moestream_model_info_init(ctypes.byref(info))
    assert lib.raw("moestream_model_info_get")(None, ctypes.byref(info)) == Status.INVALID_ARGUMENT
    for name in ("moestream_n_vocab", "moestream_n_ctx", "moestream_n_past"):
        assert getattr(lib, name)(None) == -1
    lib.moestream_close(None)


def test_bad_steps_keep_the_context_unchanged(lib, ctx):
    logits = (ctypes.c_float * N_VOCAB)()
    assert step(lib, ctx, [1, 2, 3], logits) == 0
    before = list(logits)
    assert lib.raw("moestream_step")(ctx, None, 2, logits) == Status.INVALID_ARGUMENT
    arr = (ctypes.c_int32 * 1)(4)
    assert lib.raw("moestream_step")(ctx, arr, 0, logits) == Status.INVALID_ARGUMENT
    assert lib.raw("moestream_step")(ctx, arr, -1, logits) == Status.INVALID_ARGUMENT
    assert step(lib, ctx, [4, N_VOCAB], logits) == Status.INVALID_ARGUMENT
    assert str(N_VOCAB) in lib.last_error()
    assert step(lib, ctx, [-1], logits) == Status.INVALID_ARGUMENT
    assert step(lib, ctx, [1] * (N_CTX - 2), logits) == Status.CONTEXT_FULL
    assert "n_ctx" in lib.last_error()
    assert lib.moestream_n_past(ctx) == 3
    assert list(logits) == before  # failed steps write no logits
    # The context continues as if the failed calls never happened.
    assert step(lib, ctx, [4], logits) == 0
    assert lib.moestream_n_past(ctx) == 4


def test_full_context_then_reset(lib, ctx):
    assert step(lib, ctx, list(range(N_CTX)), None) == 0
    assert lib.moestream_n_past(ctx) == N_CTX
    assert step(lib, ctx, [1], None) == Status.CONTEXT_FULL
    assert lib.raw("moestream_reset")(ctx) == 0
    assert lib.moestream_n_past(ctx) == 0
    assert step(lib, ctx, [1], None) == 0


def test_wrong_struct_sizes_for_outputs(lib, ctx):
    stats = _ffi.Stats()
    lib.moestream_stats_init(ctypes.byref(stats))
    assert lib.raw("moestream_stats_get")(ctx, None) == Status.INVALID_ARGUMENT
    stats.struct_size = 3
    assert lib.raw("moestream_stats_get")(ctx, ctypes.byref(stats)) == Status.INVALID_ARGUMENT
    info = _ffi.ModelInfo()
    lib.moestream_model_info_init(ctypes.byref(info))
    info.struct_size = 0
    assert lib.raw("moestream_model_info_get")(ctx, ctypes.byref(info)) == Status.INVALID_ARGUMENT
    lib.moestream_model_info_init(ctypes.byref(info))
    assert lib.raw("moestream_model_info_get")(ctx, ctypes.byref(info)) == 0
    assert info.architecture == b"qwen2moe" and info.n_vocab == N_VOCAB and info.n_ff_shared > 0


def test_tokenizer_entry_points_fail_cleanly(lib, ctx):
    n = ctypes.c_size_t(99)
    toks = (ctypes.c_int32 * 8)()
    status = lib.raw("moestream_tokenize")(ctx, b"hello", 5, 1, 0, toks, 8, ctypes.byref(n))
    assert status in (0, Status.UNSUPPORTED)
    if status == Status.UNSUPPORTED:
        assert lib.last_error()
    buf = ctypes.create_string_buffer(16)
    status = lib.raw("moestream_token_to_piece")(ctx, 1, buf, 16, ctypes.byref(n))
    assert status in (0, Status.UNSUPPORTED)
    assert lib.raw("moestream_tokenize")(None, b"x", 1, 1, 0, toks, 8, ctypes.byref(n)) == Status.INVALID_ARGUMENT
    assert isinstance(lib.moestream_token_bos(ctx), int)


def test_lookahead_layers_is_checked_whatever_the_prefetch_mode(lib, model_path, monkeypatch):
    monkeypatch.delenv("MOESTREAM_LOOKAHEAD_LAYERS", raising=False)
    for prefetch in (1, 3):  # off, lookahead
        for layers in (99, 5, -1):
            status, out = open_ctx(lib, model_path, io_mode=3, prefetch=prefetch, lookahead_layers=layers)
            assert status == Status.INVALID_ARGUMENT, (prefetch, layers)
            assert f"lookahead_layers {layers} is outside 0..4" in lib.last_error()
            assert not out
        status, out = open_ctx(lib, model_path, io_mode=3, prefetch=prefetch, lookahead_layers=4)
        assert status == Status.OK, lib.last_error()
        lib.moestream_close(out)


def test_lookahead_variable_must_be_a_layer_count(lib, model_path, monkeypatch):
    for value in ("abc", "2x", "5", "-1", " 2", "99999999999999999999"):
        monkeypatch.setenv("MOESTREAM_LOOKAHEAD_LAYERS", value)
        status, out = open_ctx(lib, model_path, io_mode=3, prefetch=3)
        assert status == Status.INVALID_ARGUMENT, value
        assert f"MOESTREAM_LOOKAHEAD_LAYERS='{value}'" in lib.last_error()
        assert not out
    # 0 means the default, as the parameter's 0 does.
    monkeypatch.setenv("MOESTREAM_LOOKAHEAD_LAYERS", "0")
    status, out = open_ctx(lib, model_path, io_mode=3, prefetch=3)
    assert status == Status.OK, lib.last_error()
    lib.moestream_close(out)
    # A valid value beats the parameter, which must still be valid itself.
    monkeypatch.setenv("MOESTREAM_LOOKAHEAD_LAYERS", "3")
    status, out = open_ctx(lib, model_path, io_mode=3, prefetch=3, lookahead_layers=1)
    assert status == Status.OK, lib.last_error()
    lib.moestream_close(out)
    status, out = open_ctx(lib, model_path, io_mode=3, prefetch=3, lookahead_layers=7)
    assert status == Status.INVALID_ARGUMENT and "lookahead_layers 7" in lib.last_error()


@pytest.mark.parametrize("variable,value", [("MOESTREAM_IO_MODE", "bogus"), ("MOESTREAM_NUMA", "everywhere"),
                                            ("MOESTREAM_CACHE_SLOTS", "0"), ("MOESTREAM_CACHE_SLOTS", "12x")])
def test_variables_set_to_values_they_do_not_take_fail_open(lib, model_path, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    status, out = open_ctx(lib, model_path, io_mode=3)
    assert status == Status.INVALID_ARGUMENT, lib.last_error()
    assert f"{variable}='{value}'" in lib.last_error()
    assert not out
