"""MOESTREAM_ERR_BUSY without timing: the log callback runs on the calling
thread while the context (and, for the *_with_sampler calls, the sampler) is
claimed. From inside it a second thread calls into the same handles and is
joined before the callback returns, so its calls overlap the first call by
construction, never by luck. They must all return BUSY and change nothing;
the first call then completes normally."""
import ctypes
import threading

import pytest

from capi_support import opened
from moestream import _ffi
from moestream._errors import Status

N_VOCAB = 64  # the small_model fixture's vocabulary (conftest.py)
DEBUG = 3


@pytest.fixture(scope="module")
def model(small_model):
    return small_model


class Interloper:
    """A log callback that, on the first message starting with `trigger`, runs
    `probe` on a second thread and waits for it: `fn` for the C API,
    `binding_log` for moestream.Context(log=...)."""

    def __init__(self, trigger, probe):
        self.trigger, self.probe = trigger, probe
        self.results, self.errors, self.fired = [], [], 0
        self.fn = _ffi.LOG_FN(lambda level, message, _user: self.binding_log(level, message.decode()))

    def binding_log(self, _level, message):
        if self.fired or not message.startswith(self.trigger):
            return
        self.fired += 1

        def run():
            try:
                self.results.extend(self.probe())
            except Exception as e:  # reported by the test, never raised into C
                self.errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        t.join()


def opened_with(lib, model, interloper):
    """A context whose DEBUG log lines go to the interloper."""
    return opened(lib, model, n_ctx=16, log_fn=interloper.fn, log_level=DEBUG)


def tokens(*ids):
    return (ctypes.c_int32 * len(ids))(*ids), len(ids)


def test_second_thread_inside_step_gets_busy(lib, model, tmp_path):
    state = tmp_path / "never.state"
    holder = {}

    def probe():
        ctx = holder["ctx"]
        arr, n = tokens(9)
        stats = _ffi.Stats()
        lib.moestream_stats_init(ctypes.byref(stats))
        calls = [
            ("step", lambda: lib.raw("moestream_step")(ctx, arr, n, None)),
            ("state_save", lambda: lib.raw("moestream_state_save")(ctx, str(state).encode())),
            ("state_load", lambda: lib.raw("moestream_state_load")(ctx, str(state).encode())),
            ("reset", lambda: lib.raw("moestream_reset")(ctx)),
            ("stats_get", lambda: lib.raw("moestream_stats_get")(ctx, ctypes.byref(stats))),
        ]
        out = []
        for name, call in calls:
            status = call()
            out.append((name, status, lib.last_error()))  # last_error is per thread: read it here
        return out

    interloper = Interloper("step", probe)
    with opened_with(lib, model, interloper) as ctx:
        holder["ctx"] = ctx
        arr, n = tokens(1, 2, 3)
        assert lib.raw("moestream_step")(ctx, arr, n, None) == 0, lib.last_error()
        assert interloper.fired == 1 and not interloper.errors, interloper.errors
        assert [r[:2] for r in interloper.results] == [(name, Status.BUSY) for name, _, _ in interloper.results]
        assert len(interloper.results) == 5
        for name, _, message in interloper.results:
            assert "another thread" in message, (name, message)
        # None of the refused calls did anything: the first step's three tokens
        # are all there is, and no state file was written.
        assert lib.moestream_n_past(ctx) == 3
        assert not state.exists()
        # Once the first call has returned, the handle is free again.
        arr, n = tokens(4)
        assert lib.raw("moestream_step")(ctx, arr, n, None) == 0
        assert lib.moestream_n_past(ctx) == 4


def test_second_thread_inside_save_with_sampler_gets_busy(lib, model, tmp_path):
    """state_save_with_sampler claims the sampler too: sampling from it, or
    loading into it, on another thread meanwhile is refused."""
    state = tmp_path / "s.state"
    holder = {}

    def probe():
        logits = (ctypes.c_float * N_VOCAB)(*([0.0] * N_VOCAB))
        token = ctypes.c_int32(-1)
        out = [("sample", lib.raw("moestream_sample")(holder["sampler"], logits, N_VOCAB, ctypes.byref(token)))]
        out.append(("step", lib.raw("moestream_step")(holder["ctx"], *tokens(5), None)))
        return [(name, status, lib.last_error()) for name, status in out]

    interloper = Interloper("saving state", probe)
    with opened_with(lib, model, interloper) as ctx:
        sp = _ffi.SamplerParams()
        lib.moestream_sampler_params_init(ctypes.byref(sp))
        sampler = _ffi.SamplerPtr()
        lib.moestream_sampler_new(ctypes.byref(sp), ctypes.byref(sampler))
        holder.update(ctx=ctx, sampler=sampler)
        try:
            arr, n = tokens(1, 2)
            assert lib.raw("moestream_step")(ctx, arr, n, None) == 0
            assert lib.raw("moestream_state_save_with_sampler")(ctx, sampler, str(state).encode()) == 0
            assert interloper.fired == 1 and not interloper.errors, interloper.errors
            assert [r[:2] for r in interloper.results] == [("sample", Status.BUSY), ("step", Status.BUSY)]
            assert all("another thread" in m for _, _, m in interloper.results)
            assert state.exists()
            assert lib.raw("moestream_state_load_with_sampler")(ctx, sampler, str(state).encode()) == 0
            assert lib.moestream_n_past(ctx) == 2
        finally:
            lib.moestream_sampler_free(sampler)


