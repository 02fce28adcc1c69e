"""moestream.Sampler: picks token ids from logits (moestream_sampler)."""
import ctypes

from . import _convert as cv
from . import _ffi
from ._errors import Error, Status
from ._handle import OwnedHandle


class Sampler(OwnedHandle):
    """Greedy (temperature=0) or temperature / top-k / top-p / min-p sampling
    with a seeded deterministic generator. Arguments left as None take the
    library's defaults (moestream_sampler_params_init). One thread at a time;
    ``close()`` while a call is running raises Error with status BUSY.
    """

    _FREE = "moestream_sampler_free"
    _KIND = "sampler"

    def __init__(self, temperature=None, top_k=None, top_p=None, min_p=None, seed=None):
        self._handle = None
        self._lib = _ffi.lib()
        params = _ffi.SamplerParams()
        self._lib.moestream_sampler_params_init(ctypes.byref(params))
        if temperature is not None:
            params.temperature = float(temperature)
        if top_k is not None:
            cv.set_int(params, "top_k", top_k)
        if top_p is not None:
            params.top_p = float(top_p)
        if min_p is not None:
            params.min_p = float(min_p)
        if seed is not None:
            cv.set_int(params, "seed", seed)
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

    def __repr__(self):
        args = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())
        return f"<moestream.Sampler {args}{' closed' if not self._handle else ''}>"


def _params_dict(params):
    return {name: getattr(params, name) for name, _ in params._fields_ if name != "struct_size"}
