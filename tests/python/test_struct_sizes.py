"""struct_size is accepted only when it is exactly the size of a layout the
library knows: the struct this header declares or, for the structs that have
grown (moestream_params, moestream_stats, moestream_trace_synth_params,
moestream_generate_params, moestream_sampler_params), one of their earlier layouts. Any
other size would have the library read or write part of a field, so it is
INVALID_ARGUMENT naming struct_size, for every struct that carries one."""
import ctypes

import pytest

from capi_support import open_ctx, opened
from moestream import _ffi
from moestream._errors import Status

# The released layouts of moestream_params: up to log_level, up to
# routing_trace_path, 0.1's (up to lookahead_layers, with tail padding), 0.2/0.3's
# (up to numa_placement, with tail padding), today's.
PARAMS_SIZES = (88, 96, 104, 112, ctypes.sizeof(_ffi.Params))
STATS_SIZES = (_ffi.Stats.io_busy_ns.offset, _ffi.Stats.attention_ns.offset, ctypes.sizeof(_ffi.Stats))
# 0.2's moestream_trace_synth_params ended at seed; today's adds window and recall.
SYNTH_SIZES = (_ffi.TraceSynthParams.window.offset, ctypes.sizeof(_ffi.TraceSynthParams))
# moestream_generate_params ended at progress_user_data before deepseek2_attn_kv_b was added.
GENERATE_SIZES = (_ffi.GenerateParams.deepseek2_attn_kv_b.offset, ctypes.sizeof(_ffi.GenerateParams))
# moestream_sampler_params ended at seed before the repetition penalties were added.
SAMPLER_SIZES = (_ffi.SamplerParams.repeat_penalty.offset, ctypes.sizeof(_ffi.SamplerParams))


def wrong_sizes(known):
    """Sizes near each known one, and 0, that no layout has."""
    near = {s + d for s in known for d in (-8, -4, -1, 1, 3, 4, 8)} | {0, 8}
    return sorted(near - set(known))


@pytest.fixture(scope="module")
def model_path(small_model):
    return small_model


@pytest.fixture
def ctx(lib, model_path):
    with opened(lib, model_path) as handle:
        yield handle


def refused(lib, status):
    assert status == Status.INVALID_ARGUMENT, (status, lib.last_error())
    assert "struct_size" in lib.last_error()


def test_params_sizes(lib, model_path):
    assert PARAMS_SIZES[-1] == 120
    for size in PARAMS_SIZES:
        status, out = open_ctx(lib, model_path, struct_size=size)
        assert status == Status.OK, (size, lib.last_error())
        lib.moestream_close(out)
    for size in wrong_sizes(PARAMS_SIZES):
        status, out = open_ctx(lib, model_path, struct_size=size)
        refused(lib, status)
        assert not out


def test_stats_sizes(lib, ctx):
    get = lib.raw("moestream_stats_get")
    for size in STATS_SIZES:
        stats = _ffi.Stats()
        stats.struct_size = size
        assert get(ctx, ctypes.byref(stats)) == Status.OK, (size, lib.last_error())
    for size in wrong_sizes(STATS_SIZES):
        stats = _ffi.Stats()
        stats.io_busy_ns = stats.attention_ns = 7
        stats.struct_size = size
        refused(lib, get(ctx, ctypes.byref(stats)))
        assert stats.io_busy_ns == 7 and stats.attention_ns == 7  # not a byte written


