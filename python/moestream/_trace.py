"""Routing traces: synthesis, statistics and cache replay (moestream_trace_*)."""
import ctypes

from . import _convert as cv
from . import _ffi

# The engine's cache policies and the offline optimum replay adds (MOESTREAM_REPLAY_BELADY);
# names as moestream_cache_policy_name gives them ("lfu-decay") work too.
POLICIES = {**cv.CACHE_POLICIES, "belady": 100}


def trace_synth(path, *, heat=None, n_tokens=1000, reuse=0.4, skew=None, n_layer=0, n_expert=0, n_expert_used=0,
                bytes_per_expert=0, seed=1, window=0, recall=0.0):
    """Writes a synthetic routing trace (docs/trace-format.md) to path; window / recall add
    locality over several tokens (a draw that is not a reuse comes, with probability recall,
    from the experts of the layer's last window tokens)."""
    lib = _ffi.lib()
    p = _ffi.TraceSynthParams()
    lib.moestream_trace_synth_params_init(ctypes.byref(p))
    if heat is not None:
        p.heat_path = cv.path_bytes(heat, "heat")
    cv.set_int(p, "n_tokens", n_tokens)
    p.reuse = cv.real_number(reuse, "reuse")
    if skew is not None:
        p.skew = cv.real_number(skew, "skew")
    p.recall = cv.real_number(recall, "recall")
    for name, value in (("n_layer", n_layer), ("n_expert", n_expert), ("n_expert_used", n_expert_used),
                        ("bytes_per_expert", bytes_per_expert), ("seed", seed), ("window", window)):
        cv.set_int(p, name, value)
    lib.moestream_trace_synth(ctypes.byref(p), cv.path_bytes(path))


def trace_info(path):
    """Shape and measured statistics of a trace, as a dict."""
    lib = _ffi.lib()
    info = _ffi.TraceInfo()
    lib.moestream_trace_info_init(ctypes.byref(info))
    lib.moestream_trace_info_get(cv.path_bytes(path), ctypes.byref(info))
    return {name: getattr(info, name) for name, _ in info._fields_ if name != "struct_size"}


def trace_replay(path, cache_bytes, policy="auto", warmup_share=0.5):
    """Simulates the expert cache on a trace; policy is a name from POLICIES or its int."""
    lib = _ffi.lib()
    p = _ffi.ReplayParams()
    lib.moestream_replay_params_init(ctypes.byref(p))
    p.trace_path = cv.path_bytes(path)
    cv.set_int(p, "cache_bytes", cache_bytes)
    # A bad name is the library's kind of error (Error, INVALID_ARGUMENT), not a KeyError.
    p.cache_policy = cv.enum_value(POLICIES, policy, "policy")
    p.warmup_share = cv.real_number(warmup_share, "warmup_share")
    r = _ffi.ReplayResult()
    lib.moestream_replay_result_init(ctypes.byref(r))
    lib.moestream_trace_replay(ctypes.byref(p), ctypes.byref(r))
    out = {name: getattr(r, name) for name, _ in r._fields_ if name != "struct_size"}
    out["policy"] = cv.text(lib.moestream_cache_policy_name(r.cache_policy))
    return out
