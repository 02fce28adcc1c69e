"""State files with the sampler: one process generates with a seeded
non-greedy sampler, saves context and sampler part way and exits; a second
process loads both into a fresh context and a sampler made with other
parameters and continues; the tokens it draws equal those of a third process
that never stopped. Also the C API's rules for the *_with_sampler calls."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from capi_support import opened
from moestream._errors import Status

PROMPT = [5, 17, 150, 3, 99, 42, 7]
BEFORE, AFTER = 5, 12

# Runs in a child interpreter: argv = mode model state; prints the drawn tokens.
CHILD = textwrap.dedent("""
    import sys
    import moestream
    mode, model, state = sys.argv[1:4]
    prompt = [int(t) for t in sys.argv[4].split(",")]
    before, after = int(sys.argv[5]), int(sys.argv[6])

    def draw(ctx, sampler, token, n):
        out = []
        for _ in range(n):
            token = sampler.sample(ctx.step([token]))
            out.append(token)
        return out

    with moestream.Context(model, n_ctx=48, n_threads=2, profile_path="") as ctx:
        if mode == "load":
            sampler = moestream.Sampler(temperature=0, seed=99)
            ctx.load_state(state, sampler)
            assert sampler.params["seed"] == 2024, sampler.params
            token = int(sys.argv[7])
        else:
            sampler = moestream.Sampler(temperature=1.6, top_k=0, top_p=1.0, min_p=0.0, seed=2024)
            token = sampler.sample(ctx.step(prompt))
            token = draw(ctx, sampler, token, before)[-1]
            if mode == "save":
                ctx.save_state(state, sampler)
                print(token)
                sys.exit(0)
        print(",".join(map(str, draw(ctx, sampler, token, after))))
""")


@pytest.fixture(scope="module")
def env():
    if not os.environ.get("MOESTREAM_LIB"):
        pytest.skip("MOESTREAM_LIB not set (run through ctest)")
    return dict(os.environ)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    pytest.importorskip("numpy")
    from tools.make_model import ModelSpec, make_model
    path = tmp_path_factory.mktemp("model") / "m.gguf"
    make_model(path, ModelSpec(arch="qwen3moe", n_embd=128, n_layer=2, n_head=4, n_head_kv=2, n_expert=8,
                               n_expert_used=2, n_vocab=200, n_ctx=64, seed=8))
    return path


def run_child(env, *args):
    cmd = [sys.executable, "-c", CHILD, args[0], str(args[1]), str(args[2]), ",".join(map(str, PROMPT)),
           str(BEFORE), str(AFTER), *map(str, args[3:])]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_sampled_tokens_continue_identically_in_another_process(env, model, tmp_path):
    state = tmp_path / "s.state"
    last = run_child(env, "save", model, state)
    loaded = run_child(env, "load", model, state, last)
    straight = run_child(env, "straight", model, state)
    assert len(loaded.split(",")) == AFTER
    assert len(set(loaded.split(","))) > 1, "a flat sampler should draw more than one distinct token"
    assert loaded == straight


def new_sampler(lib, _ffi, **fields):
    sp = _ffi.SamplerParams()
    lib.moestream_sampler_params_init(ctypes.byref(sp))
    for k, v in fields.items():
        setattr(sp, k, v)
    sampler = _ffi.SamplerPtr()
    lib.moestream_sampler_new(ctypes.byref(sp), ctypes.byref(sampler))
    return sampler


def sampler_params(lib, _ffi, sampler):
    sp = _ffi.SamplerParams()
    lib.moestream_sampler_params_init(ctypes.byref(sp))
    lib.moestream_sampler_params_get(sampler, ctypes.byref(sp))
    return (sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.seed)


def test_with_sampler_calls_through_the_c_api(env, model, tmp_path):
    from moestream import _ffi
    lib = _ffi.lib()
    save = lib.raw("moestream_state_save_with_sampler")
    load = lib.raw("moestream_state_load_with_sampler")
    plain, with_sampler = (str(tmp_path / n).encode() for n in ("plain.state", "with.state"))
    assert save(None, None, plain) == Status.INVALID_ARGUMENT
    assert load(None, None, plain) == Status.INVALID_ARGUMENT

    with opened(lib, model, n_ctx=16) as ctx:
        saver = new_sampler(lib, _ffi, temperature=1.25, top_k=7, seed=31)
        other = new_sampler(lib, _ffi, temperature=0.5, seed=1)
        try:
            tokens = (ctypes.c_int32 * 3)(1, 2, 3)
            lib.moestream_step(ctx, tokens, 3, None)
            assert save(ctx, None, plain) == 0          # NULL sampler = moestream_state_save
            assert save(ctx, saver, with_sampler) == 0
            assert save(ctx, saver, None) == Status.INVALID_ARGUMENT

            before = sampler_params(lib, _ffi, other)
            lib.moestream_reset(ctx)
            # A file without a sampler section cannot restore a sampler; nothing changes.
            assert load(ctx, other, plain) == Status.STATE_MISMATCH
            assert "no sampler section" in lib.last_error()
            assert lib.moestream_n_past(ctx) == 0
            assert sampler_params(lib, _ffi, other) == before
            # Without a sampler both files load.
            assert load(ctx, None, with_sampler) == 0
            assert lib.moestream_state_load(ctx, with_sampler) == 0
            assert lib.moestream_n_past(ctx) == 3
            # With one, the sampler takes the saved parameters.
            lib.moestream_reset(ctx)
            assert load(ctx, other, with_sampler) == 0
            assert lib.moestream_n_past(ctx) == 3
            assert sampler_params(lib, _ffi, other) == sampler_params(lib, _ffi, saver)
            assert lib.raw("moestream_sampler_params_get")(None, ctypes.byref(_ffi.SamplerParams())) \
                == Status.INVALID_ARGUMENT
        finally:
            lib.moestream_sampler_free(saver)
            lib.moestream_sampler_free(other)


def test_damaged_sampler_section_is_refused_by_the_binding(env, model, tmp_path):
    import moestream
    state = tmp_path / "s.state"
    with moestream.Context(model, n_ctx=16, n_threads=1, profile_path="") as ctx, \
            moestream.Sampler(temperature=1.0, seed=5) as sampler, \
            moestream.Sampler(temperature=0.0, seed=6) as target:
        ctx.step([4, 5, 6], logits=False)
        ctx.save_state(state, sampler)
        data = bytearray(state.read_bytes())
        data[-1] ^= 0x01  # last byte of the sampler section; the checksum no longer matches
        state.write_bytes(bytes(data))
        ctx.reset()
        with pytest.raises(moestream.Error) as err:
            ctx.load_state(state, target)
        assert err.value.status == Status.BAD_FORMAT
        assert ctx.n_past == 0
        assert target.params["seed"] == 6 and target.params["temperature"] == 0.0