def test_binding_call_from_another_thread_inside_step_gets_busy(lib, model):
    import moestream
    box = {}
    interloper = Interloper("step", lambda: box["ctx"].step([7], logits=False))
    with moestream.Context(model, n_ctx=16, n_threads=1, profile_path="", log=interloper.binding_log,
                           log_level="debug") as ctx:
        box["ctx"] = ctx
        ctx.step([1, 2, 3], logits=False)
        assert interloper.fired == 1
        assert [getattr(e, "status", e) for e in interloper.errors] == [Status.BUSY]
        assert ctx.n_past == 3


# --- closing a handle while a call is inside it ------------------------------------


def test_close_from_another_thread_inside_step_leaves_the_context_open(lib, model):
    """moestream_close cannot return a status, but while a call holds the
    context it must not free it under that call: it leaves the context open
    and says why in the thread's last error."""
    holder = {}

    def probe():
        lib.moestream_close(holder["ctx"])
        return [lib.last_error()]

    interloper = Interloper("step", probe)
    with opened_with(lib, model, interloper) as ctx:
        holder["ctx"] = ctx
        arr, n = tokens(1, 2, 3)
        assert lib.raw("moestream_step")(ctx, arr, n, None) == 0, lib.last_error()
        assert interloper.fired == 1 and not interloper.errors, interloper.errors
        assert "in use by a call in progress" in interloper.results[0], interloper.results
        assert lib.moestream_n_past(ctx) == 3
        arr, n = tokens(4)
        assert lib.raw("moestream_step")(ctx, arr, n, None) == 0
    # opened_with's exit closes it for real, now that no call holds it.


def test_sampler_free_from_another_thread_inside_save_leaves_the_sampler(lib, model, tmp_path):
    holder = {}

    def probe():
        lib.moestream_sampler_free(holder["sampler"])
        return [lib.last_error()]

    interloper = Interloper("saving state", probe)
    with opened_with(lib, model, interloper) as ctx:
        sp = _ffi.SamplerParams()
        lib.moestream_sampler_params_init(ctypes.byref(sp))
        sampler = _ffi.SamplerPtr()
        lib.moestream_sampler_new(ctypes.byref(sp), ctypes.byref(sampler))
        holder["sampler"] = sampler
        try:
            state = str(tmp_path / "s.state").encode()
            assert lib.raw("moestream_state_save_with_sampler")(ctx, sampler, state) == 0, lib.last_error()
            assert interloper.fired == 1 and not interloper.errors, interloper.errors
            assert "in use by a call in progress" in interloper.results[0], interloper.results
            logits = (ctypes.c_float * N_VOCAB)(*([0.0] * N_VOCAB))
            token = ctypes.c_int32(-1)
            assert lib.raw("moestream_sample")(sampler, logits, N_VOCAB, ctypes.byref(token)) == 0
            assert 0 <= token.value < N_VOCAB
        finally:
            lib.moestream_sampler_free(sampler)


def test_binding_close_while_a_step_runs_on_another_thread_is_busy(lib, model):
    """A step runs on a thread; close() meanwhile raises BUSY and the step
    completes; once it has, close() succeeds. The step is held inside the
    library (in its log callback) until close() has been tried, so the
    overlap is certain, not a matter of timing."""
    import moestream
    inside, release = threading.Event(), threading.Event()
    outcome = {}

    def log(level, message):
        if message.startswith("step") and not inside.is_set():
            inside.set()
            release.wait(60)

    ctx = moestream.Context(model, n_ctx=16, n_threads=1, profile_path="", log=log, log_level="debug")

    def run():
        try:
            ctx.step([1, 2, 3], logits=False)
            outcome["step"] = "ok"
        except moestream.Error as e:
            outcome["step"] = e

    t = threading.Thread(target=run)
    t.start()
    try:
        assert inside.wait(60)
        with pytest.raises(moestream.Error) as info:
            ctx.close()
        assert info.value.status == Status.BUSY
        assert "in use" in info.value.message
        assert not ctx.closed
    finally:
        release.set()
        t.join()
    assert outcome["step"] == "ok"
    assert ctx.n_past == 3
    ctx.close()
    assert ctx.closed
    ctx.close()  # still idempotent


def test_binding_sampler_close_while_a_save_uses_it_is_busy(lib, model, tmp_path):
    import moestream
    box = {}
    interloper = Interloper("saving state", lambda: box["sampler"].close())
    with moestream.Context(model, n_ctx=16, n_threads=1, profile_path="", log=interloper.binding_log,
                           log_level="debug") as ctx:
        sampler = moestream.Sampler(seed=3)
        box["sampler"] = sampler
        ctx.step([1, 2], logits=False)
        ctx.save_state(tmp_path / "s.state", sampler)
        assert interloper.fired == 1
        assert [getattr(e, "status", e) for e in interloper.errors] == [Status.BUSY]
        assert not sampler.closed
        assert 0 <= sampler.sample([0.0] * N_VOCAB) < N_VOCAB
        sampler.close()
        assert sampler.closed
