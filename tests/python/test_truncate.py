"""Context.truncate / moestream_truncate: keeping the first tokens and
continuing gives, bit for bit, the logits of a context that never saw the
forgotten ones, on every architecture; bad counts and NULL handles are
refused with the context as it was. (How far back sliding-window rings reach
is tested in test_sliding_window_context.)"""
import numpy as np
import pytest

from moestream._errors import Status

ARCHS = ("qwen3moe", "gpt-oss", "deepseek2")
N_VOCAB = 300


@pytest.fixture(scope="module", params=ARCHS)
def model(request, tmp_path_factory):
    from tools.make_model import ModelSpec, make_model
    path = tmp_path_factory.mktemp("truncate") / f"{request.param}.gguf"
    make_model(path, ModelSpec(arch=request.param, n_embd=128, n_layer=2, n_expert=8, n_expert_used=2,
                               n_vocab=N_VOCAB, quant_mix="mixed", seed=5))
    return path


def tokens(n, seed):
    return np.random.default_rng(seed).integers(0, N_VOCAB, size=n).tolist()


def open_ctx(binding, path):
    return binding.Context(path, n_ctx=128, n_threads=2, profile_path="")


def test_truncated_context_continues_as_one_that_never_saw_the_rest(binding, model):
    kept, dropped, cont = tokens(20, 1), tokens(15, 2), tokens(6, 3)
    with open_ctx(binding, model) as fresh:
        fresh.step(kept)
        want = np.stack([fresh.step([t]) for t in cont])
    with open_ctx(binding, model) as ctx:
        ctx.step(kept)
        ctx.step(dropped)
        ctx.truncate(len(kept) + len(dropped))  # keeping everything changes nothing
        assert ctx.n_past == len(kept) + len(dropped)
        ctx.truncate(len(kept))
        assert ctx.n_past == len(kept)
        got = np.stack([ctx.step([t]) for t in cont])
        np.testing.assert_array_equal(got, want)
        # Back to nothing is a reset.
        ctx.truncate(0)
        assert ctx.n_past == 0
        ctx.step(kept)
        np.testing.assert_array_equal(np.stack([ctx.step([t]) for t in cont]), want)


def test_bad_counts_are_refused_leaving_the_context_as_it_was(binding, model):
    toks = tokens(10, 4)
    with open_ctx(binding, model) as ctx, open_ctx(binding, model) as untouched:
        ctx.step(toks)
        for n_keep in (-1, 11, 2**31 - 1):
            with pytest.raises(binding.Error) as err:
                ctx.truncate(n_keep)
            assert err.value.status == Status.INVALID_ARGUMENT
            assert f"cannot keep {n_keep} tokens: the context holds 10" in err.value.message
            assert ctx.n_past == 10
        # Python values the C type cannot hold are refused, not wrapped (2**32 would keep 0).
        for bad, error in ((2**32, binding.Error), (1.5, TypeError)):
            with pytest.raises(error, match="n_keep"):
                ctx.truncate(bad)
            assert ctx.n_past == 10
        untouched.step(toks)
        np.testing.assert_array_equal(ctx.step([7]), untouched.step([7]))


def test_null_and_closed_handles(lib, binding, model):
    assert lib.raw("moestream_truncate")(None, 0) == Status.INVALID_ARGUMENT
    ctx = open_ctx(binding, model)
    ctx.close()
    with pytest.raises(binding.Error):
        ctx.truncate(0)
