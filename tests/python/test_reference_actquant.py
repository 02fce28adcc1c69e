"""The activation-rounding emulation (reference/actquant.py) against block-level dot-product
formulas evaluated here from raw weight blocks, and its effect on the reference."""
import numpy as np
import pytest

from reference import actquant, dequant
from reference.forward import Reference
from tools import make_model as mm
from tools.gguf_writer import GgmlType
from tools.quants import quantize

f32 = np.float32


def _q8_blocks(x):
    """Q8_0/Q8_1 activation blocks computed step by step: (fp16 d, f32 d, q)."""
    b = x.astype(f32).reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = amax / f32(127)
    q = np.array([np.rint(row * (f32(127) / a)) if a > 0 else np.zeros(32, f32) for row, a in zip(b, amax)])
    return d.astype(np.float16).astype(np.float64), d, q


@pytest.mark.parametrize("wt", [GgmlType.Q4_1, GgmlType.Q5_1, GgmlType.Q4_0, GgmlType.Q8_0])
def test_q8_dot_products_follow_the_block_formula(wt):
    rng = np.random.default_rng(int(wt))
    K = 256
    w = rng.standard_normal((8, K)).astype(f32) * 0.1 + 0.05
    raw = quantize(w, wt)
    wdeq = dequant.dequantize(raw, int(wt)).reshape(8, K).astype(np.float64)
    x = rng.standard_normal(K).astype(f32)
    d16, d32, q = _q8_blocks(x)
    # engine formula per block: d_w * d_a * sum(qw * qa) (+ m_w * s) == sum(w_deq * a) (+ m (s - d16 sum q))
    want = np.zeros(8)
    bb = {GgmlType.Q4_1: 20, GgmlType.Q5_1: 24, GgmlType.Q4_0: 18, GgmlType.Q8_0: 34}[wt]
    blocks = raw.reshape(8, K // 32, bb)
    for r in range(8):
        for bi in range(K // 32):
            wvals = wdeq[r, bi * 32:(bi + 1) * 32]
            if wt in (GgmlType.Q4_1, GgmlType.Q5_1):
                m = float(np.frombuffer(blocks[r, bi, 2:4].tobytes(), "<f2")[0])
                s = float(np.float16(d32[bi] * q[bi].sum()))
                want[r] += np.dot(wvals - m, q[bi]) * d16[bi] + m * s
            else:
                want[r] += np.dot(wvals, q[bi]) * d16[bi]
    a = actquant.activation_values(x, int(wt))
    got = wdeq @ a
    if wt in (GgmlType.Q4_1, GgmlType.Q5_1):
        mins = np.frombuffer(np.ascontiguousarray(blocks[:, :, 2:4]).tobytes(), "<f2").reshape(8, K // 32)
        got = got + mins.astype(np.float64) @ actquant.q8_1_sum_correction(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_q8_k_values():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 512)).astype(f32)
    x[1, 7] = -9.0                                   # negative max: d < 0
    x[2] = 0.0
    v = actquant.activation_values(x, int(GgmlType.Q4_K))
    assert np.all(v[2] == 0)
    for row, vrow in zip(x[:2], v[:2]):
        for blk in range(2):
            b, vb = row[blk * 256:(blk + 1) * 256], vrow[blk * 256:(blk + 1) * 256]
            mx = b[np.argmax(np.abs(b))]
            d = f32(1) / (f32(-127) / mx)
            assert np.abs(vb - b).max() <= abs(float(d)) * 0.5 * (1 + 1e-6)
            q = vb / float(d)
            assert np.allclose(q, np.rint(q)) and q.max() <= 127 and q.min() >= -128


def test_float_formats():
    x = np.array([1.0 + 2 ** -12, 3.14159, -1e-5, 65504.0], dtype=f32)
    np.testing.assert_array_equal(actquant.activation_values(x, int(GgmlType.F16)), x.astype(np.float16))
    bf = actquant.activation_values(x, int(GgmlType.BF16))
    assert bf[0] == 1.0 and abs(bf[1] - 3.140625) < 1e-12
    np.testing.assert_array_equal(actquant.activation_values(x, int(GgmlType.F32)), x)


def test_emulation_changes_logits_by_the_expected_amount(tmp_path):
    path = tmp_path / "m.gguf"
    mm.make_model(path, arch="qwen3moe", n_embd=128, n_layer=2, n_expert=8, n_expert_used=2, quant_mix="q4_0")
    toks = [3, 1, 4, 1, 5, 9, 2, 6]
    exact = Reference(path).logits(toks)
    emu = Reference(path, act_quant=True, kv_f16=True).logits(toks)
    rel = np.abs(emu - exact).max() / (exact.max() - exact.min())
    assert 1e-4 < rel < 3e-2, rel
    f32_model = tmp_path / "f.gguf"
    mm.make_model(f32_model, arch="qwen3moe", n_embd=128, n_layer=2, n_expert=8, n_expert_used=2, quant_mix="f32")
    a, b = Reference(f32_model).logits(toks), Reference(f32_model, act_quant=True).logits(toks)
    assert np.abs(a - b).max() / (a.max() - a.min()) < 1e-5   # F32 weights: activations only go to f32
