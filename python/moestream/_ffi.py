"""1:1 ctypes declarations of include/moestream.h and the library loader.

Everything here mirrors the C header exactly; the friendly classes live in the
other modules. Functions the loaded library does not export (an older or
partial build) are bound to stubs that raise Error(UNSUPPORTED), so callers
see one uniform failure instead of an AttributeError.
"""
import ctypes
import ctypes.util
import os
import pathlib
import threading

from ._errors import Error, Status

# The ABI major this binding was written against (= the library's SOVERSION).
ABI_MAJOR = 0

# --- typed opaque handles ----------------------------------------------------


class _ContextHandle(ctypes.Structure):
    """Opaque moestream_context."""


class _SamplerHandle(ctypes.Structure):
    """Opaque moestream_sampler."""


ContextPtr = ctypes.POINTER(_ContextHandle)
SamplerPtr = ctypes.POINTER(_SamplerHandle)

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p)

MAX_TENSOR_TYPES = 64
MAX_LAYERS = 256

# --- structs (field for field as in the header) --------------------------------


class Params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("model_path", ctypes.c_char_p),
        ("memory_budget", ctypes.c_uint64),
        ("n_threads", ctypes.c_int32),
        ("n_ctx", ctypes.c_int32),
        ("io_mode", ctypes.c_int32),
        ("prefetch", ctypes.c_int32),
        ("cache_policy", ctypes.c_int32),
        ("exact", ctypes.c_int32),
        ("packed_path", ctypes.c_char_p),
        ("profile_path", ctypes.c_char_p),
        ("log_fn", LOG_FN),
        ("log_user_data", ctypes.c_void_p),
        ("log_level", ctypes.c_int32),
        ("routing_trace_path", ctypes.c_char_p),
    ]


class ModelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("architecture", ctypes.c_char * 32),
        ("name", ctypes.c_char * 96),
        ("n_vocab", ctypes.c_int32),
        ("n_ctx_train", ctypes.c_int32),
        ("n_embd", ctypes.c_int32),
        ("n_layer", ctypes.c_int32),
        ("n_head", ctypes.c_int32),
        ("n_head_kv", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("n_expert", ctypes.c_int32),
        ("n_expert_used", ctypes.c_int32),
        ("n_ff_expert", ctypes.c_int32),
        ("n_ff_shared", ctypes.c_int32),
        ("n_tensors", ctypes.c_int32),
        ("file_bytes", ctypes.c_uint64),
        ("total_bytes", ctypes.c_uint64),
        ("dense_bytes", ctypes.c_uint64),
        ("expert_bytes", ctypes.c_uint64),
        ("expert_bytes_per_expert", ctypes.c_uint64),
        ("expert_bytes_per_layer", ctypes.c_uint64),
        ("tensor_count_by_type", ctypes.c_uint32 * MAX_TENSOR_TYPES),
        ("io_mode", ctypes.c_int32),
        ("io_mode_reason", ctypes.c_char * 160),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("tokens", ctypes.c_uint64),
        ("steps", ctypes.c_uint64),
        ("compute_ns", ctypes.c_uint64),
        ("io_wait_ns", ctypes.c_uint64),
        ("step_ns", ctypes.c_uint64),
        ("bytes_read_demand", ctypes.c_uint64),
        ("bytes_read_prefetch", ctypes.c_uint64),
        ("bytes_read_wasted", ctypes.c_uint64),
        ("cache_hits", ctypes.c_uint64),
        ("cache_misses", ctypes.c_uint64),
        ("prefetch_issued", ctypes.c_uint64),
        ("prefetch_useful", ctypes.c_uint64),
        ("evictions", ctypes.c_uint64),
        ("resident_bytes", ctypes.c_uint64),
        ("expert_cache_bytes", ctypes.c_uint64),
        ("dense_bytes", ctypes.c_uint64),
        ("kv_bytes", ctypes.c_uint64),
        ("io_mode", ctypes.c_int32),
        ("n_layer", ctypes.c_int32),
        ("io_mode_reason", ctypes.c_char * 160),
        ("layer_hits", ctypes.c_uint64 * MAX_LAYERS),
        ("layer_misses", ctypes.c_uint64 * MAX_LAYERS),
    ]


class SamplerParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("seed", ctypes.c_uint64),
    ]


class GenerateParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("architecture", ctypes.c_char_p),
        ("preset", ctypes.c_char_p),
        ("quant", ctypes.c_char_p),
        ("n_layer", ctypes.c_int32),
        ("n_embd", ctypes.c_int32),
        ("n_head", ctypes.c_int32),
        ("n_head_kv", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("n_expert", ctypes.c_int32),
        ("n_expert_used", ctypes.c_int32),
        ("n_ff_expert", ctypes.c_int32),
        ("n_vocab", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("progress", PROGRESS_FN),
        ("progress_user_data", ctypes.c_void_p),
    ]


class TraceSynthParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("heat_path", ctypes.c_char_p),
        ("n_layer", ctypes.c_int32),
        ("n_expert", ctypes.c_int32),
        ("n_expert_used", ctypes.c_int32),
        ("n_tokens", ctypes.c_int64),
        ("reuse", ctypes.c_double),
        ("skew", ctypes.c_double),
        ("bytes_per_expert", ctypes.c_uint64),
        ("seed", ctypes.c_uint64),
    ]


class TraceInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("n_layer", ctypes.c_int32),
        ("n_expert", ctypes.c_int32),
        ("n_expert_used", ctypes.c_int32),
        ("n_tokens", ctypes.c_int64),
        ("bytes_per_expert", ctypes.c_uint64),
        ("expert_bytes", ctypes.c_uint64),
        ("reuse", ctypes.c_double),
        ("top20_share_median", ctypes.c_double),
        ("top20_share_min", ctypes.c_double),
        ("top20_share_max", ctypes.c_double),
    ]


class ReplayParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("trace_path", ctypes.c_char_p),
        ("cache_bytes", ctypes.c_uint64),
        ("cache_policy", ctypes.c_int32),
        ("warmup_share", ctypes.c_double),
    ]


class ReplayResult(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("cache_policy", ctypes.c_int32),
        ("capacity_slots", ctypes.c_uint32),
        ("accesses", ctypes.c_uint64),
        ("hits", ctypes.c_uint64),
        ("misses", ctypes.c_uint64),
        ("bytes_read", ctypes.c_uint64),
        ("hit_rate", ctypes.c_double),
    ]


# --- function table ------------------------------------------------------------

_STATUS = object()  # restype marker: returns a moestream_status, checked
_i32 = ctypes.c_int32
_P = ctypes.POINTER

FUNCTIONS = [
    # name, restype, argtypes
    ("moestream_version_number", ctypes.c_int, []),
    ("moestream_version_string", ctypes.c_char_p, []),
    ("moestream_status_string", ctypes.c_char_p, [ctypes.c_int]),
    ("moestream_last_error", ctypes.c_char_p, []),
    ("moestream_params_init", None, [_P(Params)]),
    ("moestream_model_info_init", None, [_P(ModelInfo)]),
    ("moestream_type_name", ctypes.c_char_p, [ctypes.c_int]),
    ("moestream_io_mode_name", ctypes.c_char_p, [ctypes.c_int]),
    ("moestream_inspect", _STATUS, [ctypes.c_char_p, ctypes.c_uint64, _P(ModelInfo)]),
    ("moestream_open", _STATUS, [_P(Params), _P(ContextPtr)]),
    ("moestream_close", None, [ContextPtr]),
    ("moestream_model_info_get", _STATUS, [ContextPtr, _P(ModelInfo)]),
    ("moestream_n_vocab", _i32, [ContextPtr]),
    ("moestream_n_ctx", _i32, [ContextPtr]),
    ("moestream_n_past", _i32, [ContextPtr]),
    ("moestream_step", _STATUS, [ContextPtr, _P(_i32), _i32, _P(ctypes.c_float)]),
    ("moestream_reset", _STATUS, [ContextPtr]),
    ("moestream_state_save", _STATUS, [ContextPtr, ctypes.c_char_p]),
    ("moestream_state_load", _STATUS, [ContextPtr, ctypes.c_char_p]),
    ("moestream_stats_init", None, [_P(Stats)]),
    ("moestream_stats_get", _STATUS, [ContextPtr, _P(Stats)]),
    ("moestream_stats_reset", _STATUS, [ContextPtr]),
    ("moestream_tokenize", _STATUS,
     [ContextPtr, ctypes.c_char_p, ctypes.c_size_t, _i32, _i32, _P(_i32), ctypes.c_size_t,
      _P(ctypes.c_size_t)]),
    ("moestream_token_to_piece", _STATUS,
     [ContextPtr, _i32, ctypes.c_char_p, ctypes.c_size_t, _P(ctypes.c_size_t)]),
    ("moestream_token_bos", _i32, [ContextPtr]),
    ("moestream_token_eos", _i32, [ContextPtr]),
    ("moestream_sampler_params_init", None, [_P(SamplerParams)]),
    ("moestream_sampler_new", _STATUS, [_P(SamplerParams), _P(SamplerPtr)]),
    ("moestream_sampler_free", None, [SamplerPtr]),
    ("moestream_sample", _STATUS, [SamplerPtr, _P(ctypes.c_float), _i32, _P(_i32)]),
    ("moestream_sampler_params_get", _STATUS, [SamplerPtr, _P(SamplerParams)]),
    ("moestream_state_save_with_sampler", _STATUS, [ContextPtr, SamplerPtr, ctypes.c_char_p]),
    ("moestream_state_load_with_sampler", _STATUS, [ContextPtr, SamplerPtr, ctypes.c_char_p]),
    ("moestream_generate_params_init", None, [_P(GenerateParams)]),
    ("moestream_generate_model_size", _STATUS, [_P(GenerateParams), _P(ctypes.c_uint64)]),
    ("moestream_generate_model", _STATUS, [_P(GenerateParams), ctypes.c_char_p]),
    ("moestream_trace_synth_params_init", None, [_P(TraceSynthParams)]),
    ("moestream_trace_synth", _STATUS, [_P(TraceSynthParams), ctypes.c_char_p]),
    ("moestream_trace_info_init", None, [_P(TraceInfo)]),
    ("moestream_trace_info_get", _STATUS, [ctypes.c_char_p, _P(TraceInfo)]),
    ("moestream_replay_params_init", None, [_P(ReplayParams)]),
    ("moestream_replay_result_init", None, [_P(ReplayResult)]),
    ("moestream_trace_replay", _STATUS, [_P(ReplayParams), _P(ReplayResult)]),
    ("moestream_cache_policy_name", ctypes.c_char_p, [ctypes.c_int]),
    ("moestream_pack", _STATUS, [ctypes.c_char_p, ctypes.c_char_p]),
    ("moestream_pack_verify", _STATUS, [ctypes.c_char_p, ctypes.c_char_p, _P(ctypes.c_uint64), _P(ctypes.c_uint64)]),
]


