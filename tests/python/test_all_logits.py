"""moestream_step_all_logits: every token's logits from one call, bit for bit
what stepping the tokens one at a time gives, across chunks of the library's
batch, architectures and I/O modes; misuse leaves the context as it was."""
import ctypes

import numpy as np
import pytest

from moestream._errors import Status

N_TOKENS = 70   # more than one internal chunk (64 tokens)
ARCHS = ("qwen3moe", "gpt-oss", "deepseek2")


@pytest.fixture(scope="module", params=ARCHS)
def model(request, tmp_path_factory):
    from tools.make_model import ModelSpec, make_model
    path = tmp_path_factory.mktemp("all_logits") / f"{request.param}.gguf"
    spec = ModelSpec(arch=request.param, n_embd=128, n_layer=2, n_expert=8, n_expert_used=2, n_vocab=300,
                     quant_mix="mixed", seed=21)
    make_model(path, spec)
    return path, spec


def tokens(n, seed=3):
    return np.random.default_rng(seed).integers(0, 300, size=n).tolist()


def one_at_a_time(ctx, toks):
    return np.stack([ctx.step([t]) for t in toks])


@pytest.mark.parametrize("io_mode", ["mmap", "direct"])
def test_every_row_equals_stepping_one_token_at_a_time(binding, model, io_mode, monkeypatch):
    path, spec = model
    if io_mode == "direct":
        # One layer's experts in the cache: every chunk streams.
        monkeypatch.setenv("MOESTREAM_CACHE_SLOTS", str(spec.n_expert))
    toks = tokens(N_TOKENS + 5)
    with binding.Context(path, n_ctx=128, n_threads=2, io_mode=io_mode, profile_path="") as ctx:
        expected = one_at_a_time(ctx, toks)
        ctx.reset()
        # From position 0 across a chunk boundary, then from a position inside the context.
        got = np.concatenate([ctx.step_all_logits(toks[:N_TOKENS]), ctx.step_all_logits(toks[N_TOKENS:])])
        assert ctx.n_past == len(toks)
    assert got.shape == (len(toks), 300) and got.dtype == np.float32
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("io_mode", ["mmap", "direct"])
def test_chunk_size_changes_no_logit(binding, model, io_mode, monkeypatch):
    """max_batch splits a step into chunks of that many tokens: the rows are
    the same bits whatever the chunks (1, 7, the default 64 or the whole step)."""
    path, spec = model
    if io_mode == "direct":
        monkeypatch.setenv("MOESTREAM_CACHE_SLOTS", str(spec.n_expert))
    toks = tokens(100, seed=8)
    results = []
    for max_batch in (0, 1, 7, 100):
        with binding.Context(path, n_ctx=128, n_threads=2, io_mode=io_mode, profile_path="",
                             max_batch=max_batch) as ctx:
            results.append(ctx.step_all_logits(toks))
            assert ctx.stats()["steps"] == 1
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_last_row_is_what_step_returns(binding, model):
    path, _ = model
    toks = tokens(9, seed=4)
    with binding.Context(path, n_ctx=32, n_threads=1, profile_path="") as ctx:
        last = ctx.step(toks)
        ctx.reset()
        rows = ctx.step_all_logits(toks)
    np.testing.assert_array_equal(rows[-1], last)
    assert not np.array_equal(rows[0], rows[-1])


def test_misuse_keeps_the_context(lib, binding, model):
    path, _ = model
    with binding.Context(path, n_ctx=16, n_threads=1, profile_path="") as ctx:
        before = ctx.step([1, 2, 3])
        raw = lib.raw("moestream_step_all_logits")
        toks = (ctypes.c_int32 * 2)(4, 5)
        with ctx._claim() as handle:
            assert raw(handle, toks, 2, None) == Status.INVALID_ARGUMENT
        assert "logits_out" in lib.last_error()
        with pytest.raises(binding.Error) as bad_token:
            ctx.step_all_logits([4, 300])
        assert bad_token.value.status == Status.INVALID_ARGUMENT
        with pytest.raises(binding.Error) as full:
            ctx.step_all_logits(tokens(14))
        assert full.value.status == Status.CONTEXT_FULL
        assert ctx.n_past == 3
        # The context continues as if the failed calls had not happened.
        ctx.reset()
        np.testing.assert_array_equal(ctx.step_all_logits([1, 2, 3])[-1], before)
    assert raw(None, toks, 2, (ctypes.c_float * 600)()) == Status.INVALID_ARGUMENT


def test_automatic_chunks_grow_when_streaming_and_never_cost_the_open(binding, tmp_path):
    """max_batch 0 lets a streaming context take chunks of 512 tokens when the
    budget keeps (nearly) every cache slot; at the least budget that opens with
    64-token chunks it keeps 64 instead of failing."""
    from tools.make_model import ModelSpec, make_model
    path = tmp_path / "m.gguf"
    make_model(path, ModelSpec(arch="qwen3moe", n_embd=128, n_layer=2, n_expert=8, n_expert_used=2, n_vocab=300,
                               quant_mix="q8_0", seed=4))
    big = 256 << 20
    with binding.Context(path, n_ctx=1024, io_mode="pread", memory_budget=big, profile_path="") as ctx:
        assert "chunks of 512 tokens" in ctx.io_mode_reason
    with binding.Context(path, n_ctx=1024, io_mode="pread", memory_budget=big, profile_path="",
                         max_batch=64) as ctx:
        assert "chunks of" not in ctx.io_mode_reason
    # The least budget (in MiB) that opens with 64-token chunks opens automatic ones too.
    least = next(mib << 20 for mib in range(1, 256) if _opens(binding, path, mib << 20, 64))
    with binding.Context(path, n_ctx=1024, io_mode="pread", memory_budget=least, profile_path="") as ctx:
        assert ctx.stats()["resident_bytes"] <= least


def test_automatic_chunks_are_named_as_clamped_to_the_context(binding, tmp_path):
    """A context shorter than the automatic chunk steps in chunks of n_ctx
    tokens, and its reason names that chunk; one no longer than the default
    64 keeps the default chunk and names none."""
    from tools.make_model import ModelSpec, make_model
    path = tmp_path / "m.gguf"
    make_model(path, ModelSpec(arch="qwen3moe", n_embd=128, n_layer=2, n_expert=8, n_expert_used=2, n_vocab=300,
                               quant_mix="q8_0", seed=4))
    big = 256 << 20
    for n_ctx in (100, 300):
        with binding.Context(path, n_ctx=n_ctx, io_mode="pread", memory_budget=big, profile_path="") as ctx:
            assert f"steps in chunks of {n_ctx} tokens" in ctx.io_mode_reason
            assert "chunks of 512" not in ctx.io_mode_reason and "chunks of 256" not in ctx.io_mode_reason
    with binding.Context(path, n_ctx=64, io_mode="pread", memory_budget=big, profile_path="") as ctx:
        assert "chunks of" not in ctx.io_mode_reason


def _opens(binding, path, budget, max_batch):
    try:
        binding.Context(path, n_ctx=1024, io_mode="pread", memory_budget=budget, profile_path="",
                        max_batch=max_batch).close()
        return True
    except binding.Error as e:
        assert e.status == binding.Status.OUT_OF_MEMORY, e.message
        return False