def test_trace_synth_sizes(lib, tmp_path):
    """0.2's layout is read without the window fields: the bytes beyond it are not looked at."""
    assert SYNTH_SIZES == (72, 88)
    synth = lib.raw("moestream_trace_synth")

    def write(name, size, window, recall):
        p = _ffi.TraceSynthParams()
        lib.moestream_trace_synth_params_init(ctypes.byref(p))
        p.n_layer, p.n_expert, p.n_tokens = 4, 16, 300
        p.window, p.recall, p.struct_size = window, recall, size
        path = tmp_path / name
        return synth(ctypes.byref(p), str(path).encode()), path

    status, old = write("old.trace", SYNTH_SIZES[0], 8, 0.9)
    assert status == Status.OK, lib.last_error()
    status, order1 = write("order1.trace", SYNTH_SIZES[1], 0, 0.0)
    assert status == Status.OK, lib.last_error()
    status, windowed = write("windowed.trace", SYNTH_SIZES[1], 8, 0.9)
    assert status == Status.OK, lib.last_error()
    assert old.read_bytes() == order1.read_bytes() != windowed.read_bytes()
    for size in wrong_sizes(SYNTH_SIZES):
        status, path = write("refused.trace", size, 0, 0.0)
        refused(lib, status)
        assert not path.exists()


def test_generate_sizes(lib):
    """The earlier layout is read without deepseek2_attn_kv_b: the bytes beyond it are not looked at."""
    assert GENERATE_SIZES == (96, 104)
    size_of = lib.raw("moestream_generate_model_size")

    def model_size(struct_size, attn_kv_b):
        p = _ffi.GenerateParams()
        lib.moestream_generate_params_init(ctypes.byref(p))
        p.preset, p.deepseek2_attn_kv_b, p.struct_size = b"deepseek2-tiny", attn_kv_b, struct_size
        out = ctypes.c_uint64(0)
        return size_of(ctypes.byref(p), ctypes.byref(out)), out.value

    old, split, joint = model_size(GENERATE_SIZES[0], 1), model_size(GENERATE_SIZES[1], 0), model_size(GENERATE_SIZES[1], 1)
    assert old[0] == split[0] == joint[0] == Status.OK, lib.last_error()
    assert old[1] == split[1] != joint[1]
    for size in wrong_sizes(GENERATE_SIZES):
        refused(lib, model_size(size, 0)[0])


def test_sampler_params_sizes(lib):
    """The earlier layout gets the penalties off: the bytes beyond it are neither read nor written."""
    assert SAMPLER_SIZES == (32, 48)
    new, get = lib.raw("moestream_sampler_new"), lib.raw("moestream_sampler_params_get")
    sample, accept = lib.raw("moestream_sample"), lib.raw("moestream_sampler_accept")

    def greedy_pick(struct_size):
        p = _ffi.SamplerParams()
        lib.moestream_sampler_params_init(ctypes.byref(p))
        p.temperature, p.repeat_penalty, p.struct_size = 0.0, 4.0, struct_size
        sampler = _ffi.SamplerPtr()
        status = new(ctypes.byref(p), ctypes.byref(sampler))
        if status != Status.OK:
            return status, None, None
        try:
            seen = (ctypes.c_int32 * 1)(0)
            assert accept(sampler, seen, 1) == Status.OK
            row = (ctypes.c_float * 2)(2.0, 1.5)
            token = ctypes.c_int32(-1)
            assert sample(sampler, row, 2, ctypes.byref(token)) == Status.OK
            out = _ffi.SamplerParams()
            out.struct_size, out.repeat_penalty, out.penalty_last_n = struct_size, -7.0, -7
            assert get(sampler, ctypes.byref(out)) == Status.OK, lib.last_error()
            return status, token.value, (out.repeat_penalty, out.penalty_last_n)
        finally:
            lib.moestream_sampler_free(sampler)

    assert greedy_pick(SAMPLER_SIZES[0]) == (Status.OK, 0, (-7.0, -7))  # penalty off, fields not written
    assert greedy_pick(SAMPLER_SIZES[1]) == (Status.OK, 1, (4.0, 64))   # 2 / 4 = 0.5 < 1.5
    for size in wrong_sizes(SAMPLER_SIZES):
        refused(lib, greedy_pick(size)[0])


