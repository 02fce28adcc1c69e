"""Self-tests of the float64 reference forward pass (reference/forward.py).

The main check recomputes the model token by token with a deliberately different, loop-based
implementation written here (complex-number RoPE, per-head attention loops, argmax routing of a
top-1 model), using only the dequantised weights read from the file."""
import subprocess
import sys

import numpy as np
import pytest

from reference.forward import Reference
from reference.gguf_reader import GGUFReader
from tools import make_model as mm


def _hand_forward(path, tokens):
    """Independent sequential evaluation of a model with expert_used_count == 1."""
    r = GGUFReader(path)
    md = r.metadata
    arch = md["general.architecture"]

    def key(k, default=None):
        return md.get(f"{arch}.{k}", default)

    cache = {}

    def W(name):
        if name not in cache:
            cache[name] = r.tensor(name).astype(np.float64) if name in r.tensors else None
        return cache[name]

    n_embd, n_head = key("embedding_length"), key("attention.head_count")
    n_kv = key("attention.head_count_kv", n_head)
    hd = key("attention.key_length", n_embd // n_head)
    eps = key("attention.layer_norm_rms_epsilon")
    base = key("rope.freq_base", 10000.0)
    assert key("expert_used_count") == 1
    neox = arch != "llama"
    oss = arch == "gpt-oss"
    window = key("attention.sliding_window", 0)
    # YaRN, per pair i: the angle pos * f_i / factor, moved back to pos * f_i by the ramp
    # between the correction dims; every rotation scaled by 1 + 0.1 ln(factor).
    factor = key("rope.scaling.factor", 1.0) if key("rope.scaling.type") == "yarn" else 1.0
    orig = key("rope.scaling.original_context_length", 0)
    yarn_keep = np.ones(hd // 2)
    if factor > 1:
        lo, hi = (hd * np.log(orig / (b * 2 * np.pi)) / (2 * np.log(base)) for b in (32.0, 1.0))
        lo, hi = max(0.0, np.floor(lo)), min(hd - 1.0, np.ceil(hi))
        yarn_keep = np.array([1.0 - min(1.0, max(0.0, (i - lo) / max(0.001, hi - lo))) for i in range(hd // 2)])

    def norm(v, w):
        return v * (1.0 / np.sqrt(np.dot(v, v) / v.size + eps)) * w

    def rot(vec, pos):
        half = hd // 2
        freqs = np.array([base ** (-(2.0 * i) / hd) for i in range(half)])
        if neox:
            z = vec[:half] + 1j * vec[half:]
        else:
            z = vec[0::2] + 1j * vec[1::2]
        angle = pos * freqs * (yarn_keep + (1.0 - yarn_keep) / factor)
        z = z * np.exp(1j * angle) * (1.0 + 0.1 * np.log(factor))
        out = np.empty(hd)
        if neox:
            out[:half], out[half:] = z.real, z.imag
        else:
            out[0::2], out[1::2] = z.real, z.imag
        return out

    def lin(name, v, bias=None):
        y = W(name) @ v
        return y + W(bias) if bias is not None and W(bias) is not None else y

    n_layer = key("block_count")
    kcache = [[] for _ in range(n_layer)]
    vcache = [[] for _ in range(n_layer)]
    out = []
    for pos, tok in enumerate(tokens):
        x = W("token_embd.weight")[tok].copy()
        for il in range(n_layer):
            p = f"blk.{il}."
            a = norm(x, W(p + "attn_norm.weight"))
            q = lin(p + "attn_q.weight", a, p + "attn_q.bias")
            k = lin(p + "attn_k.weight", a, p + "attn_k.bias")
            v = lin(p + "attn_v.weight", a, p + "attn_v.bias")
            if arch == "olmoe":
                q, k = norm(q, W(p + "attn_q_norm.weight")), norm(k, W(p + "attn_k_norm.weight"))
            qh = [q[h * hd:(h + 1) * hd] for h in range(n_head)]
            kh = [k[h * hd:(h + 1) * hd] for h in range(n_kv)]
            vh = [v[h * hd:(h + 1) * hd] for h in range(n_kv)]
            if arch == "qwen3moe":
                qh = [norm(t, W(p + "attn_q_norm.weight")) for t in qh]
                kh = [norm(t, W(p + "attn_k_norm.weight")) for t in kh]
            qh = [rot(t, pos) for t in qh]
            kcache[il].append([rot(t, pos) for t in kh])
            vcache[il].append(vh)
            heads = []
            for h in range(n_head):
                g = h // (n_head // n_kv)
                seen = [j for j in range(pos + 1) if not (oss and il % 2 == 0 and pos - j >= window)]
                s = np.array([np.dot(qh[h], kcache[il][j][g]) / np.sqrt(hd) for j in seen])
                sink = [W(p + "attn_sinks.weight")[h]] if oss else []
                top = max([s.max()] + sink)
                wts = np.exp(s - top)
                wts /= wts.sum() + sum(np.exp(v - top) for v in sink)
                heads.append(sum(wts[i] * vcache[il][j][g] for i, j in enumerate(seen)))
            x = x + lin(p + "attn_output.weight", np.concatenate(heads), p + "attn_output.bias")
            m = norm(x, W(p + ("post_attention_norm.weight" if oss else "ffn_norm.weight")))
            rl = lin(p + "ffn_gate_inp.weight", m, p + "ffn_gate_inp.bias")
            e = int(np.argmax(rl))
            weight = 1.0 if arch in ("qwen3moe", "llama", "gpt-oss") else np.exp(rl[e]) / np.exp(rl).sum()
            gate = W(p + "ffn_gate_exps.weight")[e] @ m
            up = W(p + "ffn_up_exps.weight")[e] @ m
            if oss:
                gate = np.minimum(gate + W(p + "ffn_gate_exps.bias")[e], 7.0)
                up = np.clip(up + W(p + "ffn_up_exps.bias")[e], -7.0, 7.0)
                y = W(p + "ffn_down_exps.weight")[e] @ (gate / (1 + np.exp(-1.702 * gate)) * (up + 1))
                y = y + W(p + "ffn_down_exps.bias")[e]
            else:
                y = W(p + "ffn_down_exps.weight")[e] @ (gate / (1 + np.exp(-gate)) * up)
            ffn = weight * y
            if arch == "qwen2moe":
                gs = W(p + "ffn_gate_shexp.weight") @ m
                us = W(p + "ffn_up_shexp.weight") @ m
                sh = W(p + "ffn_down_shexp.weight") @ (gs / (1 + np.exp(-gs)) * us)
                ffn = ffn + sh / (1 + np.exp(-np.dot(W(p + "ffn_gate_inp_shexp.weight"), m)))
            x = x + ffn
        h = norm(x, W("output_norm.weight"))
        wout = W("output.weight") if W("output.weight") is not None else W("token_embd.weight")
        out.append(wout @ h)
    return np.array(out)


CASES = [
    dict(arch="qwen3moe", n_head=4, n_head_kv=2, head_dim=24, quant_mix="q4_k_m", tie_output=True),
    dict(arch="llama", n_head=8, n_head_kv=1, quant_mix="mixed", qkv_bias=True),
    dict(arch="olmoe", n_head=4, n_head_kv=4, quant_mix="q5_1"),
    dict(arch="qwen2moe", n_head=4, n_head_kv=2, quant_mix="bf16", router_mode="random", router_scale=3.0),
    dict(arch="gpt-oss", n_head=4, n_head_kv=2, head_dim=16, quant_mix="q8_0", n_swa=3, yarn_orig_ctx=64),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["arch"])
def test_top1_model_matches_independent_loop_implementation(tmp_path, case):
    path = tmp_path / "m.gguf"
    mm.make_model(path, n_embd=64, n_layer=2, n_expert=5, n_expert_used=1, n_ff_expert=64, n_vocab=300,
                  seed=11, **case)
    tokens = [5, 299, 17, 0, 64, 5, 123, 250, 33]
    want = _hand_forward(path, tokens)
    got = Reference(path).logits(tokens)
    assert got.shape == (len(tokens), 300)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-10 * scale


@pytest.fixture(scope="module")
def model_qwen3(tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "q3.gguf"
    mm.make_model(path, arch="qwen3moe", n_embd=128, n_layer=3, n_head=8, n_head_kv=2, n_expert=12,
                  n_expert_used=4, n_ff_expert=64, n_vocab=400, quant_mix="q8_0", seed=2)
    return path


def test_deterministic(model_qwen3):
    tokens = list(range(3, 40, 3))
    a = Reference(model_qwen3).run(tokens)
    b = Reference(model_qwen3).run(tokens)
    assert np.array_equal(a.logits, b.logits) and np.array_equal(a.experts, b.experts)
    assert np.all(np.isfinite(a.logits)) and a.logits.std() > 0.5


def test_all_positions_equal_prefix_and_incremental_evaluation(model_qwen3):
    ref = Reference(model_qwen3)
    tokens = [7, 1, 399, 42, 42, 100, 3, 250, 8, 9, 10]
    full = ref.logits(tokens)
    for i in (0, 4, len(tokens) - 1):
        np.testing.assert_allclose(ref.logits(tokens[:i + 1])[-1], full[i], rtol=0, atol=1e-11)
    st = ref.new_state()
    parts = [ref.eval(st, tokens[:3]).logits, ref.eval(st, tokens[3:4]).logits, ref.eval(st, tokens[4:]).logits]
    np.testing.assert_allclose(np.concatenate(parts), full, rtol=0, atol=1e-11)
    assert st.n_past == len(tokens)


def test_routing_report(model_qwen3):
    res = Reference(model_qwen3).run(list(range(0, 64, 2)))
    n_tok, n_layer, k = res.experts.shape
    assert (n_tok, n_layer, k) == (32, 3, 4)
    assert res.margins.shape == (32, 3)
    srt = -np.sort(-res.router_logits, axis=-1)
    np.testing.assert_allclose(res.margins, srt[..., 3] - srt[..., 4])
    chosen = np.take_along_axis(res.router_logits, res.experts, axis=-1)
    assert np.all(np.diff(chosen, axis=-1) <= 0)                   # slots in descending score
    np.testing.assert_allclose(res.weights.sum(-1), 1.0)           # qwen3moe renormalises
    # coded routers (the default) keep every decision clear of ties
    assert res.margins.min() > 0.2
    assert len(np.unique(res.experts)) == 12                      # every expert gets used


def test_random_router_has_smaller_margins(tmp_path):
    path = tmp_path / "r.gguf"
    mm.make_model(path, arch="olmoe", n_embd=64, n_layer=2, n_expert=16, n_expert_used=8, n_vocab=300,
                  router_mode="random", router_scale=1.0)
    res = Reference(path).run(list(range(40)))
    assert res.margins.min() < 0.1
    assert np.all(res.weights.sum(-1) < 1.0)                       # olmoe does not renormalise


def test_cli(tmp_path, model_qwen3, source_dir):
    out = tmp_path / "l.npy"
    routing = tmp_path / "r.npz"
    subprocess.run([sys.executable, "-m", "reference.forward", str(model_qwen3), "--tokens", "1,2,3",
                    "--out", str(out), "--routing", str(routing)], check=True, capture_output=True,
                   cwd=source_dir / "tests")
    got = np.load(out)
    np.testing.assert_array_equal(got, Reference(model_qwen3).logits([1, 2, 3]))
    assert np.load(routing)["margins"].shape == (3, 3)
