"""GGUF writer (tools/gguf_writer.py) -> reader (reference/gguf_reader.py) round trips, and the
structure of generated models (tools/make_model.py)."""
import os
import struct

import numpy as np
import pytest

from reference.gguf_reader import GGUFError, GGUFReader
from tools import make_model as mm
from tools.gguf_writer import BLOCK_GEOMETRY, GGUFWriter, GgmlType, ValueType, pad_to
from tools.quants import ALL_TYPES, random_blocks

VOCAB_DIR = "/work/shared/vocab"


def _metadata_cases():
    return [
        ("k.u8", ValueType.UINT8, 255, None), ("k.i8", ValueType.INT8, -128, None),
        ("k.u16", ValueType.UINT16, 65535, None), ("k.i16", ValueType.INT16, -32768, None),
        ("k.u32", ValueType.UINT32, 4294967295, None), ("k.i32", ValueType.INT32, -2147483648, None),
        ("k.f32", ValueType.FLOAT32, 1.5, None), ("k.bool_t", ValueType.BOOL, True, None),
        ("k.bool_f", ValueType.BOOL, False, None), ("k.str", ValueType.STRING, "héllo ▁ wörld", None),
        ("k.empty", ValueType.STRING, "", None), ("k.u64", ValueType.UINT64, 2 ** 64 - 1, None),
        ("k.i64", ValueType.INT64, -2 ** 63, None), ("k.f64", ValueType.FLOAT64, 1e-300, None),
        ("a.u8", ValueType.ARRAY, [0, 1, 255], ValueType.UINT8),
        ("a.i8", ValueType.ARRAY, [-1, 2], ValueType.INT8),
        ("a.u16", ValueType.ARRAY, [1, 65535], ValueType.UINT16),
        ("a.i16", ValueType.ARRAY, [-5, 5], ValueType.INT16),
        ("a.u32", ValueType.ARRAY, [7, 8, 9], ValueType.UINT32),
        ("a.i32", ValueType.ARRAY, [1, -1, 3], ValueType.INT32),
        ("a.f32", ValueType.ARRAY, [0.25, -2.0], ValueType.FLOAT32),
        ("a.bool", ValueType.ARRAY, [True, False, True], ValueType.BOOL),
        ("a.str", ValueType.ARRAY, ["a", "", "Ġthe", "日本"], ValueType.STRING),
        ("a.u64", ValueType.ARRAY, [2 ** 63], ValueType.UINT64),
        ("a.i64", ValueType.ARRAY, [-2 ** 40], ValueType.INT64),
        ("a.f64", ValueType.ARRAY, [3.25], ValueType.FLOAT64),
        ("a.empty", ValueType.ARRAY, [], ValueType.INT32),
    ]


@pytest.mark.parametrize("alignment", [32, 64, 1, 256])
def test_writer_reader_roundtrip(tmp_path, alignment):
    path = tmp_path / "rt.gguf"
    rng = np.random.default_rng(alignment)
    tensors = []
    for i, t in enumerate(ALL_TYPES):
        be = BLOCK_GEOMETRY[t][0]
        ne = [be * (1 + i % 3), 3, 2][: 1 + i % 3]
        n_blocks = int(np.prod(ne)) // be
        tensors.append((f"t{i}.{t.name}", ne, t, random_blocks(t, n_blocks, rng)))
    w = GGUFWriter(path, alignment=alignment, write_alignment_key=True)
    for key, vt, v, et in _metadata_cases():
        w.add_kv(key, vt, v, elem_type=et)
    for name, ne, t, _ in tensors:
        w.add_tensor_info(name, ne, t)
    w.write_header()
    for name, _, _, raw in tensors:
        half = raw.size // 2
        w.write_tensor_data(name, raw.reshape(-1)[:half])   # chunked writes
        w.write_tensor_data(name, raw.reshape(-1)[half:])
    w.close()

    r = GGUFReader(path)
    assert r.version == 3 and r.alignment == alignment
    for key, vt, v, et in _metadata_cases():
        got = r.metadata[key]
        assert r.value_types[key] == (int(vt), None if et is None else int(et))
        if vt == ValueType.FLOAT32 or et == ValueType.FLOAT32:
            assert np.allclose(got, v)
        else:
            assert got == v
    assert r.data_offset % alignment == 0
    expected_offset = 0
    for name, ne, t, raw in tensors:
        info = r.tensors[name]
        assert info.ne == tuple(ne) and info.type == int(t)
        assert info.offset == expected_offset        # packed in info order
        assert np.array_equal(np.asarray(r.raw(name)), raw.reshape(-1))
        expected_offset += pad_to(raw.size, alignment)
    assert os.path.getsize(path) == r.data_offset + expected_offset


