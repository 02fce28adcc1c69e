"""Quantisers (tools/quants.py) and the reference dequantiser (reference/dequant.py).

* quantise -> dequantise round trips stay within each format's error bound;
* the vectorised reference dequantiser equals, bit for bit, a literal per-element
  transcription of the block formulas written here (a third, scalar implementation);
* random raw blocks (including edge cases) have the right geometry and dequantise.
"""
import numpy as np
import pytest

from reference import dequant
from tools.gguf_writer import BLOCK_GEOMETRY, GgmlType
from tools.quants import ALL_TYPES, quantize, random_blocks

f32 = np.float32

# Max |error| per block (32 elements; 256 for k-quants) relative to that block's max |x|, and
# relative RMS error.
BOUNDS = {
    GgmlType.F32: (0.0, 0.0), GgmlType.F16: (2.0 ** -11, 3e-4), GgmlType.BF16: (2.0 ** -8, 2.2e-3),
    GgmlType.Q8_0: (0.0042, 0.007), GgmlType.Q4_0: (0.127, 0.11), GgmlType.Q4_1: (0.069, 0.10),
    GgmlType.Q5_0: (0.064, 0.055), GgmlType.Q5_1: (0.034, 0.05), GgmlType.Q4_K: (0.10, 0.10),
    GgmlType.Q5_K: (0.06, 0.05), GgmlType.Q6_K: (0.06, 0.026),
    # 2- and 3-bit quants: the error of 4 and 8 levels per group
    GgmlType.Q2_K: (0.34, 0.345), GgmlType.Q3_K: (0.26, 0.16),
    GgmlType.IQ4_NL: (0.115, 0.085), GgmlType.IQ4_XS: (0.135, 0.085),
    GgmlType.MXFP4: (0.34, 0.2),
}


def _block_err(x, y, t):
    g = 256 if BLOCK_GEOMETRY[t][0] == 256 else 32
    return np.abs(x - y).reshape(-1, g).max(axis=1) / np.abs(x).reshape(-1, g).max(axis=1)


