"""Reference dequantisation of GGML blocks, written from the block format description.

Every formula is evaluated in float32 with one rounding per operation and in the
operation order of the format description (e.g. Q4_K: (d*sc)*q - (dmin*m)), so
that an engine implementing the same formulas without fused multiply-add matches
bit for bit. No code is shared with the quantisers in tests/tools.
"""
from __future__ import annotations

import numpy as np

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, BF16, MXFP4 = 0, 1, 2, 3, 6, 7, 8, 12, 13, 14, 30, 39
Q2_K, Q3_K, IQ4_NL, IQ4_XS = 10, 11, 20, 23

# type id -> (name, elements per block, bytes per block)
TYPES = {
    F32: ("F32", 1, 4), F16: ("F16", 1, 2), BF16: ("BF16", 1, 2),
    Q4_0: ("Q4_0", 32, 18), Q4_1: ("Q4_1", 32, 20), Q5_0: ("Q5_0", 32, 22), Q5_1: ("Q5_1", 32, 24),
    Q8_0: ("Q8_0", 32, 34), Q4_K: ("Q4_K", 256, 144), Q5_K: ("Q5_K", 256, 176), Q6_K: ("Q6_K", 256, 210),
    Q2_K: ("Q2_K", 256, 84), Q3_K: ("Q3_K", 256, 110), IQ4_NL: ("IQ4_NL", 32, 18), IQ4_XS: ("IQ4_XS", 256, 136),
    MXFP4: ("MXFP4", 32, 17),
}
# the 16 non-uniform levels of IQ4_NL / IQ4_XS, indexed by a 4-bit quant
IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int32)
TYPE_IDS = {name: tid for tid, (name, _, _) in TYPES.items()}

_f32 = np.float32


def _half(b: np.ndarray, off: int) -> np.ndarray:
    """f16 field at byte offset `off` of every block (blocks: uint8 [n, block_bytes]) -> float32."""
    return np.ascontiguousarray(b[:, off:off + 2]).view("<f2")[:, 0].astype(_f32)


def _lo(b):
    return (b & 0x0F).astype(_f32)


def _hi(b):
    return (b >> 4).astype(_f32)


def _deq_q4_0(b):
    d = _half(b, 0)[:, None]
    qs = b[:, 2:18]
    q = np.concatenate([(qs & 0x0F).astype(np.int32) - 8, (qs >> 4).astype(np.int32) - 8], axis=1)
    return q.astype(_f32) * d


def _deq_q4_1(b):
    d = _half(b, 0)[:, None]
    m = _half(b, 2)[:, None]
    qs = b[:, 4:20]
    q = np.concatenate([_lo(qs), _hi(qs)], axis=1)
    return q * d + m


def _fifth_bits(b, off):
    """The 32 fifth bits of a Q5 block: little-endian u32 at `off`, bit i for element i."""
    h = np.ascontiguousarray(b[:, off:off + 4]).view("<u4")[:, 0]
    return ((h[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)


def _deq_q5_0(b):
    d = _half(b, 0)[:, None]
    hb = _fifth_bits(b, 2)
    qs = b[:, 6:22]
    lo = np.concatenate([(qs & 0x0F), (qs >> 4)], axis=1).astype(np.int32)
    q = (lo | (hb << 4)) - 16
    return q.astype(_f32) * d


def _deq_q5_1(b):
    d = _half(b, 0)[:, None]
    m = _half(b, 2)[:, None]
    hb = _fifth_bits(b, 4)
    qs = b[:, 8:24]
    lo = np.concatenate([(qs & 0x0F), (qs >> 4)], axis=1).astype(np.int32)
    q = (lo | (hb << 4)).astype(_f32)
    return q * d + m


def _deq_q8_0(b):
    d = _half(b, 0)[:, None]
    q = np.ascontiguousarray(b[:, 2:34]).view(np.int8).astype(_f32)
    return q * d


# e2m1 values by nibble (sign bit 3), doubled: the block scale is then half the E8M0 value.
_MXFP4_DOUBLED = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=_f32)


def _e8m0_half(e):
    """2^(e - 128) as float32 (subnormal for e < 2), built from its bits."""
    e = e.astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32)
    return bits.view(np.float32)


def _deq_mxfp4(b):
    s = _e8m0_half(b[:, 0])[:, None]
    qs = b[:, 1:17]
    q = np.concatenate([_MXFP4_DOUBLED[qs & 0x0F], _MXFP4_DOUBLED[qs >> 4]], axis=1)
    return q * s


