"""Float64 reference forward pass for qwen3moe, llama (Mixtral-style MoE), olmoe, qwen2moe, gpt-oss and
deepseek2.

    ref = Reference("model.gguf")
    logits = ref.logits([1, 2, 3])              # [n_tokens, n_vocab], every position
    res = ref.run([1, 2, 3])                     # logits + routing (experts, weights, margins)
    st = ref.new_state(); ref.eval(st, [1, 2]); ref.eval(st, [3])   # incremental (KV cache)

CLI:  python3 -m reference.forward MODEL --tokens 1,2,3 --out FILE.npy [--last] [--routing FILE.npz]

Semantics (the model, not any particular implementation's rounding): weights are the
dequantised float32 values of the file, everything else is float64; KV cache in float64.
  x = token_embd[token]
  per layer:  a = RMSNorm(x, attn_norm)
              q, k, v = Wq a (+bq), Wk a (+bk), Wv a (+bv)
              qwen3moe: RMSNorm per head on q and k (attn_q_norm/attn_k_norm, [head_dim])
              olmoe:    RMSNorm over the whole q and k vectors ([n_head*head_dim] / [n_kv*head_dim])
              RoPE (llama: NORMAL pairs (2i, 2i+1); others: NEOX pairs (i, i+n_rot/2));
                with rope.scaling.type yarn: theta_i = theta_i/factor (1 - ramp_i) + theta_i ramp_i,
                ramp_i = 1 - clamp((i - low)/max(0.001, high - low), 0, 1) with llama.cpp's
                floor/ceil correction dims (beta 32 and 1), cos/sin times 1 + 0.1 ln(factor)
                (times 1 for a factor of at most 1, as llama.cpp's get_mscale)
              causal attention, scale 1/sqrt(head_dim), query head h uses KV head h // (n_head/n_kv);
                gpt-oss: even layers see only keys p0 with p - p0 < sliding_window, and each head's
                sink s_h joins the softmax: w_j = exp(z_j) / (sum_j exp(z_j) + exp(s_h))
              x = x + Wo o (+bo)
              m = RMSNorm(x, ffn_norm)   (gpt-oss: post_attention_norm)
              router logits r = Wr m (+ router bias); p = softmax(r); top-k by p (ties: lower
              expert id first); w = p[top-k]; qwen3moe/llama: w /= max(sum w, 6.103515625e-5)
              gpt-oss: top-k of r, w = softmax(r[top-k])
              moe = sum_slots w_s * Wdown_e (silu(Wgate_e m) * Wup_e m)
              gpt-oss: moe = sum_slots w_s * (Wdown_e oai(Wgate_e m + bg_e, Wup_e m + bu_e) + bd_e),
                oai(g, u) = x sigmoid(1.702 x) (y + 1), x = min(g, 7), y = clamp(u, -7, 7)
              qwen2moe: moe += sigmoid(w_shexp . m) * Wdown_sh (silu(Wgate_sh m) * Wup_sh m)
              x = x + moe
  logits = Wout RMSNorm(x, output_norm); Wout = output.weight, or token_embd where the arch
  allows a tied output (qwen3moe, llama, deepseek2).
deepseek2 (latent attention in the absorbed form, one cached row per token):
  q = Wq_b RMSNorm(Wq_a a, q_a_norm) (or Wq a), per head q_nope | q_pe
  c = Wkv_a a;  row = RMSNorm(c[:kv_lora], kv_a_norm) | RoPE(c[kv_lora:])   (NORMAL pairs)
  Q_h = (Wk_b[h] q_nope_h) | RoPE(q_pe_h);  scores = Q_h . row * mscale^2 / sqrt(nope + rope) (YaRN)
  o_h = Wv_b[h] (softmax(scores) . row[:kv_lora]);  x = x + Wo concat(o_h)
  leading_dense_block_count layers: x = x + Wdown (silu(Wgate m) * Wup m)
  other layers: p = softmax(r) or sigmoid(r); chosen by p + exp_probs_b within the
  expert_group_used_count groups of best top-2 sums; w = p[top-k], renormalised if
  expert_weights_norm, times expert_weights_scale; moe += ungated shared SwiGLU of m.
  Routing arrays hold expert -1, weight 0 and margin +inf for dense layers.
RMSNorm(x, w) = x / sqrt(mean(x^2) + eps) * w.

Routing margin of a (token, layer) = r_(k) - r_(k+1): gap between the k-th and (k+1)-th
largest router logit (softmax is monotonic, so this is the margin of the top-k decision in
logit units; +inf when k == n_expert).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

import numpy as np

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reference import actquant, dequant  # noqa: E402
from reference.gguf_reader import GGUFReader  # noqa: E402

ARCHS = ("qwen3moe", "llama", "olmoe", "qwen2moe", "gpt-oss", "deepseek2")
NEOX_ARCHS = ("qwen3moe", "olmoe", "qwen2moe", "gpt-oss")
NORM_TOPK_ARCHS = ("qwen3moe", "llama")
TIED_OUTPUT_ARCHS = ("qwen3moe", "llama", "deepseek2")
WEIGHT_SUM_FLOOR = 6.103515625e-5
CACHE_LIMIT_BYTES = 512 << 20   # expert tensors larger than this (as float64) are read per expert


def swa_pattern_of(value):
    """attention.sliding_window_pattern: a per-layer array stays a list of flags
    (even with equal entries), a scalar is a period."""
    return [bool(v) for v in value] if isinstance(value, list) else int(value)


@dataclass
class HParams:
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    n_rot: int
    n_expert: int
    n_expert_used: int
    n_ff_expert: int
    n_ff_shared: int
    n_vocab: int
    n_ctx: int
    rope_base: float
    rms_eps: float
    yarn_factor: float = 0.0     # 0: no YaRN
    yarn_orig_ctx: int = 0
    yarn_mscale_all_dim: float | None = None   # deepseek2: rope.scaling.yarn_log_multiplier / 0.1, None if absent
    rope_attn_factor: float = 1.0   # rope.scaling.attn_factor: cos/sin magnitude factor (deepseek2: also its mscale)
    n_swa: int = 0               # sliding window (gpt-oss), 0: none
    swa_pattern: int | list = 0  # a period (0: every layer slides) or per-layer flags
    # deepseek2
    n_dense_lead: int = 0
    q_lora: int = 0
    kv_lora: int = 0
    qk_mla: int = 0            # nope + rope per query head
    v_mla: int = 0
    joint_kv_b: bool = False   # one attn_kv_b a layer (no key_length_mla: converted before MLA absorption)
    n_shared: int = 0
    sigmoid_gating: bool = False
    weights_norm: bool = False
    weights_scale: float = 0.0
    n_group: int = 0
    n_group_used: int = 0

    def is_swa(self, il: int) -> bool:
        # llama.cpp: an array is one flag per layer; a period n slides layers with
        # il % n < n - 1, and n == 0 slides every layer.
        if self.n_swa <= 0:
            return False
        if isinstance(self.swa_pattern, (list, tuple)):
            return bool(self.swa_pattern[il])
        return self.swa_pattern == 0 or il % self.swa_pattern < self.swa_pattern - 1

    @staticmethod
    def from_reader(r: GGUFReader) -> "HParams":
        md = r.metadata
        arch = md.get("general.architecture")
        if arch not in ARCHS:
            raise ValueError(f"{r.path}: architecture {arch!r} not supported (expected one of {ARCHS})")

        def key(suffix, default=None):
            k = f"{arch}.{suffix}"
            if k not in md:
                if default is None:
                    raise ValueError(f"{r.path}: missing key {k}")
                return default
            v = md[k]
            if isinstance(v, list):   # per-layer arrays: this reference needs them uniform
                if len(set(v)) != 1:
                    raise ValueError(f"{r.path}: per-layer {k} not supported")
                v = v[0]
            return v

        scaling = md.get(f"{arch}.rope.scaling.type")
        if scaling not in (None, "none", "yarn"):
            raise ValueError(f"{r.path}: {arch}.rope.scaling.type={scaling} not supported by the reference")
        yarn_factor = float(md.get(f"{arch}.rope.scaling.factor", 0.0)) if scaling == "yarn" else 0.0
        n_embd = int(key("embedding_length"))
        n_head = int(key("attention.head_count"))
        n_head_kv = int(key("attention.head_count_kv", n_head))
        hdk = int(key("attention.key_length", n_embd // n_head))
        hdv = int(key("attention.value_length", n_embd // n_head))
        n_expert = int(key("expert_count"))
        n_used = int(key("expert_used_count"))
        if arch in ("qwen3moe", "qwen2moe", "gpt-oss"):
            ff = md.get(f"{arch}.expert_feed_forward_length")
            if ff is None:
                ff = int(key("feed_forward_length")) // n_used
        else:
            ff = key("feed_forward_length")
        n_ff_shared = 0
        if arch == "qwen2moe":
            n_ff_shared = int(md.get(f"{arch}.expert_shared_feed_forward_length", md.get(f"{arch}.feed_forward_length", 0)))
        emb = r.tensors["token_embd.weight"]
        n_rot = int(key("rope.dimension_count", hdk))
        ds = {}
        if arch == "deepseek2":
            ff = key("expert_feed_forward_length")
            kv_lora = int(key("attention.kv_lora_rank"))
            joint = f"{arch}.attention.key_length_mla" not in md
            if joint:   # the keys describe one K/V head per query head; the latent cache is the same
                qk_mla, v_mla, n_head_kv, hdk, hdv = hdk, hdv, 1, kv_lora + n_rot, kv_lora
            else:
                qk_mla, v_mla = int(key("attention.key_length_mla")), int(key("attention.value_length_mla"))
            ds = dict(n_dense_lead=int(key("leading_dense_block_count", 0)),
                      q_lora=int(key("attention.q_lora_rank", 0)), kv_lora=kv_lora,
                      qk_mla=qk_mla, v_mla=v_mla, joint_kv_b=joint,
                      n_shared=int(key("expert_shared_count", 0)),
                      sigmoid_gating=int(key("expert_gating_func", 1)) == 2,
                      weights_norm=bool(key("expert_weights_norm", False)),
                      weights_scale=float(key("expert_weights_scale", 0.0)),
                      n_group=int(key("expert_group_count", 0)), n_group_used=int(key("expert_group_used_count", 0)))
            log_mul = md.get(f"{arch}.rope.scaling.yarn_log_multiplier")
            if log_mul is not None:
                ds["yarn_mscale_all_dim"] = float(log_mul) / 0.1
        return HParams(**ds, arch=arch, n_layer=int(key("block_count")), n_embd=n_embd, n_head=n_head,
                       n_head_kv=n_head_kv, head_dim_k=hdk, head_dim_v=hdv,
                       n_rot=n_rot, n_expert=n_expert, n_expert_used=n_used,
                       n_ff_expert=int(ff), n_ff_shared=n_ff_shared, n_vocab=int(emb.ne[1]),
                       n_ctx=int(key("context_length")), rope_base=float(key("rope.freq_base", 10000.0)),
                       rms_eps=float(key("attention.layer_norm_rms_epsilon")),
                       yarn_factor=yarn_factor if yarn_factor > 0.0 else 0.0,   # 0: none, as the engine
                       yarn_orig_ctx=int(key("rope.scaling.original_context_length", key("context_length"))),
                       rope_attn_factor=float(md.get(f"{arch}.rope.scaling.attn_factor", 1.0)),
                       n_swa=int(key("attention.sliding_window")) if arch == "gpt-oss" else 0,
                       swa_pattern=swa_pattern_of(md.get(f"{arch}.attention.sliding_window_pattern", 2))
                       if arch == "gpt-oss" else 0)


@dataclass
class State:
    """KV cache: per layer K [T, n_kv, head_dim_k] (after RoPE) and V [T, n_kv, head_dim_v]."""
    k: list
    v: list
    n_past: int = 0


@dataclass
class RunResult:
    logits: np.ndarray          # [n_tokens, n_vocab] float64
    experts: np.ndarray         # [n_tokens, n_layer, k] int, slot order (descending score)
    weights: np.ndarray         # [n_tokens, n_layer, k] float64, routing weights used
    margins: np.ndarray         # [n_tokens, n_layer] float64, r_(k) - r_(k+1) in router-logit units
    router_logits: np.ndarray   # [n_tokens, n_layer, n_expert]
    hidden: list = field(default_factory=list)  # optional per-layer outputs


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * w


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def swiglu_oai(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """gpt-oss's clamped SwiGLU: x sigmoid(1.702 x) (y + 1), x = min(g, 7), y = clamp(u, -7, 7)."""
    x = np.minimum(g, 7.0)
    y = np.clip(u, -7.0, 7.0)
    return x / (1.0 + np.exp(-1.702 * x)) * (y + 1.0)


