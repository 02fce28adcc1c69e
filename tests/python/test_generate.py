"""The model generator writes valid GGUF files with the requested shapes and
quant blocks whose values are finite and scaled as intended."""
import struct
import subprocess

import numpy as np
import pytest

from reference import dequant as reference_dequant

BLOCK = {0: (1, 4), 6: (32, 22), 8: (32, 34), 12: (256, 144), 14: (256, 210),
         10: (256, 84), 11: (256, 110), 20: (32, 18), 23: (256, 136)}
LOW_BIT = (10, 11, 20, 23)   # Q2_K, Q3_K, IQ4_NL, IQ4_XS: checked with the reference dequantiser
# expected types per tensor role when n_embd is a multiple of 256
MIX_TYPES = {
    "q4_k_m": {"ffn_gate_exps": 12, "ffn_up_exps": 12, "ffn_down_exps": 14, "ffn_gate_inp": 0, "attn_v": 14},
    "q3_k_m": {"ffn_gate_exps": 11, "ffn_up_exps": 11, "ffn_down_exps": 12, "attn_q": 11, "attn_v": 12,
               "output": 14},
    "q2_k": {"ffn_gate_exps": 10, "ffn_up_exps": 10, "ffn_down_exps": 11, "attn_q": 10, "attn_v": 11, "output": 14},
    "iq4_xs": {"ffn_gate_exps": 23, "ffn_down_exps": 23, "attn_v": 23, "output": 14},
}


def read_gguf(path):
    data = path.read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode()
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b"GGUF"
    pos = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    assert version == 3
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    tensors = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
        tensors.append((name, ne, take("I"), take("Q")))
    align = kv.get("general.alignment", 32)
    data_offset = (pos + align - 1) // align * align
    return data, kv, tensors, data_offset


def half(b):
    return np.frombuffer(b, dtype="<f2").astype(np.float32)