def test_sampler_params_get_writes_exactly_the_given_size(lib):
    """Each accepted size gets the current layout's bytes up to its size (struct_size
    keeping the size given) and not one byte past it."""
    p = _ffi.SamplerParams()
    lib.moestream_sampler_params_init(ctypes.byref(p))
    p.temperature, p.top_k, p.top_p, p.min_p, p.seed = 0.25, 7, 0.5, 0.125, 0x0123456789ABCDEF
    p.repeat_penalty, p.presence_penalty, p.frequency_penalty, p.penalty_last_n = 1.5, 0.75, 0.375, 9
    sampler = _ffi.SamplerPtr()
    assert lib.raw("moestream_sampler_new")(ctypes.byref(p), ctypes.byref(sampler)) == Status.OK, lib.last_error()
    get = lib.raw("moestream_sampler_params_get")
    full = ctypes.sizeof(_ffi.SamplerParams)
    try:
        for size in SAMPLER_SIZES:
            buf = (ctypes.c_uint8 * (full + 16))(*([0xA5] * (full + 16)))  # room past the largest layout
            ctypes.memmove(buf, ctypes.byref(ctypes.c_size_t(size)), ctypes.sizeof(ctypes.c_size_t))
            assert get(sampler, ctypes.cast(buf, ctypes.POINTER(_ffi.SamplerParams))) == Status.OK, lib.last_error()
            want = bytearray(bytes(p))
            want[:ctypes.sizeof(ctypes.c_size_t)] = bytes(ctypes.c_size_t(size))
            assert bytes(buf)[:size] == bytes(want[:size]), size
            assert bytes(buf)[size:] == b"\xA5" * (full + 16 - size), size
    finally:
        lib.moestream_sampler_free(sampler)


def single_size_calls(lib, ctx, model_path, tmp_path):
    """(struct type, call taking an instance) for every other sized struct."""
    sampler = _ffi.SamplerPtr()
    sp = _ffi.SamplerParams()
    lib.moestream_sampler_params_init(ctypes.byref(sp))
    lib.moestream_sampler_new(ctypes.byref(sp), ctypes.byref(sampler))
    path = str(model_path).encode()
    trace = str(tmp_path / "t.trace").encode()

    def replay_params(p):
        p.trace_path = trace
        result = _ffi.ReplayResult()
        lib.moestream_replay_result_init(ctypes.byref(result))
        return lib.raw("moestream_trace_replay")(ctypes.byref(p), ctypes.byref(result))

    def replay_result(r):
        p = _ffi.ReplayParams()
        lib.moestream_replay_params_init(ctypes.byref(p))
        p.trace_path = trace
        return lib.raw("moestream_trace_replay")(ctypes.byref(p), ctypes.byref(r))

    calls = [
        (_ffi.ModelInfo, lambda s: lib.raw("moestream_model_info_get")(ctx, ctypes.byref(s))),
        (_ffi.ModelInfo, lambda s: lib.raw("moestream_inspect")(path, 0, ctypes.byref(s))),
        (_ffi.ReadReplay, lambda s: lib.raw("moestream_read_log_replay")(ctx, ctypes.byref(s))),
        (_ffi.TraceInfo, lambda s: lib.raw("moestream_trace_info_get")(trace, ctypes.byref(s))),
        (_ffi.ReplayParams, replay_params),
        (_ffi.ReplayResult, replay_result),
    ]
    return calls, sampler


INIT = {_ffi.ModelInfo: "moestream_model_info_init", _ffi.SamplerParams: "moestream_sampler_params_init",
        _ffi.ReadReplay: "moestream_read_replay_init",
        _ffi.TraceSynthParams: "moestream_trace_synth_params_init", _ffi.TraceInfo: "moestream_trace_info_init",
        _ffi.ReplayParams: "moestream_replay_params_init", _ffi.ReplayResult: "moestream_replay_result_init"}


def test_every_other_struct_takes_only_its_own_size(lib, ctx, model_path, tmp_path):
    calls, sampler = single_size_calls(lib, ctx, model_path, tmp_path)
    try:
        for struct, call in calls:
            for size in wrong_sizes((ctypes.sizeof(struct),)):
                s = struct()
                getattr(lib, INIT[struct])(ctypes.byref(s))
                s.struct_size = size
                refused(lib, call(s))
    finally:
        lib.moestream_sampler_free(sampler)
    assert not (tmp_path / "t.trace").exists()