def softmax(v: np.ndarray, axis=-1) -> np.ndarray:
    e = np.exp(v - np.max(v, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def yarn_ramp(n_rot: int, base: float, orig_ctx: int) -> np.ndarray:
    """Per pair i: 1 keeps the original angle, 0 takes the interpolated one (llama.cpp's
    correction dims for beta_fast 32 and beta_slow 1, floored / ceiled)."""
    def corr(beta):
        return n_rot * np.log(orig_ctx / (beta * 2 * np.pi)) / (2 * np.log(base))
    low, high = max(0.0, np.floor(corr(32.0))), min(n_rot - 1.0, np.ceil(corr(1.0)))
    i = np.arange(n_rot // 2, dtype=np.float64)
    return 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)


def rope(x: np.ndarray, positions: np.ndarray, n_rot: int, base: float, neox: bool,
         freq_factors: np.ndarray | None = None, yarn_factor: float = 0.0, yarn_orig_ctx: int = 0,
         yarn_unit_magnitude: bool = False, attn_factor: float = 1.0) -> np.ndarray:
    """x [n_tokens, n_heads, head_dim]; rotates the first n_rot dims of every head. YaRN scales
    cos/sin by 1 + 0.1 ln(factor) unless yarn_unit_magnitude (deepseek2 with a yarn_log_multiplier:
    llama.cpp's attn_factor cancels it); attn_factor (rope.scaling.attn_factor) scales them
    whatever the scaling."""
    half = n_rot // 2
    inv_freq = base ** (-2.0 * np.arange(half, dtype=np.float64) / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors
    theta = positions.astype(np.float64)[:, None] * inv_freq[None, :]        # [n, half]
    mscale = 1.0
    if yarn_factor:
        ramp = yarn_ramp(n_rot, base, yarn_orig_ctx)
        theta = theta / yarn_factor * (1.0 - ramp) + theta * ramp
        mscale = 1.0 if yarn_unit_magnitude or yarn_factor <= 1.0 else 1.0 + 0.1 * np.log(yarn_factor)   # llama.cpp's get_mscale
    mscale *= attn_factor
    cos, sin = np.cos(theta)[:, None, :] * mscale, np.sin(theta)[:, None, :] * mscale
    out = x.copy()
    if neox:
        x0, x1 = x[..., :half], x[..., half:n_rot]
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:n_rot] = x0 * sin + x1 * cos
    else:
        x0, x1 = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = x0 * cos - x1 * sin
        out[..., 1:n_rot:2] = x0 * sin + x1 * cos
    return out


class Reference:
    """act_quant: round every matmul's input the way a llama.cpp-style CPU engine does
    (reference/actquant.py) and kv_f16: store K/V rounded to f16. Both off: the exact model."""

    def __init__(self, model_path, act_quant: bool = False, kv_f16: bool = False):
        self.path = str(model_path)
        self.reader = GGUFReader(self.path)
        self.hp = HParams.from_reader(self.reader)
        self.act_quant = act_quant
        self.kv_f16 = kv_f16
        self._cache: dict = {}
        self._check_shapes()

    # ---- weights ------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.reader.tensors

    def w(self, name: str) -> np.ndarray:
        """Dequantised tensor as float64, numpy shape = reversed ne."""
        if name not in self._cache:
            if name not in self.reader.tensors:
                raise KeyError(f"{self.path}: tensor {name} missing")
            self._cache[name] = self.reader.tensor(name).astype(np.float64)
        return self._cache[name]

    def expert(self, name: str, e: int) -> np.ndarray:
        """Expert e of a 3-D expert tensor: [ne1, ne0] float64."""
        info = self.reader.tensors[name]
        if info.n_elements * 8 <= CACHE_LIMIT_BYTES:
            return self.w(name)[e]
        ne0, ne1 = info.ne[0], info.ne[1]
        per = dequant.nbytes(info.type, ne0 * ne1)
        raw = np.asarray(self.reader.raw(name)[e * per:(e + 1) * per])
        return dequant.dequantize(raw, info.type, ne0 * ne1).reshape(ne1, ne0).astype(np.float64)

    def _check_shapes(self):
        hp, t = self.hp, self.reader.tensors

        def expect(name, ne):
            if name not in t:
                raise ValueError(f"{self.path}: tensor {name} missing")
            if tuple(t[name].ne) != tuple(ne):
                raise ValueError(f"{self.path}: {name} has ne {t[name].ne}, expected {tuple(ne)}")

        nq, nk, nv = hp.n_head * hp.head_dim_k, hp.n_head_kv * hp.head_dim_k, hp.n_head_kv * hp.head_dim_v
        expect("token_embd.weight", (hp.n_embd, hp.n_vocab))
        for il in range(hp.n_layer if hp.arch != "deepseek2" else 0):
            p = f"blk.{il}."
            expect(p + "attn_q.weight", (hp.n_embd, nq))
            expect(p + "attn_k.weight", (hp.n_embd, nk))
            expect(p + "attn_v.weight", (hp.n_embd, nv))
            expect(p + "attn_output.weight", (hp.n_head * hp.head_dim_v, hp.n_embd))
            expect(p + "ffn_gate_inp.weight", (hp.n_embd, hp.n_expert))
            if hp.arch == "gpt-oss":
                for b, n in (("q", nq), ("k", nk), ("v", nv), ("output", hp.n_embd)):
                    expect(p + f"attn_{b}.bias", (n,))
                expect(p + "attn_sinks.weight", (hp.n_head,))
                expect(p + "post_attention_norm.weight", (hp.n_embd,))
                expect(p + "ffn_gate_inp.bias", (hp.n_expert,))
                for g, n in (("gate", hp.n_ff_expert), ("up", hp.n_ff_expert), ("down", hp.n_embd)):
                    expect(p + f"ffn_{g}_exps.bias", (n, hp.n_expert))
            for g in ("gate", "up"):
                expect(p + f"ffn_{g}_exps.weight", (hp.n_embd, hp.n_ff_expert, hp.n_expert))
            expect(p + "ffn_down_exps.weight", (hp.n_ff_expert, hp.n_embd, hp.n_expert))
            if hp.arch == "qwen3moe":
                expect(p + "attn_q_norm.weight", (hp.head_dim_k,))
                expect(p + "attn_k_norm.weight", (hp.head_dim_k,))
            if hp.arch == "olmoe":
                expect(p + "attn_q_norm.weight", (nq,))
                expect(p + "attn_k_norm.weight", (nk,))
            if hp.arch == "qwen2moe":
                for b, n in (("q", nq), ("k", nk), ("v", nv)):
                    expect(p + f"attn_{b}.bias", (n,))
                expect(p + "ffn_gate_inp_shexp.weight", (hp.n_embd,))
                expect(p + "ffn_gate_shexp.weight", (hp.n_embd, hp.n_ff_shared))
                expect(p + "ffn_up_shexp.weight", (hp.n_embd, hp.n_ff_shared))
                expect(p + "ffn_down_shexp.weight", (hp.n_ff_shared, hp.n_embd))
        if hp.arch == "deepseek2":
            nope = hp.qk_mla - hp.n_rot
            for il in range(hp.n_layer):
                p = f"blk.{il}."
                expect(p + "attn_kv_a_mqa.weight", (hp.n_embd, hp.kv_lora + hp.n_rot))
                if hp.joint_kv_b:
                    expect(p + "attn_kv_b.weight", (hp.kv_lora, hp.n_head * (nope + hp.v_mla)))
                else:
                    expect(p + "attn_k_b.weight", (nope, hp.kv_lora, hp.n_head))
                    expect(p + "attn_v_b.weight", (hp.kv_lora, hp.v_mla, hp.n_head))
                expect(p + "attn_output.weight", (hp.n_head * hp.v_mla, hp.n_embd))
        if "output.weight" in t:
            expect("output.weight", (hp.n_embd, hp.n_vocab))
        elif hp.arch not in TIED_OUTPUT_ARCHS:
            raise ValueError(f"{self.path}: {hp.arch} requires output.weight")

    # ---- forward ------------------------------------------------------------------------------
    def new_state(self) -> State:
        hp = self.hp
        return State(k=[np.zeros((0, hp.n_head_kv, hp.head_dim_k)) for _ in range(hp.n_layer)],
                     v=[np.zeros((0, hp.n_head_kv, hp.head_dim_v)) for _ in range(hp.n_layer)])

    def _act(self, x, weight_name):
        """The matmul input as the engine sees it for this weight (identity unless act_quant)."""
        return self._act_for(x, self.reader.tensors[weight_name].type)

    def _act_for(self, x, weight_type):
        return actquant.activation_values(x, weight_type) if self.act_quant else x

    def _joint_kv_b_maps(self, il):
        """deepseek2 layer il with one attn_kv_b ([kv_lora, H * (nope + v)]: per head nope key rows,
        then v value rows): per head h the absorption map [kv_lora, nope] (the key rows transposed)
        and the decompression map [v, kv_lora] (the value rows), with the weight types the engine
        computes them in (the key part F32 unless attn_kv_b is a float type)."""
        hp, name = self.hp, f"blk.{il}.attn_kv_b.weight"
        kv_b_type = self.reader.tensors[name].type
        if self.act_quant and kv_b_type in (dequant.Q4_1, dequant.Q5_1):
            raise NotImplementedError("activation rounding for a Q4_1 / Q5_1 attn_kv_b is not emulated")
        nope = hp.qk_mla - hp.n_rot
        w = self.w(name).reshape(hp.n_head, nope + hp.v_mla, hp.kv_lora)
        k_type = kv_b_type if dequant.TYPES[kv_b_type][1] == 1 else dequant.F32
        return [w[h, :nope].T for h in range(hp.n_head)], k_type, [w[h, nope:] for h in range(hp.n_head)], kv_b_type

    def _block_mins(self, name, e=None):
        """Per-block min m [rows, K/32] of a Q4_1/Q5_1 weight (expert e of a 3-D tensor)."""
        key = (name, e, "mins")
        if key not in self._cache:
            info = self.reader.tensors[name]
            raw = np.asarray(self.reader.raw(name))
            if e is not None:
                per = dequant.nbytes(info.type, info.ne[0] * info.ne[1])
                raw = raw[e * per:(e + 1) * per]
            bb = dequant.TYPES[info.type][2]
            self._cache[key] = np.ascontiguousarray(raw.reshape(-1, bb)[:, 2:4]).view("<f2").astype(
                np.float64).reshape(info.ne[1], info.ne[0] // 32)
        return self._cache[key]

    def _matmul(self, x, name, e=None):
        """x @ W^T for weight `name` (expert e), with the engine's activation rounding if act_quant."""
        wt = self.w(name) if e is None else self.expert(name, e)
        y = self._act(x, name) @ wt.T
        if self.act_quant and self.reader.tensors[name].type in (dequant.Q4_1, dequant.Q5_1):
            y = y + actquant.q8_1_sum_correction(x) @ self._block_mins(name, e).T
        return y

    def _linear(self, name, x, bias=None):
        y = self._matmul(x, name)
        if bias is not None and self.has(bias):
            y = y + self.w(bias)
        return y

    def _attention(self, il, x, state, positions):
        hp = self.hp
        p = f"blk.{il}."
        n = x.shape[0]
        a = rms_norm(x, self.w(p + "attn_norm.weight"), hp.rms_eps)
        q = self._linear(p + "attn_q.weight", a, p + "attn_q.bias")
        k = self._linear(p + "attn_k.weight", a, p + "attn_k.bias")
        v = self._linear(p + "attn_v.weight", a, p + "attn_v.bias")
        if hp.arch == "olmoe":
            q = rms_norm(q, self.w(p + "attn_q_norm.weight"), hp.rms_eps)
            k = rms_norm(k, self.w(p + "attn_k_norm.weight"), hp.rms_eps)
        q = q.reshape(n, hp.n_head, hp.head_dim_k)
        k = k.reshape(n, hp.n_head_kv, hp.head_dim_k)
        v = v.reshape(n, hp.n_head_kv, hp.head_dim_v)
        if hp.arch == "qwen3moe":
            q = rms_norm(q, self.w(p + "attn_q_norm.weight"), hp.rms_eps)
            k = rms_norm(k, self.w(p + "attn_k_norm.weight"), hp.rms_eps)
        ff = self.w("rope_freqs.weight") if self.has("rope_freqs.weight") else None
        neox = hp.arch in NEOX_ARCHS
        q = rope(q, positions, hp.n_rot, hp.rope_base, neox, ff, hp.yarn_factor, hp.yarn_orig_ctx,
                 attn_factor=hp.rope_attn_factor)
        k = rope(k, positions, hp.n_rot, hp.rope_base, neox, ff, hp.yarn_factor, hp.yarn_orig_ctx,
                 attn_factor=hp.rope_attn_factor)
        if self.kv_f16:
            k, v = actquant.f16_round(k), actquant.f16_round(v)
        state.k[il] = np.concatenate([state.k[il], k], axis=0)
        state.v[il] = np.concatenate([state.v[il], v], axis=0)
        K, V = state.k[il], state.v[il]                          # [T, n_kv, hd]
        group = hp.n_head // hp.n_head_kv
        kv_of_head = np.arange(hp.n_head) // group
        Kh, Vh = K[:, kv_of_head, :], V[:, kv_of_head, :]         # [T, n_head, hd]
        scores = np.einsum("qhd,khd->hqk", q, Kh) / np.sqrt(hp.head_dim_k)
        key_pos = np.arange(K.shape[0])
        masked = key_pos[None, None, :] > positions[None, :, None]
        if hp.is_swa(il):
            masked = masked | (positions[None, :, None] - key_pos[None, None, :] >= hp.n_swa)
        scores = np.where(masked, -np.inf, scores)
        if self.has(p + "attn_sinks.weight"):   # one more logit per head, without a value
            sinks = np.broadcast_to(self.w(p + "attn_sinks.weight")[:, None, None], scores.shape[:2] + (1,))
            probs = softmax(np.concatenate([scores, sinks], axis=-1), axis=-1)[..., :-1]
        else:
            probs = softmax(scores, axis=-1)
        o = np.einsum("hqk,khd->qhd", probs, Vh).reshape(n, hp.n_head * hp.head_dim_v)
        return self._linear(p + "attn_output.weight", o, p + "attn_output.bias")

    def _latent_attention(self, il, x, state, positions):
        """deepseek2: absorbed MLA; the state keeps one row (latent | rotated k_pe) per token."""
        hp = self.hp
        p = f"blk.{il}."
        n, nope, H = x.shape[0], hp.qk_mla - hp.n_rot, hp.n_head
        a = rms_norm(x, self.w(p + "attn_norm.weight"), hp.rms_eps)
        if hp.q_lora:
            qa = rms_norm(self._linear(p + "attn_q_a.weight", a), self.w(p + "attn_q_a_norm.weight"), hp.rms_eps)
            q = self._linear(p + "attn_q_b.weight", qa)
        else:
            q = self._linear(p + "attn_q.weight", a)
        q = q.reshape(n, H, hp.qk_mla)
        c = self._linear(p + "attn_kv_a_mqa.weight", a)
        kv = rms_norm(c[:, :hp.kv_lora], self.w(p + "attn_kv_a_norm.weight"), hp.rms_eps)
        yarn = dict(yarn_factor=hp.yarn_factor, yarn_orig_ctx=hp.yarn_orig_ctx,
                    yarn_unit_magnitude=hp.yarn_mscale_all_dim is not None, attn_factor=hp.rope_attn_factor)
        k_pe = rope(c[:, None, hp.kv_lora:], positions, hp.n_rot, hp.rope_base, False, **yarn)[:, 0, :]
        q_pe = rope(q[:, :, nope:], positions, hp.n_rot, hp.rope_base, False, **yarn)
        if hp.joint_kv_b:
            k_maps, k_type, v_maps, v_type = self._joint_kv_b_maps(il)
            def absorb(x, h): return self._act_for(x, k_type) @ k_maps[h].T
            def decompress(x, h): return self._act_for(x, v_type) @ v_maps[h].T
        else:
            def absorb(x, h): return self._matmul(x, p + "attn_k_b.weight", h)
            def decompress(x, h): return self._matmul(x, p + "attn_v_b.weight", h)
        q_abs = np.stack([absorb(q[:, h, :nope], h) for h in range(H)], axis=1)
        Q = np.concatenate([q_abs, q_pe], axis=-1)                      # [n, H, kv_lora + rope]
        row = np.concatenate([kv, k_pe], axis=-1)[:, None, :]          # [n, 1, kv_lora + rope]
        if self.kv_f16:
            row = actquant.f16_round(row)
        state.k[il] = np.concatenate([state.k[il], row], axis=0)
        K = state.k[il][:, 0, :]                                         # [T, kv_lora + rope]
        mscale = hp.rope_attn_factor   # llama.cpp deepseek2.cpp: attn_factor times YaRN's attention scale
        if hp.yarn_factor:
            mscale *= 1.0 + 0.1 * (hp.yarn_mscale_all_dim or 0.0) * np.log(hp.yarn_factor)
        scores = np.einsum("qhd,kd->hqk", Q, K) * (mscale * mscale / np.sqrt(hp.qk_mla))
        key_pos = np.arange(K.shape[0])
        scores = np.where(key_pos[None, None, :] > positions[None, :, None], -np.inf, scores)
        lat = np.einsum("hqk,kd->qhd", softmax(scores, axis=-1), K[:, :hp.kv_lora])   # [n, H, kv_lora]
        o = np.stack([decompress(lat[:, h, :], h) for h in range(H)], axis=1)
        return self._linear(p + "attn_output.weight", o.reshape(n, H * hp.v_mla))

    def _swiglu(self, m, gate, up, down):
        return self._linear(down, silu(self._linear(gate, m)) * self._linear(up, m))

    def _select(self, r, bias):
        """(probabilities, top-k experts, margins) of router logits r [n, n_expert]."""
        hp = self.hp
        probs = 1.0 / (1.0 + np.exp(-r)) if hp.sigmoid_gating else softmax(r, axis=-1)
        if hp.arch != "deepseek2":   # by logit (softmax is monotonic)
            order = np.argsort(-probs, axis=-1, kind="stable")
            rs = np.take_along_axis(r, order, axis=-1)
            margin = (rs[:, hp.n_expert_used - 1] - rs[:, hp.n_expert_used]) \
                if hp.n_expert_used < hp.n_expert else np.full(r.shape[0], np.inf)
            return probs, order[:, :hp.n_expert_used], margin
        sel = probs + bias if bias is not None else probs.copy()
        margin = np.full(r.shape[0], np.inf)
        if hp.n_group > 1:
            g = np.sort(sel.reshape(r.shape[0], hp.n_group, -1), axis=-1)
            score = g[:, :, -1] + (g[:, :, -2] if g.shape[-1] > 1 else 0.0)
            gorder = np.argsort(-score, axis=-1, kind="stable")
            gs = np.take_along_axis(score, gorder, axis=-1)
            if hp.n_group_used < hp.n_group:
                margin = gs[:, hp.n_group_used - 1] - gs[:, hp.n_group_used]
            drop = np.ones_like(score, dtype=bool)
            np.put_along_axis(drop, gorder[:, :hp.n_group_used], False, axis=-1)
            sel = np.where(np.repeat(drop, hp.n_expert // hp.n_group, axis=-1), -np.inf, sel)
        order = np.argsort(-sel, axis=-1, kind="stable")
        ss = np.take_along_axis(sel, order, axis=-1)
        if hp.n_expert_used < hp.n_expert:
            with np.errstate(invalid="ignore"):
                m = ss[:, hp.n_expert_used - 1] - ss[:, hp.n_expert_used]
            margin = np.minimum(margin, np.where(np.isnan(m), np.inf, m))
        return probs, order[:, :hp.n_expert_used], margin

    def _moe(self, il, m, routing):
        hp = self.hp
        p = f"blk.{il}."
        n = m.shape[0]
        r = self._act(m, p + "ffn_gate_inp.weight") @ self.w(p + "ffn_gate_inp.weight").T   # [n, n_expert]
        if self.has(p + "ffn_gate_inp.bias"):
            r = r + self.w(p + "ffn_gate_inp.bias")
        if hp.arch == "gpt-oss":       # top-k of the logits, softmax over the selected
            order = np.argsort(-r, axis=-1, kind="stable")
            top = order[:, :hp.n_expert_used]
            w = softmax(np.take_along_axis(r, top, axis=-1), axis=-1)
            rs = np.take_along_axis(r, order, axis=-1)
            margin = (rs[:, hp.n_expert_used - 1] - rs[:, hp.n_expert_used]) if hp.n_expert_used < hp.n_expert \
                else np.full(n, np.inf)
        else:
            bias = self.w(p + "exp_probs_b.bias") if self.has(p + "exp_probs_b.bias") else None
            probs, top, margin = self._select(r, bias)
            w = np.take_along_axis(probs, top, axis=-1)
        if hp.arch in NORM_TOPK_ARCHS or hp.weights_norm:
            w = w / np.maximum(w.sum(axis=-1, keepdims=True), WEIGHT_SUM_FLOOR)
        if hp.weights_scale not in (0.0, 1.0):
            w = w * hp.weights_scale
        routing.append((top, w, margin, r))
        out = np.zeros_like(m)
        for e in np.unique(top):
            rows, slots = np.nonzero(top == e)
            xe = m[rows]
            g = self._matmul(xe, p + "ffn_gate_exps.weight", e)
            u = self._matmul(xe, p + "ffn_up_exps.weight", e)
            if hp.arch == "gpt-oss":
                g = g + self.w(p + "ffn_gate_exps.bias")[e]
                u = u + self.w(p + "ffn_up_exps.bias")[e]
                y = self._matmul(swiglu_oai(g, u), p + "ffn_down_exps.weight", e) + self.w(p + "ffn_down_exps.bias")[e]
            else:
                y = self._matmul(silu(g) * u, p + "ffn_down_exps.weight", e)
            out[rows] += y * w[rows, slots][:, None]   # a token selects an expert at most once
        if hp.arch == "qwen2moe":
            gate = self._act(m, p + "ffn_gate_inp_shexp.weight") @ self.w(p + "ffn_gate_inp_shexp.weight")  # [n]
            hs = silu(self._linear(p + "ffn_gate_shexp.weight", m)) * self._linear(p + "ffn_up_shexp.weight", m)
            sh = self._linear(p + "ffn_down_shexp.weight", hs)
            out = out + sh * (1.0 / (1.0 + np.exp(-gate)))[:, None]
        if hp.arch == "deepseek2" and hp.n_shared:
            out = out + self._swiglu(m, p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight",
                                     p + "ffn_down_shexp.weight")
        return out

    def eval(self, state: State, tokens, keep_hidden: bool = False) -> RunResult:
        """Appends tokens to the state; returns logits of every new position and their routing."""
        hp = self.hp
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if tokens.size == 0:
            raise ValueError("no tokens")
        if tokens.min() < 0 or tokens.max() >= hp.n_vocab:
            raise ValueError(f"token id out of range [0, {hp.n_vocab})")
        positions = np.arange(state.n_past, state.n_past + tokens.size)
        x = self.w("token_embd.weight")[tokens]
        routing, hidden = [], []
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            if hp.arch == "deepseek2":
                x = x + self._latent_attention(il, x, state, positions)
            else:
                x = x + self._attention(il, x, state, positions)
            norm = "post_attention_norm" if hp.arch == "gpt-oss" else "ffn_norm"
            m = rms_norm(x, self.w(p + norm + ".weight"), hp.rms_eps)
            if il < hp.n_dense_lead:
                x = x + self._swiglu(m, p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight")
                k = hp.n_expert_used
                routing.append((np.full((len(tokens), k), -1), np.zeros((len(tokens), k)),
                                np.full(len(tokens), np.inf), np.zeros((len(tokens), hp.n_expert))))
            else:
                x = x + self._moe(il, m, routing)
            if keep_hidden:
                hidden.append(x.copy())
        state.n_past += tokens.size
        h = rms_norm(x, self.w("output_norm.weight"), hp.rms_eps)
        out_name = "output.weight" if self.has("output.weight") else "token_embd.weight"
        logits = self._matmul(h, out_name)
        return RunResult(logits=logits,
                         experts=np.stack([t for t, _, _, _ in routing], axis=1),
                         weights=np.stack([w for _, w, _, _ in routing], axis=1),
                         margins=np.stack([mg for _, _, mg, _ in routing], axis=1),
                         router_logits=np.stack([r for _, _, _, r in routing], axis=1),
                         hidden=hidden)

    def run(self, tokens, keep_hidden: bool = False) -> RunResult:
        return self.eval(self.new_state(), tokens, keep_hidden=keep_hidden)

    def logits(self, tokens) -> np.ndarray:
        return self.run(tokens).logits


def _parse_tokens(s: str):
    return [int(t) for t in s.replace(" ", "").split(",") if t]


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference logits of a GGUF MoE model")
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help=".npy file for logits [n_tokens, n_vocab] (float64)")
    ap.add_argument("--last", action="store_true", help="write only the last position's logits")
    ap.add_argument("--routing", help=".npz file for experts/weights/margins/router_logits")
    a = ap.parse_args(argv)
    ref = Reference(a.model)
    res = ref.run(_parse_tokens(a.tokens))
    np.save(a.out, res.logits[-1] if a.last else res.logits)
    if a.routing:
        np.savez(a.routing, experts=res.experts, weights=res.weights, margins=res.margins,
                 router_logits=res.router_logits)
    mm = res.margins[np.isfinite(res.margins)]
    print(f"min routing margin {mm.min() if mm.size else float('inf'):.4g}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