def _roundtrip(x, t):
    q = quantize(x, t)
    assert q.dtype == np.uint8
    assert q.shape == x.shape[:-1] + (x.shape[-1] // BLOCK_GEOMETRY[t][0] * BLOCK_GEOMETRY[t][1],)
    return dequant.dequantize(q, int(t)).reshape(x.shape)


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("scale", [1e-3, 1.0, 300.0])
def test_roundtrip_error_within_bound(t, scale):
    rng = np.random.default_rng(int(t) * 7 + int(scale * 10))
    x = (rng.standard_normal((64, 512)) * scale).astype(f32)
    y = _roundtrip(x, t)
    group_err = _block_err(x, y, t)
    rms = np.sqrt(np.mean((x - y) ** 2) / np.mean(x ** 2))
    max_bound, rms_bound = BOUNDS[t]
    assert group_err.max() <= max_bound * 1.0001 + 1e-7, group_err.max()
    assert rms <= rms_bound + 1e-7, rms


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_special_rows(t):
    n = 512
    zero = np.zeros((2, n), f32)
    assert np.array_equal(_roundtrip(zero, t), zero)          # zero rows stay exactly zero
    rng = np.random.default_rng(5)
    neg = -np.abs(rng.standard_normal((4, n))).astype(f32) - 0.5   # all negative
    pos = np.abs(rng.standard_normal((4, n))).astype(f32) + 0.5    # all positive (min offsets)
    const = np.full((1, n), 0.75, f32)
    spiky = (rng.standard_normal((4, n)) * 1e-3).astype(f32)
    spiky[:, ::97] = 50.0                                          # huge dynamic range
    for x in (neg, pos, const, spiky):
        y = _roundtrip(x, t)
        assert np.all(np.isfinite(y))
        assert _block_err(x, y, t).max() <= BOUNDS[t][0] * 1.0001 + 1e-7


def test_sign_preserved_for_large_values():
    # A broken nibble order or sub-block mapping scrambles positions; check a ramp survives.
    x = np.linspace(-4, 4, 1024, dtype=f32)[None, :]
    for t in ALL_TYPES:
        y = _roundtrip(x, t)
        assert np.corrcoef(x[0], y[0])[0, 1] > 0.995, t.name


# ---- a literal scalar transcription of the block formulas ---------------------------------------

def _h(b, off):
    return f32(np.frombuffer(bytes(b[off:off + 2]), dtype="<f2")[0])


def _scalar_block(t, b):
    """One block -> list of float32, element by element, exactly as the format text reads."""
    y = [None] * BLOCK_GEOMETRY[t][0]
    if t == GgmlType.Q4_0:
        d = _h(b, 0)
        for j in range(16):
            y[j] = f32(int(b[2 + j] & 0xF) - 8) * d
            y[j + 16] = f32(int(b[2 + j] >> 4) - 8) * d
    elif t == GgmlType.Q4_1:
        d, m = _h(b, 0), _h(b, 2)
        for j in range(16):
            y[j] = f32(b[4 + j] & 0xF) * d + m
            y[j + 16] = f32(b[4 + j] >> 4) * d + m
    elif t in (GgmlType.Q5_0, GgmlType.Q5_1):
        off = 2 if t == GgmlType.Q5_0 else 4
        H = int.from_bytes(bytes(b[off:off + 4]), "little")
        d = _h(b, 0)
        for j in range(16):
            lo = (int(b[off + 4 + j]) & 0xF) | (((H >> j) & 1) << 4)
            hi = (int(b[off + 4 + j]) >> 4) | (((H >> (j + 16)) & 1) << 4)
            if t == GgmlType.Q5_0:
                y[j], y[j + 16] = f32(lo - 16) * d, f32(hi - 16) * d
            else:
                m = _h(b, 2)
                y[j], y[j + 16] = f32(lo) * d + m, f32(hi) * d + m
    elif t == GgmlType.Q8_0:
        d = _h(b, 0)
        for j in range(32):
            y[j] = f32(int(np.int8(np.uint8(b[2 + j])))) * d
    elif t in (GgmlType.Q4_K, GgmlType.Q5_K):
        d, dmin = _h(b, 0), _h(b, 2)
        q = [int(v) for v in b[4:16]]

        def scale_min(j):
            if j < 4:
                return q[j] & 63, q[j + 4] & 63
            return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)
        qs_off = 16 if t == GgmlType.Q4_K else 48
        for k in range(4):
            sc0, m0 = scale_min(2 * k)
            sc1, m1 = scale_min(2 * k + 1)
            for l in range(32):
                v = int(b[qs_off + 32 * k + l])
                lo, hi = v & 0xF, v >> 4
                if t == GgmlType.Q5_K:
                    qh = int(b[16 + l])
                    lo += 16 * ((qh >> (2 * k)) & 1)
                    hi += 16 * ((qh >> (2 * k + 1)) & 1)
                y[64 * k + l] = (d * f32(sc0)) * f32(lo) - dmin * f32(m0)
                y[64 * k + 32 + l] = (d * f32(sc1)) * f32(hi) - dmin * f32(m1)
    elif t == GgmlType.Q6_K:
        d = _h(b, 208)
        for n in range(2):
            L, Hh, S = 64 * n, 128 + 32 * n, 192 + 8 * n
            for l in range(32):
                is_ = l // 16
                sc = [f32(int(np.int8(np.uint8(b[S + is_ + 2 * i])))) for i in range(4)]
                q1 = ((int(b[L + l]) & 0xF) | (((int(b[Hh + l]) >> 0) & 3) << 4)) - 32
                q2 = ((int(b[L + l + 32]) & 0xF) | (((int(b[Hh + l]) >> 2) & 3) << 4)) - 32
                q3 = ((int(b[L + l]) >> 4) | (((int(b[Hh + l]) >> 4) & 3) << 4)) - 32
                q4 = ((int(b[L + l + 32]) >> 4) | (((int(b[Hh + l]) >> 6) & 3) << 4)) - 32
                y[128 * n + l] = d * sc[0] * f32(q1)
                y[128 * n + l + 32] = d * sc[1] * f32(q2)
                y[128 * n + l + 64] = d * sc[2] * f32(q3)
                y[128 * n + l + 96] = d * sc[3] * f32(q4)
    elif t in (GgmlType.Q2_K, GgmlType.Q3_K):
        for n in range(2):
            for j in range(4):
                for l in range(32):
                    g = 8 * n + 2 * j + l // 16
                    low = (int(b[(16 if t == GgmlType.Q2_K else 32) + 32 * n + l]) >> (2 * j)) & 3
                    if t == GgmlType.Q2_K:
                        sc = int(b[g])
                        y[128 * n + 32 * j + l] = (_h(b, 80) * f32(sc & 0xF)) * f32(low) - _h(b, 82) * f32(sc >> 4)
                    else:
                        low4 = int(b[96 + g]) & 0xF if g < 8 else int(b[96 + g - 8]) >> 4
                        hi2 = (int(b[104 + g % 4]) >> (2 * (g // 4))) & 3
                        hbit = (int(b[l]) >> (4 * n + j)) & 1
                        y[128 * n + 32 * j + l] = (_h(b, 108) * f32((low4 | hi2 << 4) - 32)) * f32(low - (0 if hbit else 4))
    elif t == GgmlType.IQ4_NL:
        d = _h(b, 0)
        for j in range(16):
            y[j] = d * f32(dequant.IQ4_LEVELS[int(b[2 + j]) & 0xF])
            y[j + 16] = d * f32(dequant.IQ4_LEVELS[int(b[2 + j]) >> 4])
    elif t == GgmlType.IQ4_XS:
        d = _h(b, 0)
        scales_h = int(b[2]) | int(b[3]) << 8
        for ib in range(8):
            ls = ((int(b[4 + ib // 2]) >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4)
            dl = d * f32(ls - 32)
            for j in range(16):
                v = int(b[8 + 16 * ib + j])
                y[32 * ib + j] = dl * f32(dequant.IQ4_LEVELS[v & 0xF])
                y[32 * ib + 16 + j] = dl * f32(dequant.IQ4_LEVELS[v >> 4])
    elif t == GgmlType.MXFP4:
        e = int(b[0])
        s = f32(2.0 ** (e - 128)) if e < 255 else f32(2.0 ** 127)
        doubled = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]
        with np.errstate(over="ignore"):
            for j in range(16):
                y[j] = f32(doubled[int(b[1 + j]) & 0xF]) * s
                y[j + 16] = f32(doubled[int(b[1 + j]) >> 4]) * s
    elif t == GgmlType.F16:
        y[0] = _h(b, 0)
    elif t == GgmlType.BF16:
        y[0] = np.frombuffer((int(b[0]) << 16 | int(b[1]) << 24).to_bytes(4, "little"), dtype="<f4")[0]
    elif t == GgmlType.F32:
        y[0] = np.frombuffer(bytes(b[0:4]), dtype="<f4")[0]
    return np.array(y, dtype=f32)


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_vectorised_dequant_matches_scalar_transcription(t):
    rng = np.random.default_rng(100 + int(t))
    n = 40 if BLOCK_GEOMETRY[t][0] > 1 else 400
    blocks = random_blocks(t, n, rng)
    with np.errstate(over="ignore"):
        got = dequant.dequantize(blocks, int(t)).reshape(n, -1)
        want = np.stack([_scalar_block(t, blocks[i]) for i in range(n)])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_random_blocks_geometry_and_determinism(t):
    be, bb = BLOCK_GEOMETRY[t]
    a = random_blocks(t, 64, np.random.default_rng(3))
    b = random_blocks(t, 64, np.random.default_rng(3))
    assert a.shape == (64, bb) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    with np.errstate(over="ignore"):
        y = dequant.dequantize(a, int(t))
    assert y.shape == (64 * be,)
    if t in (GgmlType.F16, GgmlType.BF16, GgmlType.F32):
        assert np.all(np.isfinite(y))
    if be > 1:
        assert np.all(y[:be] == 0)   # the all-zero edge block


def test_dequant_rejects_bad_sizes():
    with pytest.raises(ValueError):
        dequant.dequantize(np.zeros(17, np.uint8), int(GgmlType.Q4_0))
    with pytest.raises(ValueError):
        dequant.nbytes(int(GgmlType.Q4_K), 255)