def test_header_bytes_are_little_endian_v3(tmp_path):
    path = tmp_path / "h.gguf"
    w = GGUFWriter(path)
    w.add_uint32("x", 7)
    w.add_tensor_info("t", [32], GgmlType.F32)
    w.write_header()
    w.write_tensor_data("t", np.zeros(32, np.float32))
    w.close()
    b = path.read_bytes()
    assert b[:4] == b"GGUF"
    assert struct.unpack_from("<IQQ", b, 4) == (3, 1, 1)
    assert struct.unpack_from("<Q", b, 24)[0] == 1 and b[32:33] == b"x"
    assert len(b) % 32 == 0


def test_writer_rejects_misuse(tmp_path):
    w = GGUFWriter(tmp_path / "bad.gguf")
    w.add_uint32("a", 1)
    with pytest.raises(ValueError):
        w.add_uint32("a", 2)                                    # duplicate key
    with pytest.raises(ValueError):
        w.add_tensor_info("q", [48], GgmlType.Q4_0)             # not a multiple of the block size
    w.add_tensor_info("t1", [32], GgmlType.F32)
    w.add_tensor_info("t2", [32], GgmlType.F32)
    w.write_header()
    with pytest.raises(RuntimeError):
        w.write_tensor_data("t2", np.zeros(32, np.float32))     # out of order
    with pytest.raises(ValueError):
        w.write_tensor_data("t1", np.zeros(33, np.float32))     # too long
    w.write_tensor_data("t1", np.zeros(32, np.float32))
    with pytest.raises(RuntimeError):
        w.close()                                                # t2 never written


def test_reader_rejects_wrong_offsets(tmp_path):
    path = tmp_path / "off.gguf"
    w = GGUFWriter(path)
    w.add_tensor_info("a", [32], GgmlType.F32)
    w.add_tensor_info("b", [32], GgmlType.F32)
    w.write_header()
    w.write_tensor_data("a", np.ones(32, np.float32))
    w.write_tensor_data("b", np.ones(32, np.float32))
    w.close()
    b = bytearray(path.read_bytes())
    # tensor info of "b": name(8+1) n_dims(4) ne(8) type(4) offset(8); patch b's offset to 0
    pos = b.index(b"\x01\x00\x00\x00\x00\x00\x00\x00b") + 9 + 4 + 8 + 4
    assert struct.unpack_from("<Q", b, pos)[0] == 128
    struct.pack_into("<Q", b, pos, 0)
    path.write_bytes(bytes(b))
    with pytest.raises(GGUFError, match="offset"):
        GGUFReader(path)


# ---- generated models -------------------------------------------------------------------------

EXPECTED_KEYS = {
    "qwen3moe": {"expert_feed_forward_length", "feed_forward_length"},
    "llama": {"feed_forward_length", "rope.dimension_count", "vocab_size"},
    "olmoe": {"feed_forward_length"},
    "qwen2moe": {"expert_feed_forward_length", "expert_shared_feed_forward_length", "feed_forward_length"},
    "gpt-oss": {"expert_feed_forward_length", "attention.sliding_window", "rope.scaling.type", "rope.scaling.factor",
                "rope.scaling.original_context_length"},
}
COMMON_KEYS = {"block_count", "context_length", "embedding_length", "attention.head_count",
               "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "rope.freq_base",
               "expert_count", "expert_used_count"}
U32_KEYS = {"block_count", "context_length", "embedding_length", "feed_forward_length", "attention.head_count",
            "attention.head_count_kv", "expert_count", "expert_used_count", "expert_feed_forward_length",
            "expert_shared_feed_forward_length", "rope.dimension_count", "vocab_size",
            "attention.key_length", "attention.value_length", "attention.sliding_window",
            "rope.scaling.original_context_length"}
STRING_KEYS = {"rope.scaling.type"}


