"""Vectorised NumPy quantisers producing GGML blocks, and random raw blocks.

quantize(x, ggml_type) turns a float array whose last axis is a row (ne0 elements,
a multiple of the block size) into the raw bytes of that row layout: the result is
uint8 with shape x.shape[:-1] + (row_bytes,). Scale choice is simple (max-abs /
min-max per block), which is enough for test models: every block is valid for its
format and dequantises to something close to the input.

random_blocks(ggml_type, n_blocks, rng) produces arbitrary raw blocks (random bits,
with deliberate edge cases: zero scales, extreme and denormal f16 values) for
bit-exactness tests of dequantisation.

Block layouts are those of the GGUF format (little-endian, no padding).
"""
from __future__ import annotations

import numpy as np

from tools.gguf_writer import BLOCK_GEOMETRY, GgmlType

QK = 32
QK_K = 256

TYPE_BY_NAME = {t.name: t for t in BLOCK_GEOMETRY}
ALL_TYPES = list(BLOCK_GEOMETRY)  # the weight types this project writes


def row_bytes(ggml_type, n: int) -> int:
    be, bb = BLOCK_GEOMETRY[GgmlType(ggml_type)]
    if n % be:
        raise ValueError(f"row of {n} elements is not a multiple of {GgmlType(ggml_type).name} block size {be}")
    return n // be * bb


def _f16(a) -> np.ndarray:
    """float -> f16 (round to nearest even), clipped to the finite range."""
    return np.clip(np.asarray(a, dtype=np.float32), -65504.0, 65504.0).astype(np.float16)


def _f16_bytes(a16: np.ndarray) -> np.ndarray:
    """(n,) float16 -> (n, 2) uint8 little-endian."""
    return a16.astype("<f2").view(np.uint8).reshape(-1, 2)


def _safe_inv(d: np.ndarray) -> np.ndarray:
    out = np.zeros_like(d)
    nz = d != 0
    out[nz] = 1.0 / d[nz]
    return out


def _blocks(x: np.ndarray, bs: int) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % bs:
        raise ValueError(f"row length {x.shape[-1]} is not a multiple of {bs}")
    return x.reshape(-1, bs)


# ---- float types -------------------------------------------------------------------------------

def _to_bf16_bits(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 64).astype(np.uint16)
    return r


# ---- legacy 32-element blocks -----------------------------------------------------------------

def _signed_absmax(xb: np.ndarray) -> np.ndarray:
    idx = np.abs(xb).argmax(axis=1)
    return xb[np.arange(xb.shape[0]), idx]


def _q8_0(xb):
    d16 = _f16(np.abs(xb).max(axis=1) / 127.0)
    inv = _safe_inv(d16.astype(np.float32))
    q = np.clip(np.rint(xb * inv[:, None]), -127, 127).astype(np.int8)
    return np.concatenate([_f16_bytes(d16), q.view(np.uint8)], axis=1)


def _pack_nibbles32(q: np.ndarray) -> np.ndarray:
    """(n, 32) values 0..15 -> (n, 16): low nibble element j, high nibble element j+16."""
    q = q.astype(np.uint8)
    return (q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)


def _high_bits32(q: np.ndarray) -> np.ndarray:
    """(n, 32) 5-bit values -> (n, 4) bytes of the little-endian u32 of bit 4 of each element."""
    bits = ((q.astype(np.uint32) >> 4) & 1) << np.arange(32, dtype=np.uint32)
    h = bits.sum(axis=1, dtype=np.uint32)
    return h.astype("<u4").view(np.uint8).reshape(-1, 4)


def _q4_0(xb):
    d16 = _f16(_signed_absmax(xb) / -8.0)
    inv = _safe_inv(d16.astype(np.float32))
    q = np.clip(np.rint(xb * inv[:, None]) + 8, 0, 15)
    return np.concatenate([_f16_bytes(d16), _pack_nibbles32(q)], axis=1)