def _scale_min_k4(sc12):
    """Unpack 8 six-bit (scale, min) pairs from the 12 scale bytes of Q4_K / Q5_K."""
    q = sc12.astype(np.int32)
    sc = np.empty((q.shape[0], 8), dtype=np.int32)
    mn = np.empty((q.shape[0], 8), dtype=np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j] = q[:, j] & 63
            mn[:, j] = q[:, j + 4] & 63
        else:
            sc[:, j] = (q[:, j + 4] & 0xF) | ((q[:, j - 4] >> 6) << 4)
            mn[:, j] = (q[:, j + 4] >> 4) | ((q[:, j] >> 6) << 4)
    return sc, mn


def _kquant_affine(b, qvals):
    """y = (d*sc) * q - (dmin*m) per 32-element sub-block; qvals float32 [n, 8, 32]."""
    d = _half(b, 0)
    dmin = _half(b, 2)
    sc, mn = _scale_min_k4(b[:, 4:16])
    d1 = d[:, None] * sc.astype(_f32)      # float32 products, rounded once each
    m1 = dmin[:, None] * mn.astype(_f32)
    return (d1[:, :, None] * qvals - m1[:, :, None]).reshape(-1, 256)


def _deq_q4_k(b):
    qs = b[:, 16:144].reshape(-1, 4, 32)   # 4 chunks of 32 bytes; chunk k feeds sub-blocks 2k, 2k+1
    q = np.stack([_lo(qs), _hi(qs)], axis=2).reshape(-1, 8, 32)
    return _kquant_affine(b, q)


def _deq_q5_k(b):
    qh = b[:, 16:48].astype(np.int32)       # [n, 32]; bit s of qh[l] is the fifth bit of sub-block s
    qs = b[:, 48:176].reshape(-1, 4, 32)
    low = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.int32)
    high = (qh[:, None, :] >> np.arange(8)[None, :, None]) & 1
    q = (low + 16 * high).astype(_f32)
    return _kquant_affine(b, q)


def _deq_q6_k(b):
    n = b.shape[0]
    ql = b[:, 0:128].reshape(n, 2, 64).astype(np.int32)
    qh = b[:, 128:192].reshape(n, 2, 32).astype(np.int32)
    sc = np.ascontiguousarray(b[:, 192:208]).view(np.int8).astype(_f32)   # [n, 16]
    d = _half(b, 208)
    q = np.empty((n, 2, 4, 32), dtype=np.int32)   # element 128*half + 32*t + l
    q[:, :, 0] = ((ql[:, :, 0:32] & 0xF) | (((qh >> 0) & 3) << 4)) - 32
    q[:, :, 1] = ((ql[:, :, 32:64] & 0xF) | (((qh >> 2) & 3) << 4)) - 32
    q[:, :, 2] = ((ql[:, :, 0:32] >> 4) | (((qh >> 4) & 3) << 4)) - 32
    q[:, :, 3] = ((ql[:, :, 32:64] >> 4) | (((qh >> 6) & 3) << 4)) - 32
    ds = d[:, None] * sc                            # float32 [n, 16], one scale per 16 elements
    return (ds[:, :, None] * q.reshape(n, 16, 16).astype(_f32)).reshape(n, 256)


def _two_bit_quants(qs):
    """Q2_K / Q3_K: 64 quant bytes [n, 64] -> [n, 256] int32; element 128n + 32j + l is bits
    2j..2j+1 of byte 32n + l."""
    q = qs.reshape(-1, 2, 1, 32).astype(np.int32) >> (2 * np.arange(4)[None, None, :, None])
    return (q & 3).reshape(-1, 256)


def _deq_q2_k(b):
    """(d*sc)*q - (dmin*m) per 16-element group g (sc, m: low, high nibble of scale byte g)."""
    sc = b[:, 0:16]
    d, dmin = _half(b, 80), _half(b, 82)
    dg = d[:, None] * _lo(sc)                       # float32 [n, 16]
    mg = dmin[:, None] * _hi(sc)
    q = _two_bit_quants(b[:, 16:80]).reshape(-1, 16, 16).astype(_f32)
    return (dg[:, :, None] * q - mg[:, :, None]).reshape(-1, 256)


