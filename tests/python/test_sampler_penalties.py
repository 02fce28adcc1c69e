"""Repetition penalties through the binding: draws against the penalised row
computed here (negative penalties and the whole-history window too), accept
+ drawn history, invalid values, the earlier
moestream_sampler_params layout, and a state round trip that continues the
same tokens."""
import ctypes
import math
from collections import Counter

import pytest

from moestream._errors import Status

np = pytest.importorskip("numpy")


def penalised(row, history, repeat, presence, frequency, last_n):
    """The documented rule in float32, independently of the library (last_n -1:
    the whole history, which here is far shorter than the largest window)."""
    out = np.array(row, dtype=np.float32)
    f32 = np.float32
    window = history if last_n == -1 else history[-last_n:] if last_n else []
    for token, count in Counter(window).items():
        if token >= len(out):
            continue
        v = out[token]
        v = v / f32(repeat) if v > 0 else v * f32(repeat)
        out[token] = v - (f32(count) * f32(frequency) + f32(presence))
    return out


@pytest.mark.parametrize("rule", [
    dict(repeat_penalty=1.6, presence_penalty=0.3, frequency_penalty=0.45, penalty_last_n=5),
    dict(repeat_penalty=1.6, presence_penalty=-0.3, frequency_penalty=-0.45, penalty_last_n=5),
    dict(repeat_penalty=0.7, presence_penalty=-0.5, frequency_penalty=0.2, penalty_last_n=-1),
], ids=["positive", "negative", "whole-history"])
def test_draws_follow_the_direct_computation(binding, rule):
    row = np.array([math.sin(i * 1.3) * 2.0 for i in range(10)], dtype=np.float32)  # both signs
    prompt = [2, 2, 9, 30, 2]  # 30 is beyond the row
    with binding.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=17, **rule) as pen, \
            binding.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=17) as plain:
        pen.accept(prompt)
        history = list(prompt)
        for step in range(200):
            want = penalised(row, history, rule["repeat_penalty"], rule["presence_penalty"],
                             rule["frequency_penalty"], rule["penalty_last_n"])
            token = pen.sample(row)
            assert token == plain.sample(want), step
            history.append(token)
        assert pen.params["penalty_last_n"] == rule["penalty_last_n"]
        assert pen.params["presence_penalty"] == pytest.approx(rule["presence_penalty"])


def test_greedy_history_from_accept_and_draws(binding):
    # Presence 0.5 over a window of 2: each pick penalises itself.
    with binding.Sampler(temperature=0, presence_penalty=0.5, penalty_last_n=2) as s:
        row = [1.0, 0.9, 0.8]
        s.accept([1])
        assert [s.sample(row) for _ in range(3)] == [0, 2, 1]
        s.reset()
        assert s.sample(row) == 0  # history forgotten: nothing penalised
        s.accept(np.array([0], dtype=np.int32))
        assert s.sample(row) == 1


def test_penalties_off_by_default(binding):
    with binding.Sampler(seed=3) as s:
        p = s.params
        assert (p["repeat_penalty"], p["presence_penalty"], p["frequency_penalty"], p["penalty_last_n"]) \
            == (1.0, 0.0, 0.0, 64)


def test_whole_history_window_reaches_past_the_default(binding):
    # Token 0 and then 100 others: the default window of 64 has let 0 go.
    seen = [0] + list(range(2, 102))
    for last_n, want in ((64, 0), (-1, 1)):
        with binding.Sampler(temperature=0, presence_penalty=0.5, penalty_last_n=last_n) as s:
            s.accept(seen)
            assert s.sample([1.0, 0.9]) == want, last_n


def test_invalid_penalties_and_accept_arguments(binding):
    nan, inf = float("nan"), float("inf")
    for name, value in (("repeat_penalty", 0.0), ("repeat_penalty", -1.0), ("repeat_penalty", nan),
                        ("presence_penalty", nan), ("presence_penalty", -inf), ("frequency_penalty", inf),
                        ("penalty_last_n", -2), ("penalty_last_n", 65537)):
        with pytest.raises(binding.Error) as err:
            binding.Sampler(**{name: value})
        assert err.value.status == Status.INVALID_ARGUMENT
        assert name in err.value.message
    with binding.Sampler(temperature=0, repeat_penalty=2.0) as s:
        s.accept([0])
        with pytest.raises(binding.Error) as err:
            s.accept([1, -3])
        assert err.value.status == Status.INVALID_ARGUMENT
        assert s.sample([2.0, 1.5]) == 1  # 0 still penalised, nothing of the refused call recorded
        with pytest.raises(binding.Error):
            s.accept([2**31])


def test_accept_and_reset_through_the_c_api(lib):
    from moestream import _ffi
    accept, reset = lib.raw("moestream_sampler_accept"), lib.raw("moestream_sampler_reset")
    assert accept(None, None, 0) == Status.INVALID_ARGUMENT
    assert reset(None) == Status.INVALID_ARGUMENT
    sp = _ffi.SamplerParams()
    lib.moestream_sampler_params_init(ctypes.byref(sp))
    sampler = _ffi.SamplerPtr()
    lib.moestream_sampler_new(ctypes.byref(sp), ctypes.byref(sampler))
    try:
        assert accept(sampler, None, 0) == Status.OK
        assert accept(sampler, None, 1) == Status.INVALID_ARGUMENT
        tokens = (ctypes.c_int32 * 2)(1, 2)
        assert accept(sampler, tokens, -1) == Status.INVALID_ARGUMENT
        assert accept(sampler, tokens, 2) == Status.OK
        assert reset(sampler) == Status.OK
    finally:
        lib.moestream_sampler_free(sampler)


def test_state_round_trip_continues_with_the_history(binding, small_model, tmp_path):
    state = tmp_path / "p.state"
    rule = dict(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.9, presence_penalty=0.6,
                frequency_penalty=0.4, penalty_last_n=6)
    prompt = [3, 9, 27, 9]

    def draw(ctx, sampler, token, n):
        out = []
        for _ in range(n):
            token = sampler.sample(ctx.step([token]))
            out.append(token)
        return out

    with binding.Context(small_model, n_ctx=48, n_threads=1, profile_path="") as ctx, \
            binding.Sampler(seed=11, **rule) as sampler:
        sampler.accept(prompt)
        token = sampler.sample(ctx.step(prompt))
        token = draw(ctx, sampler, token, 4)[-1]
        ctx.save_state(state, sampler)
        straight = draw(ctx, sampler, token, 12)

    with binding.Context(small_model, n_ctx=48, n_threads=1, profile_path="") as ctx, \
            binding.Sampler(temperature=0, seed=1) as restored:
        ctx.load_state(state, restored)
        assert restored.params["penalty_last_n"] == 6
        assert draw(ctx, restored, token, 12) == straight
