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
#
# Each struct is written as its C declarations, "TYPE name, name[N]; ...", in
# the header's order; _struct turns that into a ctypes.Structure. test_binding
# checks the result against the header's field names and the compiler's
# offsets and sizes (tests/tools/abi_sizes).

_C_TYPES = {
    "size_t": ctypes.c_size_t,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "char": ctypes.c_char,
    "char*": ctypes.c_char_p,    # const char *
    "void*": ctypes.c_void_p,
    "log_fn": LOG_FN,            # moestream_log_fn
    "progress_fn": PROGRESS_FN,  # moestream_progress_fn
}
_ARRAY_LENGTHS = {"MAX_TENSOR_TYPES": MAX_TENSOR_TYPES, "MAX_LAYERS": MAX_LAYERS}


def _c_fields(declarations):
    fields = []
    for declaration in filter(None, (d.strip() for d in declarations.split(";"))):
        type_name, names = declaration.split(None, 1)
        ctype = _C_TYPES[type_name]
        for name in (n.strip() for n in names.split(",")):
            if name.endswith("]"):
                name, length = name[:-1].split("[")
                fields.append((name, ctype * (_ARRAY_LENGTHS.get(length) or int(length))))
            else:
                fields.append((name, ctype))
    return fields


def _struct(name, c_name, declarations):
    return type(name, (ctypes.Structure,), {"_fields_": _c_fields(declarations), "__doc__": c_name,
                                            "__module__": __name__})


Params = _struct("Params", "moestream_params", """
    size_t struct_size; char* model_path; uint64_t memory_budget;
    int32_t n_threads, n_ctx, io_mode, prefetch, cache_policy, exact;
    char* packed_path, profile_path; log_fn log_fn; void* log_user_data; int32_t log_level;
    char* routing_trace_path; int32_t lookahead_layers, reserved0, numa_placement, reserved1, max_batch""")

ModelInfo = _struct("ModelInfo", "moestream_model_info", """
    size_t struct_size; char architecture[32], name[96];
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_expert, n_expert_used,
            n_ff_expert, n_ff_shared, n_tensors;
    uint64_t file_bytes, total_bytes, dense_bytes, expert_bytes, expert_bytes_per_expert, expert_bytes_per_layer;
    uint32_t tensor_count_by_type[MAX_TENSOR_TYPES]; int32_t io_mode; char io_mode_reason[160]""")

Stats = _struct("Stats", "moestream_stats", """
    size_t struct_size;
    uint64_t tokens, steps, compute_ns, io_wait_ns, step_ns, bytes_read_demand, bytes_read_prefetch,
             bytes_read_wasted, cache_hits, cache_misses, prefetch_issued, prefetch_useful, evictions,
             resident_bytes, expert_cache_bytes, dense_bytes, kv_bytes;
    int32_t io_mode, n_layer; char io_mode_reason[160];
    uint64_t layer_hits[MAX_LAYERS], layer_misses[MAX_LAYERS];
    uint64_t io_busy_ns, io_bytes_completed, io_reads_completed, io_read_ns; int32_t io_queue_depth;
    uint64_t attention_ns, moe_ns""")

ReadReplay = _struct("ReadReplay", "moestream_read_replay", """
    size_t struct_size; int32_t queue_depth, engine_queue_depth;
    uint64_t reads, dropped, bytes, elapsed_ns, buffered_reads; char backend[16]""")

SamplerParams = _struct("SamplerParams", "moestream_sampler_params", """
    size_t struct_size; float temperature; int32_t top_k; float top_p, min_p; uint64_t seed;
    float repeat_penalty, presence_penalty, frequency_penalty; int32_t penalty_last_n""")

GenerateParams = _struct("GenerateParams", "moestream_generate_params", """
    size_t struct_size; char* architecture, preset, quant;
    int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_expert, n_expert_used, n_ff_expert, n_vocab;
    uint64_t seed; progress_fn progress; void* progress_user_data; int32_t deepseek2_attn_kv_b""")

TraceSynthParams = _struct("TraceSynthParams", "moestream_trace_synth_params", """
    size_t struct_size; char* heat_path; int32_t n_layer, n_expert, n_expert_used; int64_t n_tokens;
    double reuse, skew; uint64_t bytes_per_expert, seed; uint32_t window; double recall""")

TraceInfo = _struct("TraceInfo", "moestream_trace_info", """
    size_t struct_size; int32_t n_layer, n_expert, n_expert_used; int64_t n_tokens;
    uint64_t bytes_per_expert, expert_bytes; double reuse, top20_share_median, top20_share_min, top20_share_max""")

ReplayParams = _struct("ReplayParams", "moestream_replay_params", """
    size_t struct_size; char* trace_path; uint64_t cache_bytes; int32_t cache_policy; double warmup_share""")

ReplayResult = _struct("ReplayResult", "moestream_replay_result", """
    size_t struct_size; int32_t cache_policy; uint32_t capacity_slots; uint64_t accesses, hits, misses, bytes_read;
    double hit_rate""")


# --- function table ------------------------------------------------------------

_STATUS = object()  # restype marker: returns a moestream_status, checked
_i32 = ctypes.c_int32
_P = ctypes.POINTER

FUNCTIONS = [
    # name, restype, argtypes
    ("moestream_version_number", ctypes.c_int, []),
    ("moestream_version_string", ctypes.c_char_p, []),
    ("moestream_kernel_isa", ctypes.c_char_p, []),
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
    ("moestream_io_mode_reason", ctypes.c_char_p, [ContextPtr]),
    ("moestream_step", _STATUS, [ContextPtr, _P(_i32), _i32, _P(ctypes.c_float)]),
    ("moestream_step_all_logits", _STATUS, [ContextPtr, _P(_i32), _i32, _P(ctypes.c_float)]),
    ("moestream_reset", _STATUS, [ContextPtr]),
    ("moestream_truncate", _STATUS, [ContextPtr, _i32]),
    ("moestream_state_save", _STATUS, [ContextPtr, ctypes.c_char_p]),
    ("moestream_state_load", _STATUS, [ContextPtr, ctypes.c_char_p]),
    ("moestream_stats_init", None, [_P(Stats)]),
    ("moestream_stats_get", _STATUS, [ContextPtr, _P(Stats)]),
    ("moestream_stats_reset", _STATUS, [ContextPtr]),
    ("moestream_read_log_start", _STATUS, [ContextPtr, ctypes.c_uint64]),
    ("moestream_read_replay_init", None, [_P(ReadReplay)]),
    ("moestream_read_log_replay", _STATUS, [ContextPtr, _P(ReadReplay)]),
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
    ("moestream_sampler_accept", _STATUS, [SamplerPtr, _P(_i32), _i32]),
    ("moestream_sampler_reset", _STATUS, [SamplerPtr]),
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