def _q3_k_scales(sb):
    """12 packed bytes [n, 12] -> 16 signed six-bit scales [n, 16] (-32..31)."""
    p = sb.astype(np.int32)
    i = np.arange(16)
    low4 = np.where(i < 8, p[:, i % 8] & 0xF, p[:, i % 8] >> 4)
    hi2 = (p[:, 8 + i % 4] >> (2 * (i // 4))) & 3
    return (low4 | (hi2 << 4)) - 32


def _deq_q3_k(b):
    """(d*S)*q per 16-element group, q = low two bits - 4 unless the hmask bit is set."""
    hm = b[:, 0:32].astype(np.int32)               # bit 4n + j of byte l: element 128n + 32j + l
    hbit = (hm[:, None, :] >> np.arange(8)[None, :, None]) & 1   # [n, 4n + j, l]
    q = _two_bit_quants(b[:, 32:96]) - 4 * (1 - hbit.reshape(-1, 256))
    dg = _half(b, 108)[:, None] * _q3_k_scales(b[:, 96:108]).astype(_f32)
    return (dg[:, :, None] * q.reshape(-1, 16, 16).astype(_f32)).reshape(-1, 256)


def _iq4_levels(qs):
    """[n, k*16] nibble bytes -> [n, k, 32] float32 levels (low nibbles, then high, per 16 bytes)."""
    q = qs.reshape(qs.shape[0], -1, 16)
    return IQ4_LEVELS[np.concatenate([q & 0xF, q >> 4], axis=2)].astype(_f32)


def _deq_iq4_nl(b):
    return _half(b, 0)[:, None] * _iq4_levels(b[:, 2:18])[:, 0]


def _deq_iq4_xs(b):
    """(d*S)*level per 32-element sub-block, S = 6-bit scale - 32."""
    sh = np.ascontiguousarray(b[:, 2:4]).view("<u2")[:, 0].astype(np.int32)
    ib = np.arange(8)
    low = (b[:, 4 + ib // 2].astype(np.int32) >> (4 * (ib % 2))) & 0xF
    ls = (low | (((sh[:, None] >> (2 * ib)) & 3) << 4)) - 32
    dl = _half(b, 0)[:, None] * ls.astype(_f32)
    return (dl[:, :, None] * _iq4_levels(b[:, 8:136])).reshape(-1, 256)


_BLOCK_DEQUANT = {
    Q2_K: _deq_q2_k, Q3_K: _deq_q3_k, IQ4_NL: _deq_iq4_nl, IQ4_XS: _deq_iq4_xs,
    Q4_0: _deq_q4_0, Q4_1: _deq_q4_1, Q5_0: _deq_q5_0, Q5_1: _deq_q5_1, Q8_0: _deq_q8_0,
    Q4_K: _deq_q4_k, Q5_K: _deq_q5_k, Q6_K: _deq_q6_k, MXFP4: _deq_mxfp4,
}


def nbytes(type_id: int, n_elements: int) -> int:
    _, be, bb = TYPES[type_id]
    if n_elements % be:
        raise ValueError(f"{n_elements} elements is not a multiple of the {TYPES[type_id][0]} block size {be}")
    return n_elements // be * bb


def dequantize(raw, type_id: int, n_elements: int | None = None) -> np.ndarray:
    """Raw bytes (any buffer / uint8 array) of consecutive blocks -> float32 [n_elements]."""
    if type_id not in TYPES:
        raise ValueError(f"unsupported ggml type {type_id}")
    name, be, bb = TYPES[type_id]
    buf = np.frombuffer(raw, dtype=np.uint8) if not isinstance(raw, np.ndarray) else raw.reshape(-1).view(np.uint8)
    if n_elements is None:
        if buf.size % bb:
            raise ValueError(f"{buf.size} bytes is not a whole number of {name} blocks")
        n_elements = buf.size // bb * be
    need = nbytes(type_id, n_elements)
    if buf.size < need:
        raise ValueError(f"{name}: need {need} bytes for {n_elements} elements, got {buf.size}")
    buf = buf[:need]
    if type_id == F32:
        return np.ascontiguousarray(buf).view("<f4").astype(_f32)
    if type_id == F16:
        return np.ascontiguousarray(buf).view("<f2").astype(_f32)
    if type_id == BF16:
        bits = np.ascontiguousarray(buf).view("<u2").astype(np.uint32) << 16
        return bits.view(np.float32).copy()
    blocks = buf.reshape(-1, bb)
    out = np.empty((blocks.shape[0], be), dtype=_f32)
    step = 1 << 16  # blocks per chunk keeps temporaries small for big tensors
    for s in range(0, blocks.shape[0], step):
        out[s:s + step] = _BLOCK_DEQUANT[type_id](blocks[s:s + step])
    return out.reshape(-1)
