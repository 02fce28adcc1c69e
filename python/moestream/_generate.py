"""Random-weight models of a real architecture's shape (moestream_generate_*)."""
import ctypes

from . import _convert as cv
from . import _ffi

_INT_FIELDS = ("n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_expert", "n_expert_used",
               "n_ff_expert", "n_vocab")


def _params(architecture, preset, quant, seed, progress, shape, deepseek2_attn_kv_b=False):
    p = _ffi.GenerateParams()
    _ffi.lib().moestream_generate_params_init(ctypes.byref(p))
    p.deepseek2_attn_kv_b = 1 if deepseek2_attn_kv_b else 0
    if architecture is not None:
        p.architecture = cv.name_bytes(architecture, "architecture")
    if preset is not None:
        p.preset = cv.name_bytes(preset, "preset")
    if quant is not None:
        p.quant = cv.name_bytes(quant, "quant")
    for name, value in shape.items():
        if name not in _INT_FIELDS:
            raise TypeError(f"unknown model shape field {name!r} (expected {', '.join(_INT_FIELDS)})")
        cv.set_int(p, name, value)
    cv.set_int(p, "seed", seed)
    callback = None
    if progress is not None:
        def trampoline(done, total, _user):
            try:
                progress(done, total)
            except Exception:  # never unwind into C
                pass
        callback = _ffi.PROGRESS_FN(trampoline)
        p.progress = callback
    return p, callback


def generate_model(path, *, architecture=None, preset=None, quant=None, seed=0, progress=None,
                   deepseek2_attn_kv_b=False, **shape):
    """Writes a random-weight GGUF model to path.

    architecture: "qwen3moe", "gpt-oss" or "deepseek2" (default: the preset's,
    gpt-oss for the gpt-oss-* presets, deepseek2 for deepseek-v2-lite and
    deepseek2-tiny, else qwen3moe; deepseek2 only with those two presets, with
    n_head_kv 1 and head_dim = qk_nope + qk_rope); preset: "qwen3-30b-a3b",
    "gpt-oss-20b", "gpt-oss-tiny", "deepseek-v2-lite", "deepseek2-tiny", "demo",
    "small" (default) or "tiny"; quant:
    "q4_k_m" (default), "q3_k_m", "q2_k", "iq4_xs", "q8_0" or "f32"; shape fields (n_layer, n_embd, n_head,
    n_head_kv, head_dim, n_expert, n_expert_used, n_ff_expert, n_vocab)
    override the preset. deepseek2_attn_kv_b writes one F32 attn_kv_b a layer
    (files converted before absorbed latent attention) instead of attn_k_b /
    attn_v_b, with the same weights. progress(done_bytes, total_bytes) is
    called while writing. The same arguments and seed always give the same bytes.
    """
    p, keep = _params(architecture, preset, quant, seed, progress, shape, deepseek2_attn_kv_b)
    _ffi.lib().moestream_generate_model(ctypes.byref(p), cv.path_bytes(path))
    del keep


def generate_model_size(*, architecture=None, preset=None, quant=None, seed=0, deepseek2_attn_kv_b=False, **shape):
    """Bytes generate_model would write for the same arguments."""
    p, _ = _params(architecture, preset, quant, seed, None, shape, deepseek2_attn_kv_b)
    out = ctypes.c_uint64(0)
    _ffi.lib().moestream_generate_model_size(ctypes.byref(p), ctypes.byref(out))
    return out.value
