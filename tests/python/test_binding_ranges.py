"""Integer arguments their C type cannot hold are refused by the binding with
INVALID_ARGUMENT naming the parameter. ctypes would otherwise keep only the
low bits: n_ctx=2**32+8 would open a context of 8 tokens, top_k=2**32+1 would
mean top_k 1 and memory_budget=-1 a budget of 2**64-1 bytes."""
import pytest

import moestream
from moestream import Status

INT32_MAX, UINT64_MAX = 2**31 - 1, 2**64 - 1


@pytest.fixture(scope="module")
def model_path(small_model):
    return small_model


def refused(name, fn, *args, **kwargs):
    with pytest.raises(moestream.Error) as info:
        fn(*args, **kwargs)
    assert info.value.status == Status.INVALID_ARGUMENT, info.value
    assert info.value.message.startswith(f"{name} "), info.value.message


@pytest.mark.parametrize("name, value", [
    ("n_ctx", 2**32 + 8), ("n_ctx", INT32_MAX + 1), ("n_threads", 2**32 + 1), ("n_threads", -2**31 - 1),
    ("lookahead_layers", 2**32 + 1), ("memory_budget", -1), ("memory_budget", UINT64_MAX + 1),
])
def test_context_parameters_out_of_range(lib, model_path, name, value):
    refused(name, moestream.Context, model_path, profile_path="", **{name: value})


def test_context_method_arguments_out_of_range(lib, model_path):
    with moestream.Context(model_path, n_ctx=16, n_threads=1, profile_path="") as ctx:
        refused("token", ctx.token_to_piece, 2**32 + 1)
        refused("capacity", ctx.start_read_log, -1)
        refused("queue_depth", ctx.replay_read_log, INT32_MAX + 1)
        assert ctx.n_ctx == 16


@pytest.mark.parametrize("name, value", [("top_k", 2**32 + 1), ("top_k", -2**31 - 1), ("seed", -1),
                                         ("seed", UINT64_MAX + 1)])
def test_sampler_parameters_out_of_range(lib, name, value):
    refused(name, moestream.Sampler, **{name: value})


def test_sampler_takes_the_extremes_of_its_types(lib):
    s = moestream.Sampler(top_k=INT32_MAX, seed=UINT64_MAX)
    assert s.params["top_k"] == INT32_MAX and s.params["seed"] == UINT64_MAX
    s.close()


def test_generator_trace_and_inspect_arguments_out_of_range(lib, tmp_path):
    refused("n_layer", moestream.generate_model_size, preset="tiny", n_layer=2**32 + 2)
    refused("seed", moestream.generate_model_size, preset="tiny", seed=-1)
    trace = tmp_path / "t.trace"
    refused("n_tokens", moestream.trace_synth, trace, n_tokens=2**63)
    refused("n_expert", moestream.trace_synth, trace, n_expert=2**32)
    refused("bytes_per_expert", moestream.trace_synth, trace, bytes_per_expert=-1)
    refused("seed", moestream.trace_synth, trace, seed=UINT64_MAX + 1)
    assert not trace.exists()
    refused("cache_bytes", moestream.trace_replay, trace, -1)
    moestream.trace_synth(trace, n_tokens=20, n_layer=2, n_expert=16, bytes_per_expert=4096)
    refused("policy", moestream.trace_replay, trace, 4096, policy="bogus")
    refused("policy", moestream.trace_replay, trace, 4096, policy=7)
    by_name = moestream.trace_replay(trace, 16 * 4096, policy="lfu-decay")
    assert moestream.trace_replay(trace, 16 * 4096, policy=2) == by_name and by_name["policy"] == "lfu-decay"
    trace.unlink()
    refused("memory_budget", moestream.inspect, tmp_path / "m.gguf", memory_budget=-1)
    refused("status", moestream.status_string, 2**32)


def test_integer_arguments_that_are_not_whole_numbers_are_type_errors(lib, model_path):
    # int() would cut 1.5 to 1 and read "16" as 16: a float token id or a
    # string for n_ctx would run with a value the caller never wrote.
    for kwargs in ({"n_threads": 1.5}, {"n_ctx": "16"}, {"memory_budget": float("nan")}):
        with pytest.raises(TypeError, match=next(iter(kwargs))):
            moestream.Context(model_path, profile_path="", **kwargs)
    for kwargs in ({"top_k": 1.5}, {"seed": "3"}, {"penalty_last_n": float("inf")}):
        with pytest.raises(TypeError, match=next(iter(kwargs))):
            moestream.Sampler(**kwargs)
    with pytest.raises(TypeError, match="n_layer"):
        moestream.generate_model_size(preset="tiny", n_layer=2.5)
    with moestream.Context(model_path, n_ctx=16.0, n_threads=1, profile_path="") as ctx:
        assert ctx.n_ctx == 16  # a float without a fraction is its integer
        for tokens in ([1.5], [1, "2"], "12", b"\x01\x02", [float("nan")]):
            with pytest.raises(TypeError):
                ctx.step(tokens)
        with pytest.raises(TypeError):
            ctx.step_all_logits([0.5])
        with pytest.raises(TypeError):
            ctx.token_to_piece(1.5)
        assert ctx.n_past == 0
        np = pytest.importorskip("numpy")
        ctx.step(np.array([1, 2], dtype=np.int64), logits=False)
        ctx.step([np.int32(3), True], logits=False)
        assert ctx.n_past == 4
    sampler = moestream.Sampler(seed=1)
    with pytest.raises(TypeError):
        sampler.accept([1, 2.5])
    sampler.close()


def test_real_arguments_that_are_not_numbers_are_type_errors(lib, tmp_path):
    # float() would read the text "0.5" as 0.5.
    for kwargs in ({"temperature": "0.5"}, {"top_p": "1"}, {"repeat_penalty": [1.1]}):
        with pytest.raises(TypeError, match=next(iter(kwargs))):
            moestream.Sampler(**kwargs)
    with pytest.raises(TypeError, match="reuse"):
        moestream.trace_synth(tmp_path / "t.trace", n_tokens=4, reuse="0.3")
    assert list(tmp_path.iterdir()) == []
    np = pytest.importorskip("numpy")
    s = moestream.Sampler(temperature=np.float32(0.5), top_p=1)
    assert s.params["temperature"] == 0.5 and s.params["top_p"] == 1.0
    s.close()
