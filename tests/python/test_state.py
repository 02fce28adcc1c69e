"""State save/load across processes: one process runs a prompt and saves, a
second process loads the file and continues; its logits must equal, bit for
bit, those of a third process that never stopped. Also the C API's argument
checks for moestream_state_save/load."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from moestream._errors import Status

ARCHS = ("qwen3moe", "llama", "olmoe", "qwen2moe")
PROMPT = [5, 17, 150, 3, 99, 42, 7]
CONTINUATION = [131, 64, 2, 18]

# Runs in a child interpreter: argv = mode model state out.
CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import moestream
    mode, model, state, out = sys.argv[1:5]
    prompt = [int(t) for t in sys.argv[5].split(",")]
    cont = [int(t) for t in sys.argv[6].split(",")]
    with moestream.Context(model, n_ctx=32, n_threads=2, profile_path="") as ctx:
        if mode in ("save", "straight"):
            ctx.step(prompt, logits=False)
        if mode == "save":
            ctx.save_state(state)
            sys.exit(0)
        if mode == "load":
            ctx.load_state(state)
            assert ctx.n_past == len(prompt), ctx.n_past
        rows = [np.asarray(ctx.step([t]), dtype=np.float32) for t in cont]
        np.save(out, np.stack(rows))
""")


@pytest.fixture(scope="module")
def env():
    if not os.environ.get("MOESTREAM_LIB"):
        pytest.skip("MOESTREAM_LIB not set (run through ctest)")
    return dict(os.environ)


def run_child(env, *args):
    cmd = [sys.executable, "-c", CHILD, *map(str, args),
           ",".join(map(str, PROMPT)), ",".join(map(str, CONTINUATION))]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("arch", ARCHS)
def test_continuing_in_another_process_is_bit_identical(env, arch, tmp_path):
    np = pytest.importorskip("numpy")
    from tools.make_model import ModelSpec, make_model
    model = tmp_path / "m.gguf"
    make_model(model, ModelSpec(arch=arch, n_embd=128, n_layer=2, n_head=4, n_head_kv=2, n_expert=8,
                                n_expert_used=2, n_vocab=200, n_ctx=64, quant_mix="mixed", seed=5))
    state = tmp_path / "s.state"
    run_child(env, "save", model, state, tmp_path / "unused.npy")
    run_child(env, "load", model, state, tmp_path / "loaded.npy")
    run_child(env, "straight", model, state, tmp_path / "straight.npy")
    loaded = np.load(tmp_path / "loaded.npy")
    straight = np.load(tmp_path / "straight.npy")
    assert loaded.shape == (len(CONTINUATION), 200)
    assert loaded.tobytes() == straight.tobytes()


def test_state_calls_reject_null_arguments(env, tmp_path):
    from moestream import _ffi
    from tools.make_model import ModelSpec, make_model
    lib = _ffi.lib()
    path = str(tmp_path / "x.state").encode()
    assert lib.raw("moestream_state_save")(None, path) == Status.INVALID_ARGUMENT
    assert lib.raw("moestream_state_load")(None, path) == Status.INVALID_ARGUMENT
    model = tmp_path / "m.gguf"
    make_model(model, ModelSpec(arch="qwen3moe", n_embd=64, n_layer=1, n_vocab=64, seed=1))
    params = _ffi.Params()
    lib.moestream_params_init(ctypes.byref(params))
    params.model_path = str(model).encode()
    params.n_ctx = 8
    params.profile_path = b""
    ctx = _ffi.ContextPtr()
    assert lib.raw("moestream_open")(ctypes.byref(params), ctypes.byref(ctx)) == 0
    try:
        assert lib.raw("moestream_state_save")(ctx, None) == Status.INVALID_ARGUMENT
        assert "path" in lib.last_error()
        assert lib.raw("moestream_state_load")(ctx, None) == Status.INVALID_ARGUMENT
        assert lib.raw("moestream_state_save")(ctx, b"") == Status.INVALID_ARGUMENT
        assert lib.raw("moestream_state_load")(ctx, path) == Status.IO
        assert "x.state" in lib.last_error()
        assert lib.raw("moestream_state_save")(ctx, path) == 0
        assert lib.raw("moestream_state_load")(ctx, path) == 0
    finally:
        lib.moestream_close(ctx)
