"""Random-weight GGUF MoE models for tests (qwen3moe, llama/Mixtral, olmoe, qwen2moe, gpt-oss,
deepseek2).

    python3 -m tools.make_model --arch qwen3moe --out m.gguf --n-embd 128 --n-layer 2 \
        --n-expert 8 --n-expert-used 2 --quant-mix q4_k_m --seed 1

or from Python:

    from tools.make_model import ModelSpec, make_model
    make_model("m.gguf", ModelSpec(arch="olmoe", n_embd=128, quant_mix="mixed"))

Tensors are generated, quantised and written one at a time (3-D expert tensors one
expert at a time), so files of gigabytes can be produced without holding them in
memory. Everything is a deterministic function of the spec (seed included).

Weights: linear layers ~ N(0, 1/fan_in) (std 1/sqrt(fan_in)), norms ~ 1 + 0.1 N(0,1), so
activations stay O(1) through many layers. Two choices keep the models insensitive to the
activation rounding of a quantising engine (Q8_0/Q8_K blocks scaled by their largest value),
so that engine and float64 reference agree to well under 1e-2 of the logit range:
  * token embeddings are random signs (+-1): the residual stream then has a crest factor
    (block max / rms) near 1.7 instead of ~3 for Gaussian values, and the rounding step of
    a block is proportional to its max;
  * the layers that write the residual stream (attn_output, ffn_down_exps, ffn_down_shexp)
    have std RESIDUAL_SCALE/sqrt(fan_in): each branch adds about a quarter of the
    embedding's magnitude, so the rounding noise of a branch (relative to the branch, ~1%
    for the heavy-tailed SwiGLU product) is a quarter as large relative to the stream.
    A wrong branch still moves the logits by ~10% of their range.

gpt-oss: experts are MXFP4 whatever the quant mix (as its released files have them), with F32
bias tables; Q/K/V/output biases, per-head attention sinks, post_attention_norm as the FFN
pre-norm, a router bias (distinct per expert, below half the coded router spacing, so the
routing margins stay at least half of it), a sliding window of n_swa positions on even
layers (small by default so that short tests cross it) and YaRN RoPE.

Routing ("router_mode"):
  coded  (default) the last 32 embedding channels carry a per-token code (one channel
         set to CODE_VALUE, chosen by token id % 32). No layer writes those channels
         (their rows of attn_output / ffn_down are zero), so the residual keeps the code
         exactly, and the router reads only them: each (token class, layer) gets a
         permutation of evenly spaced router logits (spacing ~ router_scale). Top-k
         choices therefore have margins of order router_scale that numeric noise from
         activation quantisation cannot flip. router_context adds a small random,
         context-dependent part on the other channels.
  random the router is router_scale * N(0,1)/sqrt(n_embd) over all channels
         (router logits ~ N(0, router_scale^2)), near-ties possible.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np

if __package__ in (None, ""):  # run as a script: make `tools` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.gguf_writer import BLOCK_GEOMETRY, GGUFWriter, GgmlType, ValueType
from tools.quants import quantize

ARCHS = ("qwen3moe", "llama", "olmoe", "qwen2moe", "gpt-oss", "deepseek2")
CODE_CHANNELS = 32        # width of the routing-code subspace (one 32-element quant block)
CODE_VALUE = 1.0          # as large as the other embedding channels: the code does not set a block's scale
RESIDUAL_SCALE = 0.25     # std factor of the matrices that write the residual stream
RESIDUAL_KINDS = ("attn_output", "ffn_down_exps", "ffn_down_shexp", "ffn_down")
RESIDUAL_BIASES = ("attn_output_bias", "ffn_down_exps_bias")   # biases of those, zero on the code
OUTPUT_SCALE = 2.0        # logits ~ N(0, OUTPUT_SCALE^2): a clearer top-1 than N(0,1)
POOL_ELEMENTS = 1 << 22   # expert tensors bigger than this reuse rows of a random pool
BIG_TENSOR_ELEMENTS = 1 << 24

T = GgmlType
MIX_FTYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9,
             "q2_k": 10, "q3_k_m": 12, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18, "iq4_xs": 30, "bf16": 32,
             "mixed": 1024}
QUANT_MIXES = tuple(MIX_FTYPE)
MIXED_CYCLE = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K]
# what llama-quantize substitutes when ne0 is not a multiple of the block size
FALLBACK = {T.Q4_K: T.Q5_0, T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0,
            T.Q2_K: T.IQ4_NL, T.Q3_K: T.IQ4_NL, T.IQ4_XS: T.IQ4_NL, T.IQ4_NL: T.F16, T.MXFP4: T.F16,
            T.Q4_0: T.F16, T.Q4_1: T.F16, T.Q5_0: T.F16, T.Q5_1: T.F16, T.Q8_0: T.F16}
DEFAULT_EPS = {"qwen3moe": 1e-6, "qwen2moe": 1e-6, "llama": 1e-5, "olmoe": 1e-5, "gpt-oss": 1e-5,
               "deepseek2": 1e-6}
TIED_OUTPUT_ALLOWED = ("qwen3moe", "llama", "deepseek2")


@dataclass
class ModelSpec:
    arch: str = "qwen3moe"
    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int | None = None      # default n_head
    head_dim: int | None = None       # default n_embd // n_head
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_expert: int = 64
    n_ff_shared: int | None = None    # qwen2moe only; default 2 * n_ff_expert
    n_vocab: int = 512
    n_ctx: int = 512
    rope_theta: float = 10000.0
    rms_eps: float | None = None      # default per arch
    quant_mix: str = "f32"
    seed: int = 0
    tokenizer: str = "none"           # none | synthetic | copy:PATH.gguf
    tokenizer_padding: int = 0        # output rows past the tokenizer's list (a vocabulary padded to a round size)
    omit_tensors: tuple = ()          # names of tensors to leave out of the file (tests of incomplete files)
    router_mode: str = "coded"        # coded | random
    router_scale: float = 1.0
    router_context: float = 0.0
    tie_output: bool = False          # omit output.weight (qwen3moe / llama only)
    qkv_bias: bool | None = None      # default: True for qwen2moe and gpt-oss; llama may opt in
    n_swa: int = 8                    # gpt-oss: sliding window of the even layers
    swa_pattern: int | list | None = None  # gpt-oss: sliding_window_pattern (period or per-layer flags), None: absent
    yarn_factor: float = 32.0         # gpt-oss, deepseek2 (0: none): YaRN rope.scaling.factor
    yarn_orig_ctx: int = 4096         # gpt-oss, deepseek2: rope.scaling.original_context_length
    yarn_mscale_all_dim: float = 0.707  # deepseek2 (V2-Lite's): written as yarn_log_multiplier = 0.1 * it
    rope_attn_factor: float | None = None  # rope.scaling.attn_factor (any arch), None: absent
    alignment: int = 32
    write_alignment_key: bool = False
    name: str | None = None
    # deepseek2 only: latent attention (MLA) sizes, leading dense layers, routing variant
    q_lora_rank: int = 64             # 0: one attn_q projection (V2-Lite)
    kv_lora_rank: int = 64
    mla_nope: int = 32                # qk_nope_head_dim
    mla_rope: int = 16                # qk_rope_head_dim (rope.dimension_count)
    mla_v: int = 32                   # v_head_dim
    joint_kv_b: bool = False          # one attn_kv_b a layer, no key_length_mla (files converted before MLA absorption)
    n_dense_lead: int = 1
    n_ff_dense: int | None = None     # default 2 * n_ff_expert
    n_expert_shared: int = 1
    gating: str = "sigmoid"           # softmax | sigmoid
    selection_bias: bool = True       # exp_probs_b (sigmoid gating)
    n_group: int | None = None        # default 2 when the experts split evenly, else 0
    n_group_used: int = 1
    weights_norm: bool = True
    weights_scale: float = 2.5

    def resolved(self) -> "ModelSpec":
        s = dataclasses.replace(self)
        if s.arch not in ARCHS:
            raise ValueError(f"unknown arch {s.arch!r} (expected one of {ARCHS})")
        if s.quant_mix not in MIX_FTYPE:
            raise ValueError(f"unknown quant mix {s.quant_mix!r} (expected one of {QUANT_MIXES})")
        if s.arch == "deepseek2":   # one latent KV head of kv_lora + rope values
            s.n_head_kv = 1
            s.head_dim = s.kv_lora_rank + s.mla_rope
            if s.n_ff_dense is None:
                s.n_ff_dense = 2 * s.n_ff_expert
            if s.n_group is None:
                s.n_group = 2 if s.n_expert % 2 == 0 and s.n_expert_used <= s.n_expert // 2 else 0
            if not 0 <= s.n_dense_lead <= s.n_layer or s.gating not in ("softmax", "sigmoid"):
                raise ValueError("deepseek2: bad n_dense_lead or gating")
        if s.n_head_kv is None:
            s.n_head_kv = s.n_head
        if s.head_dim is None:
            if s.n_embd % s.n_head:
                raise ValueError("n_embd must be a multiple of n_head unless head_dim is given")
            s.head_dim = s.n_embd // s.n_head
        if s.n_head % s.n_head_kv:
            raise ValueError("n_head must be a multiple of n_head_kv")
        if s.head_dim % 2:
            raise ValueError("head_dim must be even (RoPE)")
        if not 1 <= s.n_expert_used <= s.n_expert:
            raise ValueError("need 1 <= n_expert_used <= n_expert")
        if s.arch == "qwen2moe" and s.n_ff_shared is None:
            s.n_ff_shared = 2 * s.n_ff_expert
        if s.arch != "qwen2moe":
            s.n_ff_shared = None
        if s.rms_eps is None:
            s.rms_eps = DEFAULT_EPS[s.arch]
        if s.qkv_bias is None:
            s.qkv_bias = s.arch in ("qwen2moe", "gpt-oss")
        if s.arch == "gpt-oss" and not s.qkv_bias:
            raise ValueError("gpt-oss always has QKV biases")
        if s.qkv_bias and s.arch not in ("qwen2moe", "llama", "gpt-oss"):
            raise ValueError(f"{s.arch} has no QKV biases")
        if s.tie_output and s.arch not in TIED_OUTPUT_ALLOWED:
            raise ValueError(f"{s.arch} requires output.weight (no tied output)")
        if s.router_mode not in ("coded", "random"):
            raise ValueError("router_mode must be coded or random")
        if s.router_mode == "coded" and (s.n_embd < 2 * CODE_CHANNELS or s.n_embd % CODE_CHANNELS):
            raise ValueError(f"router_mode=coded needs n_embd >= {2 * CODE_CHANNELS} and a multiple of "
                             f"{CODE_CHANNELS}; use router_mode=random")
        if s.name is None:
            s.name = f"moestream-test-{s.arch}"
        return s


@dataclass
class TensorPlan:
    name: str
    ne: list
    type: GgmlType
    kind: str
    layer: int = -1
    extra: dict = field(default_factory=dict)


# ---- tensor types per quant mix -----------------------------------------------------------------

def _fits(t, ne0):
    return ne0 % BLOCK_GEOMETRY[t][0] == 0


def with_fallback(t, ne0):
    t = GgmlType(t)
    while not _fits(t, ne0):
        t = FALLBACK[t]
    return t


def _mix_type(mix, kind):
    """Type a quant mix wants for a weight matrix of the given kind (before fallback)."""
    if mix in ("f32", "f16", "bf16"):
        return {"f32": T.F32, "f16": T.F16, "bf16": T.BF16}[mix]
    if mix in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1"):
        base = T[mix.upper()]
        return T.Q6_K if kind == "output" and mix != "q8_0" else base
    if mix == "q6_k":
        return T.Q6_K
    if mix in ("q2_k", "q3_k_m"):
        # the bulk at 2 (3) bits; the matrices most sensitive to error one step up
        if kind in ("ffn_down_exps", "ffn_down_shexp", "attn_v"):
            return T.Q3_K if mix == "q2_k" else T.Q4_K
        return T.Q6_K if kind == "output" else T[mix[:2].upper() + "_K"]
    if mix == "iq4_xs":
        return T.Q6_K if kind == "output" else T.IQ4_XS
    if mix in ("q4_k_m", "q5_k_m"):
        base = T.Q4_K if mix == "q4_k_m" else T.Q5_K
        if kind in ("ffn_down_exps", "attn_v", "output"):
            return T.Q6_K
        return base
    raise ValueError(mix)


FLOAT_KINDS = ("norm", "router", "bias", "shexp_gate_inp", "sinks", "router_bias",
               "selection_bias") + RESIDUAL_BIASES  # always F32
EXPERT_KINDS = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")


def _deepseek2_layer(s, il) -> list:
    p = f"blk.{il}."
    E, H, qk = s.n_embd, s.n_head, s.mla_nope + s.mla_rope
    L = [TensorPlan(p + "attn_norm.weight", [E], T.F32, "norm", il)]
    if s.q_lora_rank:
        L += [TensorPlan(p + "attn_q_a.weight", [E, s.q_lora_rank], T.F32, "attn_q", il),
              TensorPlan(p + "attn_q_a_norm.weight", [s.q_lora_rank], T.F32, "norm", il),
              TensorPlan(p + "attn_q_b.weight", [s.q_lora_rank, H * qk], T.F32, "attn_q", il)]
    else:
        L.append(TensorPlan(p + "attn_q.weight", [E, H * qk], T.F32, "attn_q", il))
    L += [TensorPlan(p + "attn_kv_a_mqa.weight", [E, s.kv_lora_rank + s.mla_rope], T.F32, "attn_k", il),
          TensorPlan(p + "attn_kv_a_norm.weight", [s.kv_lora_rank], T.F32, "norm", il),
          *([TensorPlan(p + "attn_kv_b.weight", [s.kv_lora_rank, H * (s.mla_nope + s.mla_v)], T.F32, "attn_k", il)]
            if s.joint_kv_b else
            [TensorPlan(p + "attn_k_b.weight", [s.mla_nope, s.kv_lora_rank, H], T.F32, "attn_k", il),
             TensorPlan(p + "attn_v_b.weight", [s.kv_lora_rank, s.mla_v, H], T.F32, "attn_v", il)]),
          TensorPlan(p + "attn_output.weight", [H * s.mla_v, E], T.F32, "attn_output", il),
          TensorPlan(p + "ffn_norm.weight", [E], T.F32, "norm", il)]
    if il < s.n_dense_lead:
        return L + [TensorPlan(p + "ffn_gate.weight", [E, s.n_ff_dense], T.F32, "ffn_gate", il),
                    TensorPlan(p + "ffn_up.weight", [E, s.n_ff_dense], T.F32, "ffn_up", il),
                    TensorPlan(p + "ffn_down.weight", [s.n_ff_dense, E], T.F32, "ffn_down", il)]
    F, X, FS = s.n_ff_expert, s.n_expert, s.n_ff_expert * s.n_expert_shared
    L.append(TensorPlan(p + "ffn_gate_inp.weight", [E, X], T.F32, "router", il))
    if s.selection_bias:
        L.append(TensorPlan(p + "exp_probs_b.bias", [X], T.F32, "selection_bias", il))
    L += [TensorPlan(p + "ffn_gate_exps.weight", [E, F, X], T.F32, "ffn_gate_exps", il),
          TensorPlan(p + "ffn_up_exps.weight", [E, F, X], T.F32, "ffn_up_exps", il),
          TensorPlan(p + "ffn_down_exps.weight", [F, E, X], T.F32, "ffn_down_exps", il)]
    if s.n_expert_shared:
        L += [TensorPlan(p + "ffn_gate_shexp.weight", [E, FS], T.F32, "ffn_gate_shexp", il),
              TensorPlan(p + "ffn_up_shexp.weight", [E, FS], T.F32, "ffn_up_shexp", il),
              TensorPlan(p + "ffn_down_shexp.weight", [FS, E], T.F32, "ffn_down_shexp", il)]
    return L


def plan_tensors(spec: ModelSpec) -> list:
    s = spec
    hd, nq, nkv = s.head_dim, s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    plans = [TensorPlan("token_embd.weight", [s.n_embd, s.n_vocab], T.F32, "token_embd")]
    for il in range(s.n_layer):
        if s.arch == "deepseek2":
            plans += _deepseek2_layer(s, il)
            continue
        p = f"blk.{il}."
        L = [TensorPlan(p + "attn_norm.weight", [s.n_embd], T.F32, "norm", il),
             TensorPlan(p + "attn_q.weight", [s.n_embd, nq], T.F32, "attn_q", il),
             TensorPlan(p + "attn_k.weight", [s.n_embd, nkv], T.F32, "attn_k", il),
             TensorPlan(p + "attn_v.weight", [s.n_embd, nkv], T.F32, "attn_v", il)]
        if s.qkv_bias:
            L += [TensorPlan(p + "attn_q.bias", [nq], T.F32, "bias", il),
                  TensorPlan(p + "attn_k.bias", [nkv], T.F32, "bias", il),
                  TensorPlan(p + "attn_v.bias", [nkv], T.F32, "bias", il)]
        if s.arch == "qwen3moe":
            L += [TensorPlan(p + "attn_q_norm.weight", [hd], T.F32, "norm", il),
                  TensorPlan(p + "attn_k_norm.weight", [hd], T.F32, "norm", il)]
        if s.arch == "olmoe":   # RMS over the whole projected Q / K vector
            L += [TensorPlan(p + "attn_q_norm.weight", [nq], T.F32, "norm", il),
                  TensorPlan(p + "attn_k_norm.weight", [nkv], T.F32, "norm", il)]
        L += [TensorPlan(p + "attn_output.weight", [nq, s.n_embd], T.F32, "attn_output", il)]
        if s.arch == "gpt-oss":
            L += [TensorPlan(p + "attn_output.bias", [s.n_embd], T.F32, "attn_output_bias", il),
                  TensorPlan(p + "attn_sinks.weight", [s.n_head], T.F32, "sinks", il),
                  TensorPlan(p + "post_attention_norm.weight", [s.n_embd], T.F32, "norm", il),
                  TensorPlan(p + "ffn_gate_inp.bias", [s.n_expert], T.F32, "router_bias", il)]
        else:
            L.append(TensorPlan(p + "ffn_norm.weight", [s.n_embd], T.F32, "norm", il))
        L += [TensorPlan(p + "ffn_gate_inp.weight", [s.n_embd, s.n_expert], T.F32, "router", il),
              TensorPlan(p + "ffn_gate_exps.weight", [s.n_embd, s.n_ff_expert, s.n_expert], T.F32,
                         "ffn_gate_exps", il),
              TensorPlan(p + "ffn_up_exps.weight", [s.n_embd, s.n_ff_expert, s.n_expert], T.F32,
                         "ffn_up_exps", il),
              TensorPlan(p + "ffn_down_exps.weight", [s.n_ff_expert, s.n_embd, s.n_expert], T.F32,
                         "ffn_down_exps", il)]
        if s.arch == "gpt-oss":
            L += [TensorPlan(p + "ffn_gate_exps.bias", [s.n_ff_expert, s.n_expert], T.F32, "bias", il),
                  TensorPlan(p + "ffn_up_exps.bias", [s.n_ff_expert, s.n_expert], T.F32, "bias", il),
                  TensorPlan(p + "ffn_down_exps.bias", [s.n_embd, s.n_expert], T.F32, "ffn_down_exps_bias", il)]
        if s.arch == "qwen2moe":
            L += [TensorPlan(p + "ffn_gate_inp_shexp.weight", [s.n_embd], T.F32, "shexp_gate_inp", il),
                  TensorPlan(p + "ffn_gate_shexp.weight", [s.n_embd, s.n_ff_shared], T.F32, "ffn_gate_shexp", il),
                  TensorPlan(p + "ffn_up_shexp.weight", [s.n_embd, s.n_ff_shared], T.F32, "ffn_up_shexp", il),
                  TensorPlan(p + "ffn_down_shexp.weight", [s.n_ff_shared, s.n_embd], T.F32, "ffn_down_shexp", il)]
        plans += L
    plans.append(TensorPlan("output_norm.weight", [s.n_embd], T.F32, "norm"))
    if not s.tie_output:
        plans.append(TensorPlan("output.weight", [s.n_embd, s.n_vocab], T.F32, "output"))
    # assign types
    mixed_i = 0
    for t in plans:
        if t.kind in FLOAT_KINDS:
            t.type = T.F32
            continue
        if s.arch == "gpt-oss" and t.kind in EXPERT_KINDS:
            want = T.MXFP4
        elif s.quant_mix == "mixed":
            # rotate through all 11 types over the weight matrices in file order
            want = MIXED_CYCLE[mixed_i % len(MIXED_CYCLE)]
            mixed_i += 1
        else:
            want = _mix_type(s.quant_mix, t.kind)
        t.type = with_fallback(want, t.ne[0])
    return plans


# ---- weight generation -------------------------------------------------------------------------

def _rng(spec, name, salt=0):
    return np.random.default_rng([spec.seed, zlib.crc32(name.encode()), salt])


def _code_slice(spec):
    return slice(spec.n_embd - CODE_CHANNELS, spec.n_embd) if spec.router_mode == "coded" else None


def _token_class(token_ids):
    return np.asarray(token_ids) % CODE_CHANNELS


def _weight_std(plan):
    """Standard deviation of a linear layer's weights: 1/sqrt(fan_in), scaled down for the
    layers that write the residual stream."""
    std = 1.0 / np.sqrt(plan.ne[0])
    return np.float32(std * RESIDUAL_SCALE if plan.kind in RESIDUAL_KINDS else std)


def _sign_rows(rng, n, ne0):
    """Random +-1 values: the lowest crest factor a random vector can have."""
    return np.where(rng.random((n, ne0), dtype=np.float32) < 0.5, np.float32(-1), np.float32(1))


def _gen_rows(spec, plan, rng, row_start, row_end):
    """Float rows [row_start, row_end) of a 2-D tensor (numpy shape [ne1, ne0])."""
    ne0 = plan.ne[0]
    n = row_end - row_start
    code = _code_slice(spec)
    if plan.kind == "token_embd":
        x = _sign_rows(rng, n, ne0)
        if code is not None:
            x[:, code] = 0.0
            cls = _token_class(np.arange(row_start, row_end))
            x[np.arange(n), code.start + cls] = CODE_VALUE
        return x
    if plan.kind == "output":
        return rng.standard_normal((n, ne0), dtype=np.float32) * np.float32(OUTPUT_SCALE / np.sqrt(ne0))
    x = rng.standard_normal((n, ne0), dtype=np.float32) * _weight_std(plan)
    if code is not None and plan.kind in ("attn_output", "ffn_down_shexp", "ffn_down"):
        rows = np.arange(row_start, row_end)
        x[(rows >= code.start) & (rows < code.stop)] = 0.0
    return x


def _gen_small(spec, plan, rng):
    """1-D tensors and the router."""
    ne0 = plan.ne[0]
    if plan.kind == "norm":
        return (1.0 + 0.1 * rng.standard_normal(ne0)).astype(np.float32)
    if plan.kind == "bias":
        return (0.3 * rng.standard_normal(plan.ne[::-1])).astype(np.float32)
    if plan.kind == "sinks":
        return rng.standard_normal(ne0).astype(np.float32)
    if plan.kind == "router_bias":   # distinct offsets in [0, router_scale / 2)
        return (0.5 * spec.router_scale * rng.permutation(ne0) / ne0).astype(np.float32)
    if plan.kind in RESIDUAL_BIASES:
        x = (0.1 * rng.standard_normal(plan.ne[::-1])).astype(np.float32)
        code = _code_slice(spec)
        if code is not None:
            x[..., code] = 0.0
        return x
    if plan.kind == "selection_bias":
        # Distinct and within an eighth of the coded probability spacing: read
        # by the choice and kept out of the weights, yet no clear choice flips.
        step = _DS_PROB_SPAN / max(ne0 - 1, 1) / 8.0
        return (step * (2.0 * rng.permutation(ne0) / max(ne0 - 1, 1) - 1.0)).astype(np.float32)
    if plan.kind == "shexp_gate_inp":
        return (2.0 * rng.standard_normal(ne0) / np.sqrt(ne0)).astype(np.float32)
    if plan.kind == "router":
        n_expert = plan.ne[1]
        if spec.router_mode == "random":
            return (spec.router_scale * rng.standard_normal((n_expert, ne0)) / np.sqrt(ne0)).astype(np.float32)
        code = _code_slice(spec)
        w = (spec.router_context * rng.standard_normal((n_expert, ne0)) / np.sqrt(ne0)).astype(np.float32)
        w[:, code] = 0.0
        levels = _router_levels(spec, n_expert)
        for c in range(CODE_CHANNELS):
            w[:, code.start + c] = levels[_router_ranks(spec, n_expert, rng)]
        return w
    raise ValueError(plan.kind)


_DS_PROB_SPAN = 0.8   # deepseek2 sigmoid routing: coded probabilities evenly spaced in [0.1, 0.9]


def _router_levels(spec, n_expert):
    """Coded router logits, one per rank, ascending."""
    if spec.arch == "deepseek2" and spec.gating == "sigmoid":
        # Sigmoid squeezes evenly spaced logits together at both ends, where the
        # top-k boundary lies; the logits of evenly spaced probabilities keep
        # the selection margins of order their spacing.
        p = 0.5 + _DS_PROB_SPAN * (np.arange(n_expert) / max(n_expert - 1, 1) - 0.5)
        return np.log(p / (1.0 - p)) * spec.router_scale / CODE_VALUE
    return (np.arange(n_expert) - (n_expert - 1) / 2.0) * spec.router_scale / CODE_VALUE


def _router_ranks(spec, n_expert, rng):
    """Each expert's rank in one code class. Under a group limit the ranks come
    in blocks, one group's experts above every expert of the next, so that the
    groups' top-2 scores are as far apart as the experts' scores."""
    if spec.arch != "deepseek2" or spec.n_group <= 1:
        return rng.permutation(n_expert)
    per = n_expert // spec.n_group
    order = rng.permutation(spec.n_group)
    return np.concatenate([order[g] * per + rng.permutation(per) for g in range(spec.n_group)])


def _expert_chunks(spec, plan, rng):
    """Raw bytes of a 3-D expert tensor, one expert at a time."""
    ne0, ne1, n_expert = plan.ne
    code = _code_slice(spec)
    zero_rows = None
    if code is not None and plan.kind == "ffn_down_exps":
        zero_rows = np.arange(code.start, code.stop)
    if ne0 * ne1 * n_expert <= BIG_TENSOR_ELEMENTS:
        for _ in range(n_expert):
            x = rng.standard_normal((ne1, ne0), dtype=np.float32) * _weight_std(plan)
            if zero_rows is not None:
                x[zero_rows] = 0.0
            yield quantize(x, plan.type)
        return
    # Big tensor: quantise a pool of random rows once, then build every expert from
    # randomly drawn pool rows (distinct per expert, same statistics, much faster).
    pool_rows = max(ne1, POOL_ELEMENTS // ne0)
    pool = np.concatenate([
        quantize(rng.standard_normal((min(4096, pool_rows - r), ne0), dtype=np.float32)
                 * _weight_std(plan), plan.type)
        for r in range(0, pool_rows, 4096)])
    zero_row = quantize(np.zeros((1, ne0), dtype=np.float32), plan.type)[0]
    for _ in range(n_expert):
        q = pool[rng.integers(0, pool_rows, size=ne1)]
        if zero_rows is not None:
            q[zero_rows] = zero_row
        yield q


def _tensor_chunks(spec, plan):
    rng = _rng(spec, plan.name)
    if plan.kind in FLOAT_KINDS:
        yield quantize(_gen_small(spec, plan, rng), plan.type)
        return
    if len(plan.ne) == 3:
        yield from _expert_chunks(spec, plan, rng)
        return
    ne0, ne1 = plan.ne
    if ne0 * ne1 > BIG_TENSOR_ELEMENTS:
        yield from _pooled_2d_chunks(spec, plan, rng)
        return
    step = max(1, (1 << 20) // ne0)
    for r in range(0, ne1, step):
        yield quantize(_gen_rows(spec, plan, rng, r, min(ne1, r + step)), plan.type)


def _pooled_2d_chunks(spec, plan, rng):
    """Big 2-D tensors (embeddings, output): rows drawn from a quantised pool of random rows.
    Token rows get their routing code by re-quantising just the tail blocks holding it."""
    ne0, ne1 = plan.ne
    bs, bb = BLOCK_GEOMETRY[plan.type]
    pool_rows = max(1, POOL_ELEMENTS // ne0)
    pool_f = np.concatenate([_gen_rows(spec, plan, rng, r, min(pool_rows, r + 4096))
                             for r in range(0, pool_rows, 4096)])
    pool_q = quantize(pool_f, plan.type)
    code = _code_slice(spec)
    tail = -(-CODE_CHANNELS // bs) * bs          # whole blocks covering the code channels
    zero_row = quantize(np.zeros((1, ne0), dtype=np.float32), plan.type)[0]
    step = max(1, (1 << 22) // ne0)
    for r0 in range(0, ne1, step):
        rows = np.arange(r0, min(ne1, r0 + step))
        idx = rng.integers(0, pool_rows, size=rows.size)
        q = pool_q[idx]
        if code is not None and plan.kind == "token_embd":
            t = pool_f[idx, ne0 - tail:].copy()
            t[:, tail - CODE_CHANNELS:] = 0.0
            t[np.arange(rows.size), tail - CODE_CHANNELS + _token_class(rows)] = CODE_VALUE
            q[:, q.shape[1] - tail // bs * bb:] = quantize(t, plan.type)
        if code is not None and plan.kind in ("attn_output", "ffn_down_shexp", "ffn_down"):
            q[(rows >= code.start) & (rows < code.stop)] = zero_row
        yield q


# ---- tokenizer ------------------------------------------------------------------------------------

def _bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


_CORPUS = (
    "the quick brown fox jumps over the lazy dog and then the dog sleeps in the sun while the fox "
    "runs into the forest where many other animals live together in peace there is a river that "
    "flows through the valley and the water is cold and clear in the morning people walk along the "
    "river to watch the birds sing their songs experts say that mixture of experts models route "
    "each token to a small number of experts which keeps the compute low but the memory high so "
    "streaming weights from storage is an interesting problem for inference on small machines "
    "numbers like 1 2 3 10 42 100 2024 appear in text as well as punctuation, quotes \"like this\" "
    "and questions? yes! it's true: they're here, we'll see, I'd say, you've won.\n"
)


def synthetic_vocab(n_vocab: int):
    """Byte-level BPE vocab of exactly n_vocab tokens: 256 byte tokens, merges learnt on a
    fixed corpus (then systematic merges to fill), and one control token <|endoftext|>."""
    if n_vocab < 258:
        raise ValueError("synthetic tokenizer needs n_vocab >= 258 (256 bytes + a merge + <|endoftext|>)")
    b2u = _bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    vocab = set(tokens)
    merges = []
    target = n_vocab - 1
    words: dict[tuple, int] = {}
    for i, w in enumerate(_CORPUS.split(" ")):
        text = (" " + w) if i else w
        key = tuple(b2u[b] for b in text.encode("utf-8"))
        words[key] = words.get(key, 0) + 1
    while len(tokens) < target:
        counts: dict[tuple, int] = {}
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + n
        candidates = [(-n, pair) for pair, n in counts.items() if pair[0] + pair[1] not in vocab]
        if not candidates:
            break
        _, (a, b) = min(candidates)
        merged = a + b
        merges.append(f"{a} {b}")
        tokens.append(merged)
        vocab.add(merged)
        new_words = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    # fill with merges of existing multi-character tokens and letters
    letters = [b2u[b] for b in b"etaoinshrdlucmfwypvbgkqjxz"]
    i = 0
    while len(tokens) < target:
        left = tokens[256 + (i // len(letters)) % max(1, len(tokens) - 256)] if len(tokens) > 256 else letters[i % 26]
        right = letters[i % len(letters)]
        i += 1
        if left + right in vocab:
            if i > 100 * n_vocab:
                raise RuntimeError("could not fill the synthetic vocab")
            continue
        merges.append(f"{left} {right}")
        tokens.append(left + right)
        vocab.add(left + right)
    tokens.append("<|endoftext|>")
    token_type = [1] * (len(tokens) - 1) + [3]
    return tokens, token_type, merges


def _tokenizer_kv(spec):
    """[(key, vtype, value, elem_type)] and the vocab size they imply (None: keep spec.n_vocab)."""
    if spec.tokenizer == "none":
        return [], None
    if spec.tokenizer == "synthetic":
        tokens, types, merges = synthetic_vocab(spec.n_vocab)
        eot = len(tokens) - 1
        return [("tokenizer.ggml.model", ValueType.STRING, "gpt2", None),
                ("tokenizer.ggml.pre", ValueType.STRING, "gpt-2", None),
                ("tokenizer.ggml.tokens", ValueType.ARRAY, tokens, ValueType.STRING),
                ("tokenizer.ggml.token_type", ValueType.ARRAY, types, ValueType.INT32),
                ("tokenizer.ggml.merges", ValueType.ARRAY, merges, ValueType.STRING),
                ("tokenizer.ggml.bos_token_id", ValueType.UINT32, eot, None),
                ("tokenizer.ggml.eos_token_id", ValueType.UINT32, eot, None),
                ("tokenizer.ggml.add_bos_token", ValueType.BOOL, False, None)], len(tokens)
    if spec.tokenizer.startswith("copy:"):
        from reference.gguf_reader import GGUFReader  # only needed for this option
        src = GGUFReader(spec.tokenizer[5:])
        kv = []
        for key, value in src.metadata.items():
            if not key.startswith("tokenizer."):
                continue
            vtype, etype = src.value_types[key]
            kv.append((key, ValueType(vtype), value, None if etype is None else ValueType(etype)))
        tokens = src.metadata.get("tokenizer.ggml.tokens")
        if not tokens:
            raise ValueError(f"{spec.tokenizer[5:]} has no tokenizer.ggml.tokens")
        return kv, len(tokens)
    raise ValueError(f"unknown tokenizer option {spec.tokenizer!r}")


# ---- file ------------------------------------------------------------------------------------------

def _arch_kv(s: ModelSpec):
    a = s.arch
    kv = [(f"{a}.block_count", ValueType.UINT32, s.n_layer),
          (f"{a}.context_length", ValueType.UINT32, s.n_ctx),
          (f"{a}.embedding_length", ValueType.UINT32, s.n_embd)]
    if a in ("llama", "olmoe"):
        kv.append((f"{a}.feed_forward_length", ValueType.UINT32, s.n_ff_expert))
    elif a == "gpt-oss":    # no dense feed-forward size in its files
        pass
    elif a == "deepseek2":
        kv.append((f"{a}.feed_forward_length", ValueType.UINT32, s.n_ff_dense))
    elif a == "qwen3moe":   # dense size of the HF config: present in real files, not the expert size
        kv.append((f"{a}.feed_forward_length", ValueType.UINT32, 3 * s.n_ff_expert))
    else:                   # qwen2moe: real files carry the shared-expert size here
        kv.append((f"{a}.feed_forward_length", ValueType.UINT32, s.n_ff_shared))
    kv += [(f"{a}.attention.head_count", ValueType.UINT32, s.n_head),
           # the layout before MLA absorption describes one key/value head per query head
           (f"{a}.attention.head_count_kv", ValueType.UINT32, s.n_head if s.joint_kv_b else s.n_head_kv),
           (f"{a}.rope.freq_base", ValueType.FLOAT32, s.rope_theta),
           (f"{a}.attention.layer_norm_rms_epsilon", ValueType.FLOAT32, s.rms_eps),
           (f"{a}.expert_count", ValueType.UINT32, s.n_expert),
           (f"{a}.expert_used_count", ValueType.UINT32, s.n_expert_used)]
    if a != "deepseek2" and (s.head_dim != s.n_embd // s.n_head or s.n_embd % s.n_head or a == "gpt-oss"):
        kv += [(f"{a}.attention.key_length", ValueType.UINT32, s.head_dim),
               (f"{a}.attention.value_length", ValueType.UINT32, s.head_dim)]
    if a in ("qwen3moe", "qwen2moe", "gpt-oss"):
        kv.append((f"{a}.expert_feed_forward_length", ValueType.UINT32, s.n_ff_expert))
    if a == "gpt-oss":
        kv += [(f"{a}.attention.sliding_window", ValueType.UINT32, s.n_swa),
               (f"{a}.rope.scaling.type", ValueType.STRING, "yarn"),
               (f"{a}.rope.scaling.factor", ValueType.FLOAT32, s.yarn_factor),
               (f"{a}.rope.scaling.original_context_length", ValueType.UINT32, s.yarn_orig_ctx)]
        if isinstance(s.swa_pattern, list):
            kv.append((f"{a}.attention.sliding_window_pattern", ValueType.ARRAY, s.swa_pattern, ValueType.UINT32))
        elif s.swa_pattern is not None:
            kv.append((f"{a}.attention.sliding_window_pattern", ValueType.UINT32, s.swa_pattern))
    if a == "qwen2moe":
        kv.append((f"{a}.expert_shared_feed_forward_length", ValueType.UINT32, s.n_ff_shared))
    if a == "deepseek2":
        kv += [(f"{a}.expert_feed_forward_length", ValueType.UINT32, s.n_ff_expert),
               (f"{a}.leading_dense_block_count", ValueType.UINT32, s.n_dense_lead),
               (f"{a}.attention.kv_lora_rank", ValueType.UINT32, s.kv_lora_rank),
               *([(f"{a}.attention.key_length", ValueType.UINT32, s.mla_nope + s.mla_rope),
                  (f"{a}.attention.value_length", ValueType.UINT32, s.mla_v)] if s.joint_kv_b else
                 [(f"{a}.attention.key_length", ValueType.UINT32, s.kv_lora_rank + s.mla_rope),
                  (f"{a}.attention.value_length", ValueType.UINT32, s.kv_lora_rank),
                  (f"{a}.attention.key_length_mla", ValueType.UINT32, s.mla_nope + s.mla_rope),
                  (f"{a}.attention.value_length_mla", ValueType.UINT32, s.mla_v)]),
               (f"{a}.rope.dimension_count", ValueType.UINT32, s.mla_rope),
               (f"{a}.expert_shared_count", ValueType.UINT32, s.n_expert_shared),
               (f"{a}.expert_gating_func", ValueType.UINT32, 2 if s.gating == "sigmoid" else 1),
               (f"{a}.expert_weights_norm", ValueType.BOOL, s.weights_norm),
               (f"{a}.expert_weights_scale", ValueType.FLOAT32, s.weights_scale),
               (f"{a}.expert_group_count", ValueType.UINT32, s.n_group),
               (f"{a}.expert_group_used_count", ValueType.UINT32, s.n_group_used)]
        if s.q_lora_rank:
            kv.append((f"{a}.attention.q_lora_rank", ValueType.UINT32, s.q_lora_rank))
        if s.yarn_factor > 0:   # YaRN as DeepSeek's files carry it (0: none)
            kv += [(f"{a}.rope.scaling.type", ValueType.STRING, "yarn"),
                   (f"{a}.rope.scaling.factor", ValueType.FLOAT32, s.yarn_factor),
                   (f"{a}.rope.scaling.original_context_length", ValueType.UINT32, s.yarn_orig_ctx),
                   (f"{a}.rope.scaling.yarn_log_multiplier", ValueType.FLOAT32, 0.1 * s.yarn_mscale_all_dim)]
    if s.rope_attn_factor is not None:
        kv.append((f"{a}.rope.scaling.attn_factor", ValueType.FLOAT32, s.rope_attn_factor))
    if a == "llama":
        kv += [(f"{a}.rope.dimension_count", ValueType.UINT32, s.head_dim),
               (f"{a}.vocab_size", ValueType.UINT32, s.n_vocab)]
    return kv


def make_model(path, spec: ModelSpec | None = None, **overrides) -> dict:
    """Writes the model; returns a summary {spec, tensors: {name: (ne, type name)}}."""
    spec = dataclasses.replace(spec or ModelSpec(), **overrides)
    tok_kv, tok_vocab = _tokenizer_kv(spec)
    if tok_vocab is not None:
        spec = dataclasses.replace(spec, n_vocab=tok_vocab + spec.tokenizer_padding)
    s = spec.resolved()
    plans = [p for p in plan_tensors(s) if p.name not in s.omit_tensors]
    w = GGUFWriter(path, alignment=s.alignment, write_alignment_key=s.write_alignment_key)
    w.add_string("general.architecture", s.arch)
    w.add_string("general.name", s.name)
    w.add_uint32("general.file_type", MIX_FTYPE[s.quant_mix])
    w.add_uint32("general.quantization_version", 2)
    for key, vtype, value, *etype in _arch_kv(s):   # an ARRAY carries its element type last
        w.add_kv(key, vtype, value, *etype)
    for key, vtype, value, etype in tok_kv:
        w.add_kv(key, vtype, value, elem_type=etype)
    for p in plans:
        w.add_tensor_info(p.name, p.ne, p.type)
    try:
        w.write_header()
        for p in plans:
            for chunk in _tensor_chunks(s, p):
                w.write_tensor_data(p.name, chunk)
        w.close()
    except BaseException:
        w._file and w._file.close()
        raise
    return {"spec": s, "tensors": {p.name: (p.ne, p.type.name) for p in plans}}


def _parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = ModelSpec()
    ap.add_argument("--arch", choices=ARCHS, default=d.arch)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-embd", type=int, default=d.n_embd)
    ap.add_argument("--n-layer", type=int, default=d.n_layer)
    ap.add_argument("--n-head", type=int, default=d.n_head)
    ap.add_argument("--n-head-kv", type=int, default=None)
    ap.add_argument("--head-dim", type=int, default=None)
    ap.add_argument("--n-expert", type=int, default=d.n_expert)
    ap.add_argument("--n-expert-used", type=int, default=d.n_expert_used)
    ap.add_argument("--n-ff-expert", type=int, default=d.n_ff_expert)
    ap.add_argument("--n-ff-shared", type=int, default=None)
    ap.add_argument("--n-vocab", type=int, default=d.n_vocab)
    ap.add_argument("--n-ctx", type=int, default=d.n_ctx)
    ap.add_argument("--rope-theta", type=float, default=d.rope_theta)
    ap.add_argument("--rms-eps", type=float, default=None)
    ap.add_argument("--quant-mix", choices=QUANT_MIXES, default=d.quant_mix)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--tokenizer", default=d.tokenizer, help="none | synthetic | copy:PATH.gguf")
    ap.add_argument("--router-mode", choices=("coded", "random"), default=d.router_mode)
    ap.add_argument("--router-scale", type=float, default=d.router_scale,
                    help="coded: spacing of router logits; random: their standard deviation")
    ap.add_argument("--router-context", type=float, default=d.router_context,
                    help="coded: std of an extra context-dependent router part")
    ap.add_argument("--tie-output", action="store_true")
    ap.add_argument("--qkv-bias", action="store_true", default=None)
    ap.add_argument("--alignment", type=int, default=d.alignment)
    ap.add_argument("--write-alignment-key", action="store_true")
    ap.add_argument("--n-swa", type=int, default=d.n_swa, help="gpt-oss: the sliding window")
    ap.add_argument("--joint-kv-b", action="store_true",
                    help="deepseek2: one attn_kv_b a layer (files converted before absorbed latent attention)")
    return ap.parse_args(argv)


def main(argv=None):
    a = _parse_args(argv)
    spec = ModelSpec(arch=a.arch, n_embd=a.n_embd, n_layer=a.n_layer, n_head=a.n_head, n_head_kv=a.n_head_kv,
                     head_dim=a.head_dim, n_expert=a.n_expert, n_expert_used=a.n_expert_used,
                     n_ff_expert=a.n_ff_expert, n_ff_shared=a.n_ff_shared, n_vocab=a.n_vocab, n_ctx=a.n_ctx,
                     rope_theta=a.rope_theta, rms_eps=a.rms_eps, quant_mix=a.quant_mix, seed=a.seed,
                     tokenizer=a.tokenizer, router_mode=a.router_mode, router_scale=a.router_scale,
                     router_context=a.router_context, tie_output=a.tie_output, qkv_bias=a.qkv_bias,
                     alignment=a.alignment, write_alignment_key=a.write_alignment_key, n_swa=a.n_swa,
                     joint_kv_b=a.joint_kv_b)
    info = make_model(a.out, spec)
    types = {}
    for ne, t in info["tensors"].values():
        types[t] = types.get(t, 0) + 1
    print(f"{a.out}: {info['spec'].arch}, {len(info['tensors'])} tensors, types {types}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