def _q5_0(xb):
    d16 = _f16(_signed_absmax(xb) / -16.0)
    inv = _safe_inv(d16.astype(np.float32))
    q = np.clip(np.rint(xb * inv[:, None]) + 16, 0, 31).astype(np.uint8)
    return np.concatenate([_f16_bytes(d16), _high_bits32(q), _pack_nibbles32(q)], axis=1)


def _min_max_blocks(xb, levels):
    mn, mx = xb.min(axis=1), xb.max(axis=1)
    d16 = _f16((mx - mn) / levels)
    m16 = _f16(mn)
    inv = _safe_inv(d16.astype(np.float32))
    q = np.clip(np.rint((xb - m16.astype(np.float32)[:, None]) * inv[:, None]), 0, levels).astype(np.uint8)
    return d16, m16, q


def _q4_1(xb):
    d16, m16, q = _min_max_blocks(xb, 15)
    return np.concatenate([_f16_bytes(d16), _f16_bytes(m16), _pack_nibbles32(q)], axis=1)


def _q5_1(xb):
    d16, m16, q = _min_max_blocks(xb, 31)
    return np.concatenate([_f16_bytes(d16), _f16_bytes(m16), _high_bits32(q), _pack_nibbles32(q)], axis=1)


# ---- k-quants (256-element super-blocks) ------------------------------------------------------