@pytest.mark.parametrize("arch", [a for a in mm.ARCHS if a != "deepseek2"])   # latent attention: below
def test_generated_model_keys_and_shapes(tmp_path, arch):
    spec = mm.ModelSpec(arch=arch, n_embd=128, n_layer=2, n_head=4, n_head_kv=2, head_dim=48, n_expert=5,
                        n_expert_used=2, n_ff_expert=96, n_vocab=300, quant_mix="q8_0")
    info = mm.make_model(tmp_path / "m.gguf", spec)
    r = GGUFReader(tmp_path / "m.gguf")
    assert r.metadata["general.architecture"] == arch
    keys = {k[len(arch) + 1:] for k in r.metadata if k.startswith(arch + ".")}
    assert COMMON_KEYS | EXPECTED_KEYS[arch] | {"attention.key_length", "attention.value_length"} == keys
    for k in keys:
        vt = r.value_types[f"{arch}.{k}"][0]
        assert vt == (4 if k in U32_KEYS else 8 if k in STRING_KEYS else 6), k   # UINT32 / STRING / FLOAT32
    assert r.metadata[f"{arch}.attention.key_length"] == 48
    assert r.metadata["general.file_type"] == 7
    t = r.tensors
    assert t["blk.1.attn_q.weight"].ne == (128, 4 * 48)
    assert t["blk.1.attn_k.weight"].ne == (128, 2 * 48)
    assert t["blk.1.attn_output.weight"].ne == (4 * 48, 128)
    assert t["blk.0.ffn_gate_inp.weight"].ne == (128, 5) and t["blk.0.ffn_gate_inp.weight"].type == 0
    assert t["blk.0.ffn_up_exps.weight"].ne == (128, 96, 5)
    assert t["blk.0.ffn_down_exps.weight"].ne == (96, 128, 5)
    assert t["token_embd.weight"].ne == (128, 300)
    if arch == "qwen3moe":
        assert t["blk.0.attn_q_norm.weight"].ne == (48,)
    if arch == "olmoe":
        assert t["blk.0.attn_q_norm.weight"].ne == (4 * 48,) and t["blk.0.attn_k_norm.weight"].ne == (2 * 48,)
    if arch == "qwen2moe":
        assert t["blk.0.attn_k.bias"].ne == (96,)
        assert t["blk.0.ffn_gate_inp_shexp.weight"].ne == (128,)
        assert t["blk.0.ffn_down_shexp.weight"].ne == (192, 128)
        assert r.metadata["qwen2moe.expert_shared_feed_forward_length"] == 192
    if arch == "gpt-oss":
        assert t["blk.0.attn_output.bias"].ne == (128,) and t["blk.0.attn_sinks.weight"].ne == (4,)
        assert t["blk.1.ffn_gate_exps.bias"].ne == (96, 5) and t["blk.1.ffn_down_exps.bias"].ne == (128, 5)
        assert t["blk.1.ffn_up_exps.weight"].type == GgmlType.MXFP4 and "blk.1.ffn_norm.weight" not in t
        assert r.metadata["gpt-oss.rope.scaling.type"] == "yarn"
    assert set(info["tensors"]) == set(t)


def test_quant_mix_types_and_fallbacks(tmp_path):
    # n_embd 128 is not a multiple of 256: k-quants fall back as llama-quantize does
    mm.make_model(tmp_path / "a.gguf", arch="qwen3moe", n_embd=128, n_ff_expert=256, quant_mix="q4_k_m")
    t = GGUFReader(tmp_path / "a.gguf").tensors
    assert t["blk.0.ffn_gate_exps.weight"].type == GgmlType.Q5_0      # Q4_K -> Q5_0
    assert t["blk.0.ffn_down_exps.weight"].type == GgmlType.Q6_K      # ne0 = 256 keeps Q6_K
    assert t["blk.0.attn_v.weight"].type == GgmlType.Q8_0             # Q6_K -> Q8_0
    assert t["blk.0.attn_norm.weight"].type == GgmlType.F32
    assert t["blk.0.ffn_gate_inp.weight"].type == GgmlType.F32
    mm.make_model(tmp_path / "b.gguf", arch="llama", n_embd=256, n_ff_expert=256, quant_mix="q5_k_m")
    t = GGUFReader(tmp_path / "b.gguf").tensors
    assert t["blk.0.ffn_up_exps.weight"].type == GgmlType.Q5_K
    assert t["blk.0.ffn_down_exps.weight"].type == GgmlType.Q6_K
    assert t["output.weight"].type == GgmlType.Q6_K
    assert t["blk.0.attn_q.weight"].type == GgmlType.Q5_K
    mm.make_model(tmp_path / "c.gguf", arch="qwen2moe", n_embd=256, n_ff_expert=256, n_layer=2, quant_mix="mixed")
    types = {i.type for i in GGUFReader(tmp_path / "c.gguf").tensors.values()}
    assert types == {int(x) for x in mm.MIXED_CYCLE}                    # all 11 types of the cycle present


