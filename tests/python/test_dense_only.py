"""A deepseek2 model whose layers are all dense (leading_dense_block_count =
block_count) has no routed expert to stream: it opens in every I/O mode, the
reason says there is nothing to stream, and the logits are the same whatever
the mode."""
import ctypes

import pytest

from capi_support import opened, step
from moestream import _ffi

N_VOCAB = 300
MODES = {"auto": 0, "mmap": 1, "direct": 2, "pread": 3}


@pytest.fixture(scope="session")
def dense_model(tmp_path_factory):
    pytest.importorskip("numpy")
    from tools.make_model import ModelSpec, make_model
    path = tmp_path_factory.mktemp("dense") / "d.gguf"
    make_model(path, ModelSpec(arch="deepseek2", n_embd=64, n_layer=2, n_head=2, n_expert=4, n_expert_used=2,
                               n_ff_expert=32, n_vocab=N_VOCAB, n_ctx=64, n_dense_lead=2, quant_mix="q8_0", seed=5))
    return path


def run(lib, path, io_mode, tokens):
    """(io_mode, reason, expert cache bytes, bytes read, logits after each token) of one context."""
    rows = []
    with opened(lib, path, io_mode=io_mode) as h:
        for t in tokens:
            logits = (ctypes.c_float * N_VOCAB)()
            assert step(lib, h, [t], logits) == 0, lib.last_error()
            rows.append(list(logits))
        stats = _ffi.Stats()
        lib.moestream_stats_init(ctypes.byref(stats))
        assert lib.raw("moestream_stats_get")(h, ctypes.byref(stats)) == 0, lib.last_error()
        reason = lib.moestream_io_mode_reason(h).decode()
        return (stats.io_mode, reason, stats.expert_cache_bytes,
                stats.bytes_read_demand + stats.bytes_read_prefetch, rows)


def test_a_model_without_routed_experts_opens_in_every_mode_with_the_same_logits(lib, dense_model, monkeypatch):
    monkeypatch.delenv("MOESTREAM_IO_MODE", raising=False)
    tokens = [1, 17, 42, 299, 5]
    results = {name: run(lib, dense_model, mode, tokens) for name, mode in MODES.items()}
    base = results["mmap"][4]
    for name, (io_mode, reason, cache, read, rows) in results.items():
        assert "no layer has routed experts" in reason, (name, reason)
        assert cache == 0 and read == 0, (name, cache, read)
        assert rows == base, name
        if name in ("mmap", "pread"):
            assert io_mode == MODES[name], (name, io_mode, reason)
        elif name == "direct":  # pread where O_DIRECT is unavailable (tmpfs)
            assert io_mode in (MODES["direct"], MODES["pread"]), (name, io_mode, reason)
    assert any(abs(v) > 0 for v in base[-1])
