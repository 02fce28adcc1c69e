"""Raw ctypes access to the C API for the tests that feed it misuse and error triggers
(test_capi_context.py, test_errors.py): the library, a context opened with chosen
moestream_params fields, steps and state files. Calls go through `lib.raw(...)` so the
status comes back unchecked."""
import contextlib
import ctypes
import os

import pytest

from moestream import _ffi

N_CTX = 8   # small, so a handful of tokens fills the context


def load_library():
    if not os.environ.get("MOESTREAM_LIB"):
        pytest.skip("MOESTREAM_LIB not set (run through ctest)")
    return _ffi.lib()


def open_ctx(lib, path, **fields):
    """(status, handle) of moestream_open; fields override the params after
    moestream_params_init (defaults here: one thread, N_CTX, no usage profile)."""
    params = _ffi.Params()
    lib.moestream_params_init(ctypes.byref(params))
    params.model_path = str(path).encode()
    params.n_threads = 1
    params.n_ctx = N_CTX
    params.profile_path = b""
    for k, v in fields.items():
        setattr(params, k, v)
    out = _ffi.ContextPtr()
    status = lib.raw("moestream_open")(ctypes.byref(params), ctypes.byref(out))
    return status, out


@contextlib.contextmanager
def opened(lib, path, **fields):
    """A context that must open, closed afterwards."""
    status, handle = open_ctx(lib, path, **fields)
    assert status == 0, lib.last_error()
    try:
        yield handle
    finally:
        lib.moestream_close(handle)


def step(lib, handle, tokens, logits=None):
    arr = (ctypes.c_int32 * max(1, len(tokens)))(*tokens)
    return lib.raw("moestream_step")(handle, arr, len(tokens), logits)


def save(lib, handle, path):
    return lib.raw("moestream_state_save")(handle, str(path).encode())


def load(lib, handle, path):
    return lib.raw("moestream_state_load")(handle, str(path).encode())
