"""moestream.Sampler: picks token ids from logits (moestream_sampler)."""
import ctypes

from . import _convert as cv
from . import _ffi
from ._errors import Error, Status
from ._handle import OwnedHandle


class Sampler(OwnedHandle):
    """Greedy (temperature=0) or temperature / top-k / top-p / min-p sampling
    with a seeded deterministic generator, after optional repetition
    penalties over the last ``penalty_last_n`` tokens of its history (the
    tokens it drew and those given to ``accept``): a seen token's positive
    logit is divided by ``repeat_penalty`` and a negative one multiplied, then
    ``presence_penalty`` is subtracted once and ``frequency_penalty`` once per
    occurrence (negative values favour seen tokens instead). ``penalty_last_n=-1``
    counts the whole history since creation or ``reset()`` (up to 65536 tokens).
    Arguments left as None take the library's defaults
    (moestream_sampler_params_init; the penalties are off). One thread at a
    time; ``close()`` while a call is running raises Error with status BUSY.
    """

    _FREE = "moestream_sampler_free"
    _KIND = "sampler"

    def __init__(self, temperature=None, top_k=None, top_p=None, min_p=None, seed=None, *,
                 repeat_penalty=None, presence_penalty=None, frequency_penalty=None, penalty_last_n=None):
        self._handle = None
        self._lib = _ffi.lib()
        params = _ffi.SamplerParams()
        self._lib.moestream_sampler_params_init(ctypes.byref(params))
        if temperature is not None:
            params.temperature = cv.real_number(temperature, "temperature")
        if top_k is not None:
            cv.set_int(params, "top_k", top_k)
        if top_p is not None:
            params.top_p = cv.real_number(top_p, "top_p")
        if min_p is not None:
            params.min_p = cv.real_number(min_p, "min_p")
        if seed is not None:
            cv.set_int(params, "seed", seed)
        for name, value in (("repeat_penalty", repeat_penalty), ("presence_penalty", presence_penalty),
                            ("frequency_penalty", frequency_penalty)):
            if value is not None:
                setattr(params, name, cv.real_number(value, name))
        if penalty_last_n is not None:
            cv.set_int(params, "penalty_last_n", penalty_last_n)
        self.params = _params_dict(params)
        handle = _ffi.SamplerPtr()
        self._lib.moestream_sampler_new(ctypes.byref(params), ctypes.byref(handle))
        self._handle = handle

    def _refresh_params(self):
        """Reads the parameters back (they change when a state is loaded into the sampler)."""
        params = _ffi.SamplerParams()
        self._lib.moestream_sampler_params_init(ctypes.byref(params))
        with self._claim() as handle:
            self._lib.moestream_sampler_params_get(handle, ctypes.byref(params))
        self.params = _params_dict(params)

    def sample(self, logits):
        """The id picked from one row of logits (numpy array or sequence of floats)."""
        self._h()
        keep, ptr, n = cv.float_buffer(logits)
        if n >= 2**31:
            raise Error(Status.INVALID_ARGUMENT, f"logits row of {n} values is too long")
        token = ctypes.c_int32(-1)
        with self._claim() as handle:
            self._lib.moestream_sample(handle, ptr, n, ctypes.byref(token))
        del keep
        return token.value

    def accept(self, tokens):
        """Records token ids the sampler did not draw (the prompt), oldest
        first, so that the penalties count them. A negative id is an Error and
        records nothing."""
        self._h()
        keep, ptr, n = cv.int32_buffer(tokens)
        with self._claim() as handle:
            self._lib.moestream_sampler_accept(handle, ptr, n)
        del keep

    def reset(self):
        """Forgets the history and restarts the generator from the seed."""
        with self._claim() as handle:
            self._lib.moestream_sampler_reset(handle)

    def __repr__(self):
        args = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())
        return f"<moestream.Sampler {args}{' closed' if not self._handle else ''}>"


def _params_dict(params):
    return {name: getattr(params, name) for name, _ in params._fields_ if name != "struct_size"}