class Library:
    """The loaded shared library with every header function as an attribute.

    Status-returning functions raise Error on a negative status; call them
    through ``raw(name)`` to get the status instead.
    """

    def __init__(self, path):
        self.path = str(path)
        self._cdll = ctypes.CDLL(self.path)
        self.missing = set()
        self._raw = {}
        for name, restype, argtypes in FUNCTIONS:
            self._bind(name, restype, argtypes)
        self.version_number = self.moestream_version_number()
        major = self.version_number // 10000
        if major != ABI_MAJOR:
            raise OSError(f"{self.path} is moestream {self.version_string()} (ABI {major}); "
                          f"this binding needs ABI {ABI_MAJOR}")

    def _bind(self, name, restype, argtypes):
        try:
            fn = getattr(self._cdll, name)
        except AttributeError:
            self.missing.add(name)
            stub = _missing_stub(name, self.path)
            self._raw[name] = stub
            setattr(self, name, stub)
            return
        fn.argtypes = argtypes
        if restype is _STATUS:
            fn.restype = ctypes.c_int
            self._raw[name] = fn
            setattr(self, name, _checked(fn, name, self))
        else:
            fn.restype = restype
            self._raw[name] = fn
            setattr(self, name, fn)

    def has(self, name):
        return name not in self.missing

    def raw(self, name):
        """The function itself: returns the status instead of raising."""
        return self._raw[name]

    def version_string(self):
        return self.moestream_version_string().decode()

    def last_error(self):
        return self.moestream_last_error().decode("utf-8", "replace")

    def error(self, status):
        """The Error for a status just returned on this thread."""
        return Error(status, self.last_error())


def _checked(fn, name, lib):
    def call(*args):
        status = fn(*args)
        if status < 0:
            raise lib.error(status)
        return status

    call.__name__ = name
    return call


def _missing_stub(name, path):
    def call(*_args):
        raise Error(Status.UNSUPPORTED, f"{name}: not provided by {path}")

    call.__name__ = name
    return call


# --- locating the library ------------------------------------------------------

_SONAME = f"libmoestream.so.{ABI_MAJOR}"
_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


def _installed_lib_dir():
    """The prefix's libdir when this package was installed by cmake --install."""
    try:
        from . import _install_paths  # written at install time
        rel = _install_paths.LIB_DIR_FROM_PACKAGE
    except ImportError:
        rel = "../../.."  # PREFIX/lib/python3/dist-packages/moestream -> PREFIX/lib
    return (_PACKAGE_DIR / rel).resolve()


def candidate_paths():
    """Where the library is looked for, in order (MOESTREAM_LIB decides alone)."""
    env = os.environ.get("MOESTREAM_LIB")
    if env:
        return [pathlib.Path(env)]
    paths = []
    for directory in (_PACKAGE_DIR, _installed_lib_dir()):
        for name in (_SONAME, "libmoestream.so"):
            paths.append(directory / name)
    return paths


def find_library():
    for path in candidate_paths():
        if path.exists():
            return str(path)
    if os.environ.get("MOESTREAM_LIB"):
        raise OSError(f"MOESTREAM_LIB={os.environ['MOESTREAM_LIB']} does not exist")
    found = ctypes.util.find_library("moestream")
    if found:
        return found
    tried = ", ".join(str(p) for p in candidate_paths())
    raise OSError(f"libmoestream not found (tried {tried} and the system search path); "
                  "set MOESTREAM_LIB to the library's path")


_lock = threading.Lock()
_library = None


def lib():
    """The process-wide Library, loaded on first use."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                _library = Library(find_library())
    return _library
