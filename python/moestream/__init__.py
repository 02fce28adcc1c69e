"""moestream: run Mixture-of-Experts models larger than RAM by streaming experts.

A pure-Python ctypes binding of libmoestream (include/moestream.h). The library
is looked up in this order: $MOESTREAM_LIB, this package's directory, the
install prefix's libdir (when installed by ``cmake --install``), then the
system search path.
"""
import ctypes

from . import _convert as cv
from . import _ffi
from ._context import Context
from ._errors import Error, Status
from ._generate import generate_model, generate_model_size
from ._sampler import Sampler
from ._trace import trace_info, trace_replay, trace_synth

ABI_MAJOR = _ffi.ABI_MAJOR

__all__ = ["ABI_MAJOR", "Context", "Error", "Sampler", "Status", "generate_model", "generate_model_size",
           "inspect", "library_path", "status_string", "trace_info", "trace_replay", "trace_synth", "version",
           "version_number", "kernel_isa"]


def version():
    """The loaded library's version string, e.g. "0.3.0"."""
    return _ffi.lib().version_string()


def kernel_isa():
    """Instruction set of the compute kernels: "avx512", "avx2" or "scalar"."""
    return _ffi.lib().moestream_kernel_isa().decode()


def version_number():
    """MAJOR*10000 + MINOR*100 + PATCH of the loaded library."""
    return _ffi.lib().version_number


def library_path():
    """Path (or name) of the loaded shared library."""
    return _ffi.lib().path


def status_string(status):
    """The library's static description of a status code."""
    return cv.text(_ffi.lib().moestream_status_string(cv.checked_int(status, ctypes.c_int, "status")))


def inspect(path, memory_budget=0):
    """A model's facts as a dict, read without loading weights.

    A file ``Context`` would refuse for its contents raises the same
    ``Error`` (status and message) here.

    ``memory_budget`` (bytes, 0 = automatic) only affects ``io_mode`` and
    ``io_mode_reason``.
    """
    lib = _ffi.lib()
    info = _ffi.ModelInfo()
    lib.moestream_model_info_init(ctypes.byref(info))
    memory_budget = cv.checked_int(memory_budget, ctypes.c_uint64, "memory_budget")
    lib.moestream_inspect(cv.path_bytes(path), memory_budget, ctypes.byref(info))
    return cv.model_info_dict(info)