def dequant(t, raw):
    if t == 0:
        return np.frombuffer(raw, dtype="<f4")
    if t in LOW_BIT:
        return reference_dequant.dequantize(raw, t).astype(np.float64)
    be, bb = BLOCK[t]
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, bb)
    out = []
    for b in blocks:
        if t == 8:
            out.append(half(b[:2].tobytes())[0] * b[2:].view(np.int8).astype(np.float32))
        elif t == 6:
            d = half(b[:2].tobytes())[0]
            qh = int.from_bytes(b[2:6].tobytes(), "little")
            qs = b[6:]
            lo = [(qs[j] & 15) | (((qh >> j) & 1) << 4) for j in range(16)]
            hi = [(qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4) for j in range(16)]
            out.append(d * (np.array(lo + hi, dtype=np.float32) - 16))
        elif t == 12:
            d, dmin = half(b[:4].tobytes())
            q = b[4:16]
            sc, m = [], []
            for j in range(8):
                if j < 4:
                    sc.append(q[j] & 63), m.append(q[j + 4] & 63)
                else:
                    sc.append((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4))
                    m.append((q[j + 4] >> 4) | ((q[j] >> 6) << 4))
            qs = b[16:]
            y = np.zeros(256, dtype=np.float32)
            for k in range(4):
                lo, hi = qs[32 * k:32 * k + 32] & 15, qs[32 * k:32 * k + 32] >> 4
                y[64 * k:64 * k + 32] = d * sc[2 * k] * lo - dmin * m[2 * k]
                y[64 * k + 32:64 * k + 64] = d * sc[2 * k + 1] * hi - dmin * m[2 * k + 1]
            out.append(y)
        elif t == 14:
            ql, qh, sc = b[:128], b[128:192], b[192:208].view(np.int8)
            d = half(b[208:210].tobytes())[0]
            y = np.zeros(256, dtype=np.float32)
            for n in range(2):
                L, H, S = ql[64 * n:], qh[32 * n:], sc[8 * n:]
                for l in range(32):
                    i = l // 16
                    y[128 * n + l] = d * S[i] * (int((L[l] & 15) | ((H[l] & 3) << 4)) - 32)
                    y[128 * n + l + 32] = d * S[i + 2] * (int((L[l + 32] & 15) | (((H[l] >> 2) & 3) << 4)) - 32)
                    y[128 * n + l + 64] = d * S[i + 4] * (int((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32)
                    y[128 * n + l + 96] = d * S[i + 6] * (int((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32)
            out.append(y)
    return np.concatenate(out)


def generate(cli, path, *extra):
    subprocess.run([str(cli), "generate", "-o", str(path), *extra], check=True, capture_output=True)


@pytest.mark.parametrize("preset,quant", [("tiny", "q4_k_m"), ("small", "q4_k_m"), ("small", "q8_0"), ("tiny", "f32"),
                                          ("small", "q3_k_m"), ("small", "q2_k"), ("small", "iq4_xs"),
                                          ("tiny", "q2_k")])
def test_generated_file_is_valid_and_scaled(cli_path, tmp_path, preset, quant):
    path = tmp_path / "m.gguf"
    generate(cli_path, path, "--preset", preset, "--quant", quant)
    size = int(subprocess.run([str(cli_path), "generate", "--preset", preset, "--quant", quant, "--size-only"],
                              check=True, capture_output=True, text=True).stdout)
    assert path.stat().st_size == size
    data, kv, tensors, data_offset = read_gguf(path)
    assert kv["general.architecture"] == "qwen3moe"
    n_layer, n_embd = kv["qwen3moe.block_count"], kv["qwen3moe.embedding_length"]
    n_expert, n_ff = kv["qwen3moe.expert_count"], kv["qwen3moe.expert_feed_forward_length"]
    assert len(kv["tokenizer.ggml.tokens"]) == len(kv["tokenizer.ggml.token_type"])
    names = {t[0]: t for t in tensors}
    assert len(names) == len(tensors) == 3 + 12 * n_layer
    assert names["blk.0.ffn_gate_exps.weight"][1] == [n_embd, n_ff, n_expert]
    assert names["blk.0.ffn_down_exps.weight"][1] == [n_ff, n_embd, n_expert]
    assert names["token_embd.weight"][1] == [n_embd, len(kv["tokenizer.ggml.tokens"])]
    assert names["output.weight"][1] == [n_embd, kv["qwen3moe.vocab_size"]]
    assert kv["qwen3moe.vocab_size"] == len(kv["tokenizer.ggml.tokens"])
    expected = 0
    for name, ne, t, off in tensors:
        be, bb = BLOCK[t]
        assert ne[0] % be == 0
        nbytes = int(np.prod(ne)) // be * bb
        assert off == expected, name
        expected = (off + nbytes + 31) // 32 * 32
        if quant in MIX_TYPES and n_embd % 256 == 0:
            role = name.split(".")[-2]   # blk.0.attn_v.weight -> attn_v, output.weight -> output
            if role in MIX_TYPES[quant]:
                assert t == MIX_TYPES[quant][role], name
        # Dequantise the first rows and check the scale the generator promises.
        row = ne[0] // be * bb
        raw = data[data_offset + off: data_offset + off + min(nbytes, row * 8)]
        y = dequant(t, raw)
        assert np.all(np.isfinite(y)), name
        if name.endswith("norm.weight"):
            assert np.all(y == 1.0), name
            continue
        fan_in = ne[0]
        gain = 3.0 if "gate_inp" in name else 0.1 if "attn_output" in name else 1.0
        sigma = 1.0 if name == "token_embd.weight" else gain / np.sqrt(fan_in)
        assert abs(float(np.std(y)) / sigma - 1) < 0.25, (name, np.std(y), sigma)
        assert abs(float(np.mean(y))) < 0.1 * sigma + 4 * sigma / np.sqrt(y.size), name
    assert path.stat().st_size == data_offset + tensors[-1][3] + int(np.prod(tensors[-1][1])) // BLOCK[tensors[-1][2]][0] * BLOCK[tensors[-1][2]][1]


def test_same_seed_same_bytes_other_seed_differs(cli_path, tmp_path):
    a, b, c = tmp_path / "a.gguf", tmp_path / "b.gguf", tmp_path / "c.gguf"
    generate(cli_path, a, "--preset", "tiny")
    generate(cli_path, b, "--preset", "tiny")
    generate(cli_path, c, "--preset", "tiny", "--seed", "7")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert a.stat().st_size == c.stat().st_size


def test_overrides_and_errors(cli_path, tmp_path):
    path = tmp_path / "m.gguf"
    generate(cli_path, path, "--preset", "small", "--layers", "3", "--experts", "32", "--top-k", "2")
    _, kv, tensors, _ = read_gguf(path)
    assert kv["qwen3moe.block_count"] == 3 and kv["qwen3moe.expert_count"] == 32
    assert kv["qwen3moe.expert_used_count"] == 2
    bad = subprocess.run([str(cli_path), "generate", "--preset", "nope", "-o", str(tmp_path / "x.gguf")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "preset" in bad.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]  # neither x.gguf nor a temporary file


@pytest.mark.parametrize("shape", [{"n_vocab": 10_000_000}, {"n_expert": 2**30, "n_ff_expert": 2**30},
                                   {"n_embd": 2**17}, {"head_dim": 2048}, {"n_head": 2048, "n_head_kv": 2048}])
def test_the_library_bounds_every_shape(binding, shape):
    # Past the documented maxima a size would take minutes to work out (a
    # 10M-token vocabulary) or wrap around 64 bits (2^30 experts of 2^30 rows).
    with pytest.raises(binding.Error) as e:
        binding.generate_model_size(preset="tiny", **shape)
    assert e.value.status == binding.Status.INVALID_ARGUMENT
    assert next(iter(shape)) in str(e.value)


def test_gpt_oss_preset_has_its_tensors_and_mxfp4_experts(cli_path, tmp_path):
    path = tmp_path / "oss.gguf"
    generate(cli_path, path, "--preset", "gpt-oss-tiny")
    data, kv, tensors, data_offset = read_gguf(path)
    assert kv["general.architecture"] == "gpt-oss"
    assert kv["gpt-oss.rope.scaling.type"] == "yarn" and kv["gpt-oss.attention.sliding_window"] == 128
    assert kv["tokenizer.ggml.pre"] == "gpt-4o"
    names = {t[0]: t for t in tensors}
    n_layer, n_expert = kv["gpt-oss.block_count"], kv["gpt-oss.expert_count"]
    n_ff = kv["gpt-oss.expert_feed_forward_length"]
    for g in ("gate", "up", "down"):
        assert names[f"blk.0.ffn_{g}_exps.weight"][2] == 39                       # MXFP4
        assert names[f"blk.0.ffn_{g}_exps.bias"][1] == [n_ff if g != "down" else kv["gpt-oss.embedding_length"],
                                                         n_expert]
    for n in ("attn_sinks.weight", "post_attention_norm.weight", "ffn_gate_inp.bias", "attn_output.bias"):
        assert f"blk.{n_layer - 1}.{n}" in names
    assert not any("ffn_norm" in n or "q_norm" in n for n in names)
    # MXFP4 blocks: exponent bytes near the scale the fan-in asks for (2^(e-128) * 5.85 ~ 1/sqrt(n_embd))
    _, ne, t, off = names["blk.0.ffn_up_exps.weight"]
    exps = np.frombuffer(data, np.uint8, count=64 * 17, offset=data_offset + off)[::17].astype(int)
    want = 128 + round(np.log2(1 / np.sqrt(ne[0]) / 5.85))
    assert np.all(exps == want)
    out = subprocess.run([str(cli_path), "generate", "--arch", "gpt-oss", "--preset", "qwen3-30b-a3b", "--size-only"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "qwen3moe" in out.stderr


def test_deepseek2_preset_has_latent_attention_a_dense_lead_and_q4_k_m_experts(cli_path, tmp_path):
    path = tmp_path / "ds.gguf"
    generate(cli_path, path, "--preset", "deepseek2-tiny")
    _, kv, tensors, _ = read_gguf(path)
    assert kv["general.architecture"] == "deepseek2"
    a = "deepseek2."
    assert kv[a + "leading_dense_block_count"] == 1 and kv[a + "attention.head_count_kv"] == 1
    assert kv[a + "expert_gating_func"] == 2 and kv[a + "expert_group_count"] > 1
    assert kv[a + "attention.key_length"] == kv[a + "attention.kv_lora_rank"] + kv[a + "rope.dimension_count"]
    assert kv[a + "rope.scaling.type"] == "yarn"
    names = {t[0]: t for t in tensors}
    last = kv[a + "block_count"] - 1
    assert "blk.0.ffn_gate.weight" in names and "blk.0.ffn_gate_inp.weight" not in names
    for n in ("attn_q_a.weight", "attn_q_b.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight", "attn_v_b.weight",
              "exp_probs_b.bias", "ffn_gate_shexp.weight", "ffn_down_shexp.weight"):
        assert f"blk.{last}.{n}" in names, n
    # as in Q4_K_M files: expert gate/up Q4_K, down Q6_K, router and selection bias F32
    assert [names[f"blk.1.ffn_{g}_exps.weight"][2] for g in ("gate", "up", "down")] == [12, 12, 14]
    assert names["blk.1.ffn_gate_inp.weight"][2] == 0 and names["blk.1.exp_probs_b.bias"][2] == 0
    # one layer keeps its routed experts (no dense lead left)
    one = tmp_path / "one.gguf"
    generate(cli_path, one, "--preset", "deepseek2-tiny", "--layers", "1")
    _, kv1, tensors1, _ = read_gguf(one)
    assert kv1[a + "leading_dense_block_count"] == 0
    assert "blk.0.ffn_gate_exps.weight" in {t[0] for t in tensors1}
    # deepseek2 only with its own shapes
    for args in (["--arch", "deepseek2", "--preset", "small"], ["--preset", "deepseek2-tiny", "--kv-heads", "2"],
                 ["--preset", "deepseek2-tiny", "--experts", "6"]):
        out = subprocess.run([str(cli_path), "generate", *args, "--size-only"], capture_output=True, text=True)
        assert out.returncode != 0 and "deepseek2" in out.stderr, (args, out.stderr)


def test_deepseek_v2_lite_size_is_that_of_a_q4_k_m_file(cli_path):
    # DeepSeek-V2-Lite in Q4_K_M is ~10 GB (rows of 1408 fall back to 32-element types).
    size = int(subprocess.run([str(cli_path), "generate", "--preset", "deepseek-v2-lite", "--size-only"],
                              check=True, capture_output=True, text=True).stdout)
    assert 8e9 < size < 13e9, size


def test_generated_deepseek2_runs_and_matches_the_reference(cli_path, tmp_path):
    import engine_check as ec
    from reference.forward import Reference
    path = tmp_path / "ds.gguf"
    generate(cli_path, path, "--preset", "deepseek2-tiny", "--layers", "3", "--seed", "3")
    r = subprocess.run([str(cli_path), "inspect", str(path)], capture_output=True, text=True)
    assert r.returncode == 0 and "deepseek2" in r.stdout, r.stderr
    r = subprocess.run([str(cli_path), "run", "-m", str(path), "--tokens", "1,2,3", "-n", "4"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    tokens = [5, 77, 300, 12, 450, 9]
    ref = Reference(path).run(tokens)
    # Exact mode is within 1e-4 of the reference; a routing margin far above
    # that keeps both on the same experts (random routers, so checked here).
    margins = ref.margins[np.isfinite(ref.margins)]
    assert margins.min() > 1e-3, margins.min()
    first, eng = ec.Engine(str(cli_path)).positions(path, tokens, ref.logits.shape[1], exact=True, extra=("--all",),
                                                    batch=1)
    for i, row in enumerate(eng):
        ec.compare_exact(ref.logits[first + i], row, f"deepseek2-tiny position {first + i}")


@pytest.mark.parametrize("quant", ["f32", "q4_k_m"])
def test_deepseek2_attn_kv_b_layout_holds_the_split_layouts_weights(cli_path, tmp_path, quant):
    """--attn-kv-b writes deepseek2 as files converted before absorbed latent attention have it: one
    F32 attn_kv_b a layer, no key_length_mla, a key/value head per query head, holding the split
    layout's attn_k_b (transposed) and attn_v_b of the same seed. Open builds attn_k_b / attn_v_b
    from it again: in F32 the same matrices as the split file's, so the logits are bit-identical,
    streamed (pread) as mapped, in normal and exact mode; in Q4_K_M they are F32 where the split
    file has quantised blocks of the same values, so in exact mode (no activation rounding, which
    these Gaussian models are sensitive to) the logits agree within its tolerance. Both files
    follow the reference, which finds the same weights in either."""
    import engine_check as ec
    from reference.forward import Reference
    split, joint = tmp_path / "split.gguf", tmp_path / "joint.gguf"
    args = ("--preset", "deepseek2-tiny", "--layers", "3", "--seed", "3", "--quant", quant)
    generate(cli_path, split, *args)
    generate(cli_path, joint, *args, "--attn-kv-b")
    _, kv, tensors, _ = read_gguf(joint)
    a, names = "deepseek2.", {t[0]: t for t in tensors}
    assert "blk.2.attn_k_b.weight" not in names and a + "attention.key_length_mla" not in kv
    assert kv[a + "attention.head_count_kv"] == kv[a + "attention.head_count"]
    assert kv[a + "attention.key_length"] == 64 and kv[a + "attention.value_length"] == 32   # qk_nope + qk_rope, v_head
    assert names["blk.2.attn_kv_b.weight"][1:3] == ([128, 4 * (32 + 32)], 0)               # kv_lora x heads (nope + v), F32

    tokens = [5, 77, 300, 12, 450, 9]
    ref, ref_split = Reference(joint).run(tokens), Reference(split).run(tokens)
    n_vocab = ref.logits.shape[1]
    assert np.abs(ref.logits - ref_split.logits).max() < 1e-9 * ec.spread(ref.logits[-1])   # the same weights
    margins = ref.margins[np.isfinite(ref.margins)]
    assert margins.min() > 1e-3, margins.min()
    eng = ec.Engine(str(cli_path))
    for exact in (False, True):
        runs = {(p, io): eng.positions(p, tokens, n_vocab, exact=exact, batch=1, extra=("--all", "--io-mode", io))[1]
                for p in (split, joint) for io in ("mmap", "pread")}
        assert np.array_equal(runs[(joint, "mmap")], runs[(joint, "pread")]), exact
        if quant == "f32":
            assert np.array_equal(runs[(split, "mmap")], runs[(joint, "mmap")]), exact
        if exact:
            for i in range(len(tokens)):
                ec.compare_exact(runs[(split, "mmap")][i], runs[(joint, "mmap")][i], f"{quant} split / joint: position {i}")
                ec.compare_exact(ref.logits[i], runs[(joint, "mmap")][i], f"{quant} attn_kv_b --exact: position {i}")