def test_generation_is_deterministic_per_seed(tmp_path):
    kw = dict(arch="olmoe", n_embd=64, n_layer=1, quant_mix="q4_1", tokenizer="synthetic", n_vocab=300)
    mm.make_model(tmp_path / "a.gguf", seed=3, **kw)
    mm.make_model(tmp_path / "b.gguf", seed=3, **kw)
    mm.make_model(tmp_path / "c.gguf", seed=4, **kw)
    a, b, c = ((tmp_path / n).read_bytes() for n in ("a.gguf", "b.gguf", "c.gguf"))
    assert a == b and a != c and len(a) == len(c)


def test_synthetic_tokenizer_is_consistent(tmp_path):
    mm.make_model(tmp_path / "t.gguf", arch="qwen3moe", n_embd=64, n_layer=1, tokenizer="synthetic", n_vocab=700)
    r = GGUFReader(tmp_path / "t.gguf")
    md = r.metadata
    tokens, types, merges = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"], md["tokenizer.ggml.merges"]
    assert md["tokenizer.ggml.model"] == "gpt2"
    assert len(tokens) == len(types) == 700 == r.tensors["token_embd.weight"].ne[1]
    assert len(set(tokens)) == 700
    vocab = set(tokens)
    for m in merges:
        a, b = m.split(" ", 1)
        assert a in vocab and b in vocab and a + b in vocab
    eos = md["tokenizer.ggml.eos_token_id"]
    assert tokens[eos] == "<|endoftext|>" and types[eos] == 3
    assert r.value_types["tokenizer.ggml.eos_token_id"][0] == 4
    assert r.value_types["tokenizer.ggml.token_type"] == (9, 5)


VOCAB_FILES = sorted(f for f in os.listdir(VOCAB_DIR) if f.endswith(".gguf")) if os.path.isdir(VOCAB_DIR) else []


@pytest.mark.parametrize("vocab", VOCAB_FILES or [None])
def test_copy_tokenizer_from_a_vocab_gguf(tmp_path, vocab):
    """--tokenizer copy:VOCAB.gguf takes every tokenizer.* key with its value and type, and the
    vocab size follows the copied token list (embedding, output, llama.vocab_size)."""
    if vocab is None:
        pytest.skip(f"no vocab GGUF files in {VOCAB_DIR}")
    src = os.path.join(VOCAB_DIR, vocab)
    out = tmp_path / "c.gguf"
    mm.make_model(out, arch="llama", n_embd=64, n_layer=1, n_expert=3, n_expert_used=1, n_ff_expert=32,
                  n_vocab=10, quant_mix="q8_0", tokenizer="copy:" + src)
    r, s = GGUFReader(out), GGUFReader(src)
    copied = [k for k in s.metadata if k.startswith("tokenizer.")]
    assert "tokenizer.ggml.tokens" in copied and "tokenizer.ggml.model" in copied
    assert sorted(k for k in r.metadata if k.startswith("tokenizer.")) == sorted(copied)
    for k in copied:
        assert r.metadata[k] == s.metadata[k] and r.value_types[k] == s.value_types[k], k
    n = len(s.metadata["tokenizer.ggml.tokens"])
    assert r.tensors["token_embd.weight"].ne[1] == n == r.tensors["output.weight"].ne[1]
    assert r.metadata["llama.vocab_size"] == n
    assert r.metadata["general.architecture"] == "llama"          # not the vocab file's


def test_copy_tokenizer_cli_and_missing_source(tmp_path, source_dir):
    import subprocess
    import sys
    tool = str(source_dir / "tests/tools/make_model.py")
    missing = subprocess.run([sys.executable, tool, "--out", str(tmp_path / "x.gguf"), "--n-embd", "64",
                              "--tokenizer", "copy:" + str(tmp_path / "nope.gguf")], capture_output=True, text=True)
    assert missing.returncode != 0 and "nope.gguf" in missing.stderr
    if not VOCAB_FILES:
        pytest.skip(f"no vocab GGUF files in {VOCAB_DIR}")
    src = os.path.join(VOCAB_DIR, VOCAB_FILES[0])
    subprocess.run([sys.executable, tool, "--arch", "qwen3moe", "--out", str(tmp_path / "c.gguf"), "--n-embd", "64",
                    "--n-layer", "1", "--tokenizer", "copy:" + src], check=True, capture_output=True)
    r = GGUFReader(tmp_path / "c.gguf")
    assert r.metadata["tokenizer.ggml.tokens"] == GGUFReader(src).metadata["tokenizer.ggml.tokens"]