def _pack_scales_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """8 six-bit scales and mins per block -> the 12-byte packed form of Q4_K/Q5_K."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    out = np.empty((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0xF) | ((mn[:, 4:8] & 0xF) << 4)
    return out


def _kquant_scale_min(xb, levels):
    """Sub-blocks of 32 with an affine (scale, min) each; returns d16, dmin16 and q (n, 256)."""
    xs = xb.reshape(-1, 8, 32)
    lo = np.minimum(xs.min(axis=2), 0.0)          # the min is subtracted, so it must be <= 0
    hi = xs.max(axis=2)
    scale = (hi - lo) / levels                    # >= 0
    mins = -lo                                    # >= 0
    d16 = _f16(scale.max(axis=1) / 63.0)
    dmin16 = _f16(mins.max(axis=1) / 63.0)
    d, dmin = d16.astype(np.float32), dmin16.astype(np.float32)
    sc = np.clip(np.rint(scale * _safe_inv(d)[:, None]), 0, 63)
    mq = np.clip(np.rint(mins * _safe_inv(dmin)[:, None]), 0, 63)
    eff_scale = (d[:, None] * sc).astype(np.float32)
    eff_min = (dmin[:, None] * mq).astype(np.float32)
    q = np.clip(np.rint((xs + eff_min[:, :, None]) * _safe_inv(eff_scale)[:, :, None]), 0, levels)
    return d16, dmin16, sc, mq, q.reshape(-1, 256).astype(np.uint8)


def _q4_k(xb):
    d16, dmin16, sc, mq, q = _kquant_scale_min(xb, 15)
    qq = q.reshape(-1, 4, 2, 32)  # [chunk k][half][l]
    qs = (qq[:, :, 0, :] | (qq[:, :, 1, :] << 4)).reshape(-1, 128)
    return np.concatenate([_f16_bytes(d16), _f16_bytes(dmin16), _pack_scales_k4(sc, mq), qs], axis=1)


def _q5_k(xb):
    d16, dmin16, sc, mq, q = _kquant_scale_min(xb, 31)
    qq = q.reshape(-1, 4, 2, 32)
    qs = ((qq[:, :, 0, :] & 0xF) | ((qq[:, :, 1, :] & 0xF) << 4)).reshape(-1, 128)
    hb = (qq >> 4) & 1                            # [n, k, half, l]
    shifts = (2 * np.arange(4)[:, None] + np.arange(2)[None, :]).astype(np.uint8)  # bit 2k+half
    qh = (hb << shifts[None, :, :, None]).sum(axis=(1, 2)).astype(np.uint8)        # [n, 32]
    return np.concatenate([_f16_bytes(d16), _f16_bytes(dmin16), _pack_scales_k4(sc, mq), qh, qs], axis=1)


def _q6_k(xb):
    xs = xb.reshape(-1, 16, 16)
    s = np.abs(xs).max(axis=2) / 31.0
    d16 = _f16(s.max(axis=1) / 127.0)
    d = d16.astype(np.float32)
    sc = np.clip(np.rint(s * _safe_inv(d)[:, None]), 0, 127)
    eff = (d[:, None] * sc).astype(np.float32)
    q = (np.clip(np.rint(xs * _safe_inv(eff)[:, :, None]), -32, 31) + 32).astype(np.uint8)
    q = q.reshape(-1, 2, 4, 32)                   # element 128n + 32t + l
    ql = np.empty((q.shape[0], 2, 2, 32), dtype=np.uint8)
    ql[:, :, 0, :] = (q[:, :, 0, :] & 0xF) | ((q[:, :, 2, :] & 0xF) << 4)
    ql[:, :, 1, :] = (q[:, :, 1, :] & 0xF) | ((q[:, :, 3, :] & 0xF) << 4)
    qh = ((q[:, :, 0, :] >> 4) | ((q[:, :, 1, :] >> 4) << 2) | ((q[:, :, 2, :] >> 4) << 4)
          | ((q[:, :, 3, :] >> 4) << 6)).astype(np.uint8)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.astype(np.int8).view(np.uint8),
                           _f16_bytes(d16)], axis=1)


def _q2_k(xb):
    """16 groups of 16 with an affine 4-bit (scale, min) each, quants 0..3."""
    xs = xb.reshape(-1, 16, 16)
    lo = np.minimum(xs.min(axis=2), 0.0)
    scale = (xs.max(axis=2) - lo) / 3.0
    mins = -lo
    d16 = _f16(scale.max(axis=1) / 15.0)
    dmin16 = _f16(mins.max(axis=1) / 15.0)
    d, dmin = d16.astype(np.float32), dmin16.astype(np.float32)
    sc = np.clip(np.ceil(scale * _safe_inv(d)[:, None] - 0.25), 0, 15)   # round up rather than clip the top
    mq = np.clip(np.ceil(mins * _safe_inv(dmin)[:, None]), 0, 15)        # the min must reach the lowest value
    eff_scale = (d[:, None] * sc).astype(np.float32)
    eff_min = (dmin[:, None] * mq).astype(np.float32)
    q = np.clip(np.rint((xs + eff_min[:, :, None]) * _safe_inv(eff_scale)[:, :, None]), 0, 3).astype(np.uint8)
    q = q.reshape(-1, 2, 4, 32)                   # element 128n + 32j + l
    qs = (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)
    scales = (sc.astype(np.uint8) | (mq.astype(np.uint8) << 4))
    return np.concatenate([scales, qs, _f16_bytes(d16), _f16_bytes(dmin16)], axis=1)


def _pack_scales_q3_k(v: np.ndarray) -> np.ndarray:
    """16 six-bit values (scale + 32) per block -> the 12-byte packed form of Q3_K."""
    v = v.astype(np.uint8)
    out = np.zeros((v.shape[0], 12), dtype=np.uint8)
    out[:, 0:8] = (v[:, 0:8] & 0xF) | ((v[:, 8:16] & 0xF) << 4)
    for i in range(16):
        out[:, 8 + i % 4] |= ((v[:, i] >> 4) & 3) << (2 * (i // 4))
    return out


def _q3_k(xb):
    """16 groups of 16, symmetric quants -4..3 with a signed 6-bit scale each."""
    xs = xb.reshape(-1, 16, 16)
    s = _signed_absmax(xs.reshape(-1, 16)).reshape(-1, 16) / -4.0    # the largest maps to -4
    d16 = _f16(np.abs(s).max(axis=1) / 31.0)
    d = d16.astype(np.float32)
    sc = np.clip(np.rint(s * _safe_inv(d)[:, None]), -32, 31)
    eff = (d[:, None] * sc).astype(np.float32)
    u = (np.clip(np.rint(xs * _safe_inv(eff)[:, :, None]), -4, 3) + 4).astype(np.uint8).reshape(-1, 2, 4, 32)
    low = u & 3
    qs = (low[:, :, 0] | (low[:, :, 1] << 2) | (low[:, :, 2] << 4) | (low[:, :, 3] << 6)).reshape(-1, 64)
    hbit = (u >> 2).reshape(-1, 8, 32)            # bit 4n + j of byte l
    hmask = (hbit << np.arange(8, dtype=np.uint8)[None, :, None]).sum(axis=1).astype(np.uint8)
    return np.concatenate([hmask, qs, _pack_scales_q3_k(sc + 32), _f16_bytes(d16)], axis=1)


_IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)


def _iq4_nearest(xs, eff):
    """Index of the level nearest to x / eff (eff broadcast against xs)."""
    r = xs * _safe_inv(eff)
    return np.abs(r[..., None] - _IQ4_LEVELS).argmin(axis=-1).astype(np.uint8)


def _iq4_nl(xb):
    d16 = _f16(_signed_absmax(xb) / -127.0)       # the largest maps to the level -127
    idx = _iq4_nearest(xb, d16.astype(np.float32)[:, None])
    return np.concatenate([_f16_bytes(d16), _pack_nibbles32(idx)], axis=1)


def _iq4_xs(xb):
    """8 sub-blocks of 32 with a signed 6-bit scale each, IQ4_NL levels."""
    xs = xb.reshape(-1, 8, 32)
    s = _signed_absmax(xs.reshape(-1, 32)).reshape(-1, 8) / -127.0
    d16 = _f16(np.abs(s).max(axis=1) / 31.0)
    d = d16.astype(np.float32)
    ls = np.clip(np.rint(s * _safe_inv(d)[:, None]), -32, 31)
    eff = (d[:, None] * ls).astype(np.float32)
    idx = _iq4_nearest(xs, eff[:, :, None]).reshape(-1, 32)
    v = (ls + 32).astype(np.uint16)
    scales_h = (((v >> 4) & 3) << (2 * np.arange(8, dtype=np.uint16))).sum(axis=1).astype("<u2")
    scales_l = ((v[:, 0::2] & 0xF) | ((v[:, 1::2] & 0xF) << 4)).astype(np.uint8)
    return np.concatenate([_f16_bytes(d16), scales_h.view(np.uint8).reshape(-1, 2), scales_l,
                           _pack_nibbles32(idx).reshape(-1, 128)], axis=1)


# ---- MXFP4 (32 elements: E8M0 exponent byte, 16 bytes of e2m1 nibbles) ------------------------

MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)  # doubled


def _mxfp4(xb):
    """Scale 2^(e-128) the smallest power of two putting the block's max within the doubled
    value range (12), then each element to the nearest representable value."""
    amax = np.abs(xb).max(axis=1).astype(np.float64)
    with np.errstate(divide="ignore"):
        exp = np.where(amax > 0, np.ceil(np.log2(np.where(amax > 0, amax, 1.0) / 12.0)), -128)
    e = np.clip(exp + 128, 0, 254).astype(np.int64)
    scale = np.ldexp(1.0, (e - 128).astype(np.int32))
    cand = MXFP4_VALUES[None, None, :].astype(np.float64) * scale[:, None, None]
    q = np.abs(xb[:, :, None].astype(np.float64) - cand).argmin(axis=2).astype(np.uint8)
    return np.concatenate([e.astype(np.uint8)[:, None], _pack_nibbles32(q)], axis=1)


_BLOCK_QUANTISERS = {
    GgmlType.Q2_K: _q2_k, GgmlType.Q3_K: _q3_k, GgmlType.IQ4_NL: _iq4_nl, GgmlType.IQ4_XS: _iq4_xs,
    GgmlType.Q8_0: _q8_0, GgmlType.Q4_0: _q4_0, GgmlType.Q4_1: _q4_1, GgmlType.Q5_0: _q5_0,
    GgmlType.Q5_1: _q5_1, GgmlType.Q4_K: _q4_k, GgmlType.Q5_K: _q5_k, GgmlType.Q6_K: _q6_k,
    GgmlType.MXFP4: _mxfp4,
}


def quantize(x, ggml_type) -> np.ndarray:
    """Rows of floats -> raw bytes, shape x.shape[:-1] + (row_bytes,), dtype uint8."""
    t = GgmlType(ggml_type)
    x = np.asarray(x)
    lead = x.shape[:-1]
    n = x.shape[-1]
    rb = row_bytes(t, n)
    if t == GgmlType.F32:
        raw = np.ascontiguousarray(x, dtype="<f4").view(np.uint8)
    elif t == GgmlType.F16:
        raw = np.ascontiguousarray(x, dtype=np.float32).astype("<f2").view(np.uint8)
    elif t == GgmlType.BF16:
        raw = _to_bf16_bits(np.asarray(x, dtype=np.float32)).astype("<u2").view(np.uint8)
    else:
        bs = BLOCK_GEOMETRY[t][0]
        raw = _BLOCK_QUANTISERS[t](_blocks(x, bs))
    return np.ascontiguousarray(raw).reshape(lead + (rb,))


# ---- random raw blocks for dequantisation tests ------------------------------------------------

# Byte offsets of the f16 fields of each block type, and of its packed scale bytes.
F16_FIELDS = {
    GgmlType.Q4_0: [0], GgmlType.Q4_1: [0, 2], GgmlType.Q5_0: [0], GgmlType.Q5_1: [0, 2],
    GgmlType.Q8_0: [0], GgmlType.Q4_K: [0, 2], GgmlType.Q5_K: [0, 2], GgmlType.Q6_K: [208],
    GgmlType.Q2_K: [80, 82], GgmlType.Q3_K: [108], GgmlType.IQ4_NL: [0], GgmlType.IQ4_XS: [0],
    GgmlType.MXFP4: [],   # its scale is the exponent byte 0 (MXFP4_EDGE_EXPONENTS)
}
SCALE_BYTES = {GgmlType.Q4_K: (4, 16), GgmlType.Q5_K: (4, 16), GgmlType.Q6_K: (192, 208),
               GgmlType.Q2_K: (0, 16), GgmlType.Q3_K: (96, 108), GgmlType.IQ4_XS: (2, 8)}

# Interesting f16 bit patterns: zeros, denormals, smallest normal, extremes, ordinary values.
EDGE_F16 = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0200, 0x0400, 0x8400,
                     0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x3555, 0x0401, 0x7800], dtype=np.uint16)
# MXFP4 exponents: the f32 subnormal scales, the smallest normal one, 1, and the largest two
# (whose larger values overflow to infinity, as the format defines them).
MXFP4_EDGE_EXPONENTS = np.array([0, 1, 2, 3, 128, 253, 254, 255], dtype=np.uint8)
NONFINITE_F16 = np.array([0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00], dtype=np.uint16)


def _random_finite_f16_bits(rng, n, allow_nonfinite):
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    if not allow_nonfinite:
        bad = (bits & 0x7C00) == 0x7C00
        bits[bad] &= 0xBFFF  # clear the top exponent bit: finite, same sign
    return bits


def random_blocks(ggml_type, n_blocks: int, rng: np.random.Generator, edge_cases: bool = True,
                  allow_nonfinite: bool = False) -> np.ndarray:
    """n_blocks raw blocks (uint8, shape (n_blocks, block_bytes)) with random content.

    f16 scale fields are drawn from a mix of ordinary magnitudes, extremes and denormals;
    when edge_cases is set the first blocks are deliberate corner cases (all-zero block,
    all-ones bits with largest finite scales, denormal scales, zero sub-scales, ...).
    Float types get random finite bit patterns including denormals and signed zeros."""
    t = GgmlType(ggml_type)
    be, bb = BLOCK_GEOMETRY[t]
    if t in (GgmlType.F16, GgmlType.BF16):
        bits = rng.integers(0, 1 << 16, size=n_blocks, dtype=np.uint32).astype(np.uint16)
        if not allow_nonfinite:
            mask = 0x7C00 if t == GgmlType.F16 else 0x7F80
            bad = (bits & mask) == mask
            bits[bad] &= ~np.uint16(0x4000)
        if edge_cases:
            edges = EDGE_F16 if t == GgmlType.F16 else np.array(
                [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0x007F], dtype=np.uint16)
            k = min(len(edges), n_blocks)
            bits[:k] = edges[:k]
        return bits.astype("<u2").view(np.uint8).reshape(n_blocks, 2)
    if t == GgmlType.F32:
        bits = rng.integers(0, 1 << 32, size=n_blocks, dtype=np.uint64).astype(np.uint32)
        if not allow_nonfinite:
            bad = (bits & 0x7F800000) == 0x7F800000
            bits[bad] &= ~np.uint32(0x40000000)
        if edge_cases:
            edges = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000],
                             dtype=np.uint32)
            k = min(len(edges), n_blocks)
            bits[:k] = edges[:k]
        return bits.astype("<u4").view(np.uint8).reshape(n_blocks, 4)

    raw = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint16).astype(np.uint8)
    fields = F16_FIELDS[t]
    # scale fields: 60% ordinary magnitudes (2^-14 .. 2^2), 40% anything finite
    for off in fields:
        ordinary = (rng.integers(0, 0x1000, size=n_blocks) + 0x0400 + 0x0800 * rng.integers(0, 3, size=n_blocks))
        ordinary = (ordinary | (rng.integers(0, 2, size=n_blocks) << 15)).astype(np.uint16)
        anything = _random_finite_f16_bits(rng, n_blocks, allow_nonfinite)
        pick = rng.random(n_blocks) < 0.6
        bits = np.where(pick, ordinary, anything).astype("<u2")
        raw[:, off:off + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    if t == GgmlType.MXFP4:
        ordinary = rng.integers(100, 156, size=n_blocks).astype(np.uint8)
        raw[:, 0] = np.where(rng.random(n_blocks) < 0.8, ordinary, raw[:, 0])
        if edge_cases:
            k = min(len(MXFP4_EDGE_EXPONENTS), n_blocks)
            raw[n_blocks - k:, 0] = MXFP4_EDGE_EXPONENTS[:k]
    if allow_nonfinite and n_blocks > 0 and fields:
        for i, b in enumerate(NONFINITE_F16[:n_blocks]):
            raw[-1 - i, fields[0]:fields[0] + 2] = np.array([b], dtype="<u2").view(np.uint8)
    if edge_cases:
        for bi, case in enumerate(_edge_block_cases(t, fields)[:n_blocks]):
            case(raw[bi])
    return raw


def _set_f16(blk, off, bits):
    blk[off:off + 2] = np.array([bits], dtype="<u2").view(np.uint8)


def _edge_block_cases(t, fields):
    """Functions that each turn one block into a corner case."""
    cases = [lambda blk: blk.fill(0)]                                   # all zero

    def all_ones_max_scale(blk):                                        # every bit set, max finite scales
        blk.fill(0xFF)
        for off in fields:
            _set_f16(blk, off, 0x7BFF)
    cases.append(all_ones_max_scale)
    for ei in range(len(EDGE_F16)):                                     # each edge f16 in each field
        def edge_scales(blk, ei=ei):
            for j, off in enumerate(fields):
                _set_f16(blk, off, EDGE_F16[(ei + 3 * j) % len(EDGE_F16)])
        cases.append(edge_scales)
    if t in SCALE_BYTES:
        a, b = SCALE_BYTES[t]
        cases.append(lambda blk: blk.__setitem__(slice(a, b), 0))        # zero sub-scales
        cases.append(lambda blk: blk.__setitem__(slice(a, b), 0xFF))     # max sub-scales
        if t == GgmlType.Q6_K:
            cases.append(lambda blk: blk.__setitem__(slice(a, b), 0x80))  # int8 -128 sub-scales
    return cases
