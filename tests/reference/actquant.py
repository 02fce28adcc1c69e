"""Emulation of the activation rounding a llama.cpp-style CPU engine applies before each
weight matmul (facts §2.3): the f32 activation row is converted to the weight type's
"vec_dot" format and the dot product uses the converted values.

    weight type                     activation format   value used
    F32                             F32                 x (as f32)
    F16                             F16                 fp16(x)
    BF16                            BF16                bf16(x), round to nearest even
    Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 Q8_0 (32/block)     fp16(amax/127) * round_half_even(x * 127/amax)
    Q4_1, Q5_1                      Q8_1 (32/block)     as Q8_0, and the weight's min m multiplies the
                                                        block sum s = fp16(d * sum q) (f32 d), not
                                                        sum(fp16(d) * q): see q8_1_sum_correction
    Q2_K..Q6_K, IQ4_XS              Q8_K (256/block)    (1/iscale) * min(127, round_half_even(iscale * x)),
                                                        iscale = -127/max, max = first element of
                                                        largest magnitude; d kept in f32

All steps are float32 like the engine's. Returns float64 arrays of the values the dot
products see.
"""
from __future__ import annotations

import numpy as np

from reference import dequant

_Q8_0_WEIGHTS = (dequant.Q4_0, dequant.Q5_0, dequant.Q8_0, dequant.Q4_1, dequant.Q5_1, dequant.IQ4_NL, dequant.MXFP4)
_Q8_K_WEIGHTS = (dequant.Q2_K, dequant.Q3_K, dequant.Q4_K, dequant.Q5_K, dequant.Q6_K, dequant.IQ4_XS)
f32 = np.float32


def _bf16_round(x32: np.ndarray) -> np.ndarray:
    u = x32.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return r.view(np.float32)


def _q8_0_values(x32: np.ndarray) -> np.ndarray:
    b = x32.reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d16 = (amax / f32(127)).astype(np.float16).astype(f32)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, f32(127) / np.where(amax > 0, amax, f32(1)), f32(0)).astype(f32)
    q = np.rint(b * inv[:, None])
    return (q * d16[:, None]).reshape(x32.shape)


def q8_1_sum_correction(x: np.ndarray) -> np.ndarray:
    """x [..., K] -> [..., K/32]: s - fp16(d) * sum q per block, where s = fp16(d * sum q).
    A Q4_1/Q5_1 dot product equals sum(w * values) + sum_b m_b * correction_b."""
    x32 = np.ascontiguousarray(x, dtype=f32)
    b = x32.reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = amax / f32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, f32(127) / np.where(amax > 0, amax, f32(1)), f32(0)).astype(f32)
    sq = np.rint(b * inv[:, None]).sum(axis=1)
    s16 = (d * sq).astype(np.float16).astype(np.float64)
    corr = s16 - d.astype(np.float16).astype(np.float64) * sq
    return corr.reshape(x32.shape[:-1] + (x32.shape[-1] // 32,))


def _q8_k_values(x32: np.ndarray) -> np.ndarray:
    b = x32.reshape(-1, 256)
    idx = np.abs(b).argmax(axis=1)                 # first element of largest magnitude
    mx = b[np.arange(b.shape[0]), idx]
    nz = mx != 0
    iscale = np.zeros_like(mx)
    iscale[nz] = f32(-127) / mx[nz]
    q = np.minimum(f32(127), np.rint(b * iscale[:, None]))
    d = np.zeros_like(mx)
    d[nz] = f32(1) / iscale[nz]
    return (q * d[:, None]).astype(f32).reshape(x32.shape)


def activation_values(x: np.ndarray, weight_type: int) -> np.ndarray:
    """x [..., K] (rows along the last axis) -> float64 values the engine's dot products use."""
    x32 = np.ascontiguousarray(x, dtype=f32)
    shape = x32.shape
    if weight_type == dequant.F32:
        out = x32
    elif weight_type == dequant.F16:
        out = x32.astype(np.float16).astype(f32)
    elif weight_type == dequant.BF16:
        out = _bf16_round(x32)
    elif weight_type in _Q8_0_WEIGHTS:
        out = _q8_0_values(x32.reshape(-1, shape[-1]))
    elif weight_type in _Q8_K_WEIGHTS:
        out = _q8_k_values(x32.reshape(-1, shape[-1]))
    else:
        raise ValueError(f"no activation format for weight type {weight_type}")
    return out.reshape(shape).astype(np.float64)


def f16_round(x: np.ndarray) -> np.ndarray:
    """Values as stored in an F16 cache."""
    return np.asarray(x, dtype=f32).astype(np.float16).astype(np.float64)