def test_cli_writes_a_model(tmp_path, source_dir):
    import subprocess
    import sys
    out = tmp_path / "cli.gguf"
    subprocess.run([sys.executable, str(source_dir / "tests/tools/make_model.py"), "--arch", "qwen2moe",
                    "--out", str(out), "--n-embd", "64", "--n-layer", "1", "--n-expert", "3",
                    "--n-ff-shared", "64", "--quant-mix", "q5_1", "--seed", "9"], check=True,
                   capture_output=True)
    r = GGUFReader(out)
    assert r.metadata["qwen2moe.expert_shared_feed_forward_length"] == 64
    assert r.tensors["blk.0.attn_q.weight"].type == GgmlType.Q5_1


def test_big_expert_tensors_use_the_row_pool(tmp_path, monkeypatch):
    # Shrink the thresholds so the pooled path (used for GiB-sized files) is exercised quickly.
    monkeypatch.setattr(mm, "BIG_TENSOR_ELEMENTS", 1 << 12)
    monkeypatch.setattr(mm, "POOL_ELEMENTS", 1 << 13)
    mm.make_model(tmp_path / "p.gguf", arch="qwen3moe", n_embd=64, n_layer=1, n_expert=4, n_ff_expert=64,
                  quant_mix="q8_0")
    r = GGUFReader(tmp_path / "p.gguf")
    down = r.tensor("blk.0.ffn_down_exps.weight")          # [n_expert, n_embd, n_ff]
    assert np.all(down[:, 64 - mm.CODE_CHANNELS:, :] == 0)  # code channels never written
    want = mm.RESIDUAL_SCALE / np.sqrt(64)                   # a layer that writes the residual stream
    assert 0.7 * want < down[:, :32].std() < 1.3 * want and not np.array_equal(down[0], down[1])
    emb = r.tensor("token_embd.weight")                      # [n_vocab, n_embd], pooled too
    codes = emb[:, 64 - mm.CODE_CHANNELS:]
    assert np.array_equal(np.argmax(codes, axis=1), np.arange(emb.shape[0]) % mm.CODE_CHANNELS)
    assert np.all(np.sort(codes, axis=1)[:, :-1] == 0) and np.allclose(codes.max(axis=1), mm.CODE_VALUE, rtol=1e-3)
    assert np.allclose(np.abs(emb[:, :32]), 1.0, rtol=1e-3)                 # random signs


def test_generated_deepseek2_has_latent_attention_and_a_dense_lead(tmp_path):
    spec = mm.ModelSpec(arch="deepseek2", n_embd=128, n_layer=2, n_head=4, n_expert=4, n_expert_used=2,
                        n_ff_expert=96, n_vocab=300, yarn_factor=4.0, yarn_orig_ctx=64)
    mm.make_model(tmp_path / "m.gguf", spec)
    r = GGUFReader(tmp_path / "m.gguf")
    md, t = r.metadata, r.tensors
    assert md["deepseek2.attention.key_length"] == 64 + 16 and md["deepseek2.attention.value_length"] == 64
    assert md["deepseek2.attention.head_count_kv"] == 1 and md["deepseek2.leading_dense_block_count"] == 1
    assert md["deepseek2.rope.scaling.type"] == "yarn" and md["deepseek2.rope.scaling.factor"] == 4.0
    assert md["deepseek2.rope.scaling.yarn_log_multiplier"] == pytest.approx(0.1 * spec.yarn_mscale_all_dim)
    assert t["blk.0.attn_kv_a_mqa.weight"].ne == (128, 64 + 16)
    assert t["blk.0.attn_k_b.weight"].ne == (32, 64, 4) and t["blk.0.attn_v_b.weight"].ne == (64, 32, 4)
    assert t["blk.0.ffn_up.weight"].ne == (128, 192) and "blk.0.ffn_gate_inp.weight" not in t
    assert t["blk.1.ffn_up_exps.weight"].ne == (128, 96, 4) and t["blk.1.exp_probs_b.bias"].ne == (4,)
    assert t["blk.1.ffn_up_shexp.weight"].ne == (128, 96) and "blk.1.ffn_gate_inp_shexp.weight" not in t
