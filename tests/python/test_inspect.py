"""`moestream inspect --json` reports byte counts equal to sums computed
independently from the tensor table by the reference reader, and the C API
behind it handles bad arguments."""
import ctypes
import json
import os
import re
import subprocess

import pytest

from reference.gguf_reader import GGUFReader
from tools.make_model import ModelSpec, make_model

EXPERT_NAME = re.compile(r"^blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$")


@pytest.fixture(scope="module")
def lib():
    path = os.environ.get("MOESTREAM_LIB")
    if not path:
        pytest.skip("MOESTREAM_LIB not set (run through ctest)")
    lib = ctypes.CDLL(path)
    lib.moestream_type_name.restype = ctypes.c_char_p
    lib.moestream_io_mode_name.restype = ctypes.c_char_p
    lib.moestream_last_error.restype = ctypes.c_char_p
    return lib


def run_cli(cli, *args):
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=120)


def inspect_json(cli, path, *extra):
    r = run_cli(cli, "inspect", path, "--json", *extra)
    assert r.returncode == 0, r.stderr
    # exactly one JSON object on stdout
    return json.loads(r.stdout)


def reference_sums(path):
    r = GGUFReader(path)
    total = dense = expert = 0
    per_layer = {}
    per_expert = {}
    types = {}
    for t in r.tensors.values():
        total += t.nbytes
        types[t.type] = types.get(t.type, 0) + 1
        m = EXPERT_NAME.match(t.name)
        if m and len(t.ne) == 3:
            layer = int(m.group(1))
            expert += t.nbytes
            per_layer[layer] = per_layer.get(layer, 0) + t.nbytes
            per_expert[layer] = per_expert.get(layer, 0) + t.nbytes // t.ne[2]
        else:
            dense += t.nbytes
    return {
        "reader": r,
        "total_bytes": total,
        "dense_bytes": dense,
        "expert_bytes": expert,
        "expert_bytes_per_layer": max(per_layer.values()),
        "expert_bytes_per_expert": max(per_expert.values()),
        "n_tensors": len(r.tensors),
        "types": types,
    }


SPECS = {
    "qwen3moe-q4_k_m": ModelSpec(arch="qwen3moe", n_embd=256, n_layer=3, n_head=4, n_head_kv=2, n_expert=8,
                                 n_expert_used=2, n_ff_expert=256, n_vocab=320, quant_mix="q4_k_m", seed=3),
    "qwen3moe-mixed": ModelSpec(arch="qwen3moe", n_embd=128, n_layer=2, n_expert=4, n_ff_expert=64,
                                quant_mix="mixed", tie_output=True, seed=4),
    "llama-q8_0": ModelSpec(arch="llama", n_embd=128, n_layer=2, n_head=4, n_head_kv=2, n_expert=4,
                            n_expert_used=2, n_ff_expert=96, quant_mix="q8_0", seed=5),
    "olmoe-f16": ModelSpec(arch="olmoe", n_embd=64, n_layer=2, n_expert=8, n_expert_used=4, n_ff_expert=32,
                           quant_mix="f16", seed=6),
    "qwen2moe-q5_0": ModelSpec(arch="qwen2moe", n_embd=128, n_layer=2, n_expert=4, n_ff_expert=64,
                               quant_mix="q5_0", seed=7),
}


@pytest.mark.parametrize("key", sorted(SPECS))
def test_inspect_json_matches_reference_sums(cli_path, lib, tmp_path, key):
    spec = SPECS[key]
    path = tmp_path / f"{key}.gguf"
    make_model(path, spec)
    ref = reference_sums(path)
    info = inspect_json(cli_path, path)
    s = spec.resolved()

    for field in ("total_bytes", "dense_bytes", "expert_bytes", "expert_bytes_per_layer",
                  "expert_bytes_per_expert", "n_tensors"):
        assert info[field] == ref[field], field
    assert info["file_bytes"] == os.path.getsize(path)
    assert info["dense_bytes"] + info["expert_bytes"] == info["total_bytes"]
    assert info["expert_bytes"] <= info["expert_bytes_per_layer"] * s.n_layer
    assert info["expert_bytes_per_layer"] <= info["expert_bytes_per_expert"] * s.n_expert
    if s.quant_mix != "mixed":  # every layer alike: the maxima are the per-layer values
        assert info["expert_bytes"] == info["expert_bytes_per_layer"] * s.n_layer
        assert info["expert_bytes_per_layer"] == info["expert_bytes_per_expert"] * s.n_expert
    expected_types = {lib.moestream_type_name(t).decode(): n for t, n in ref["types"].items()}
    assert info["tensor_count_by_type"] == expected_types

    assert info["architecture"] == s.arch
    assert info["n_embd"] == s.n_embd
    assert info["n_layer"] == s.n_layer
    assert info["n_head"] == s.n_head
    assert info["n_head_kv"] == s.n_head_kv
    assert info["head_dim"] == s.head_dim
    assert info["n_expert"] == s.n_expert
    assert info["n_expert_used"] == s.n_expert_used
    assert info["n_ff_expert"] == s.n_ff_expert
    assert info["n_ff_shared"] == (s.n_ff_shared or 0)
    assert info["n_vocab"] == ref["reader"].tensors["token_embd.weight"].ne[1]
    assert info["n_ctx_train"] == s.n_ctx
    assert info["name"] == (ref["reader"].get("general.name") or "")


def test_dense_bytes_count_the_matrices_open_builds_from_attn_kv_b(cli_path, binding, tmp_path):
    """deepseek2 converted before absorbed latent attention (one attn_kv_b a layer, Q8_0 here): open
    builds attn_k_b (the key rows transposed, F32) and attn_v_b (the value rows, Q8_0) from it and
    keeps those instead, so the resident dense bytes are the file's other dense tensors plus the
    built matrices, in inspect and in the opened model alike; the sizes are the absorbed form's."""
    spec = ModelSpec(arch="deepseek2", n_embd=128, n_layer=2, n_head=4, n_expert=4, n_ff_expert=64,
                     quant_mix="q8_0", seed=8, joint_kv_b=True)
    path = tmp_path / "ds-kv-b.gguf"
    make_model(path, spec)
    ref, s = reference_sums(path), spec.resolved()
    kv_b = sum(t.nbytes for t in ref["reader"].tensors.values() if t.name.endswith(".attn_kv_b.weight"))
    assert kv_b > 0 and ref["reader"].tensors["blk.0.attn_kv_b.weight"].type == 8   # Q8_0
    built = s.n_layer * s.n_head * (s.kv_lora_rank * s.mla_nope * 4 + s.mla_v * s.kv_lora_rank // 32 * 34)
    info = inspect_json(cli_path, path)
    assert info["dense_bytes"] == ref["dense_bytes"] - kv_b + built
    assert info["total_bytes"] == ref["total_bytes"] and info["expert_bytes"] == ref["expert_bytes"]
    assert (info["n_head_kv"], info["head_dim"]) == (1, s.kv_lora_rank + s.mla_rope)
    ctx = binding.Context(str(path), io_mode="pread")
    try:
        assert ctx.info["dense_bytes"] == info["dense_bytes"]
    finally:
        ctx.close()


def test_budget_drives_the_io_mode(cli_path, tmp_path):
    path = tmp_path / "m.gguf"
    make_model(path, SPECS["qwen3moe-q4_k_m"])
    roomy = inspect_json(cli_path, path, "--memory-budget", "64GiB")
    assert roomy["io_mode"] == "mmap"
    assert "fits budget 64.0 GiB" in roomy["io_mode_reason"]
    tight = inspect_json(cli_path, path, "--memory-budget", "1KiB")
    assert tight["io_mode"] in ("direct", "pread")
    assert "too small" in tight["io_mode_reason"]
    env = dict(os.environ, MOESTREAM_IO_MODE="pread")
    r = subprocess.run([str(cli_path), "inspect", str(path), "--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["io_mode"] == "pread"


def test_a_zero_budget_is_the_automatic_one(cli_path, tmp_path):
    # As for the commands that open a model and for moestream_inspect itself.
    path = tmp_path / "m.gguf"
    make_model(path, SPECS["qwen3moe-q4_k_m"])
    zero, none = inspect_json(cli_path, path, "--memory-budget", "0"), inspect_json(cli_path, path)
    # The reason names the automatic budget, a share of the memory available at that moment.
    assert zero.pop("io_mode_reason").split(" budget ")[0] == none.pop("io_mode_reason").split(" budget ")[0]
    assert zero == none and zero["memory_budget"] == 0
    r = run_cli(cli_path, "inspect", path, "--memory-budget", "0")
    assert r.returncode == 0 and "(budget auto)" in r.stdout, r.stderr


def test_text_output_names_the_essentials(cli_path, tmp_path):
    path = tmp_path / "m.gguf"
    make_model(path, SPECS["llama-q8_0"])
    r = run_cli(cli_path, "inspect", path, "--memory-budget", "8GiB")
    assert r.returncode == 0, r.stderr
    for word in ("architecture     llama", "dense", "experts", "per expert", "I/O mode", "q8_0"):
        assert word in r.stdout


def test_cli_errors(cli_path, tmp_path):
    missing = tmp_path / "absent.gguf"
    r = run_cli(cli_path, "inspect", missing)
    assert r.returncode == 1 and "absent.gguf" in r.stderr
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    r = run_cli(cli_path, "inspect", junk, "--json")
    assert r.returncode == 1 and "bad format" in r.stderr and r.stdout == ""
    path = tmp_path / "m.gguf"
    make_model(path, SPECS["olmoe-f16"])
    for args in (["--memory-budget", "lots"], ["--memory-budget", "-1"], ["--bogus"], [], [path, path]):
        r = run_cli(cli_path, "inspect", *([] if args == [] or args == [path, path] else [path]), *args)
        assert r.returncode == 2, args
    r = run_cli(cli_path, "inspect", "--help")
    assert r.returncode == 0 and "--memory-budget" in r.stdout


class ModelInfoPrefix(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)]


def test_c_api_argument_checks(lib, tmp_path):
    path = tmp_path / "m.gguf"
    make_model(path, SPECS["olmoe-f16"])
    buf = ctypes.create_string_buffer(4096)  # larger than moestream_model_info
    lib.moestream_model_info_init(buf)
    size = ModelInfoPrefix.from_buffer(buf).struct_size
    assert 0 < size < 4096
    assert lib.moestream_inspect(os.fsencode(path), ctypes.c_uint64(0), buf) == 0
    assert lib.moestream_inspect(None, ctypes.c_uint64(0), buf) == -1
    assert b"model_path" in lib.moestream_last_error()
    assert lib.moestream_inspect(os.fsencode(path), ctypes.c_uint64(0), None) == -1
    ModelInfoPrefix.from_buffer(buf).struct_size = 8
    assert lib.moestream_inspect(os.fsencode(path), ctypes.c_uint64(0), buf) == -1
    assert b"struct_size" in lib.moestream_last_error()
    lib.moestream_model_info_init(None)  # must not crash
    assert lib.moestream_type_name(12) == b"q4_K"
    assert lib.moestream_type_name(4) == b"?"
    assert lib.moestream_type_name(-1) == b"?"
    assert lib.moestream_type_name(1 << 20) == b"?"
    assert [lib.moestream_io_mode_name(m) for m in range(4)] == [b"auto", b"mmap", b"direct", b"pread"]
    assert lib.moestream_io_mode_name(4) == b"?"


def test_inspect_predicts_the_io_mode_open_picks_at_the_boundary(cli_path, tmp_path, binding):
    # The budget where an opened context switches from streaming to mmap must
    # be the one where inspect does: both count the KV cache and the batch
    # scratch of a context opened with default parameters.
    moestream = binding
    path = tmp_path / "m.gguf"
    make_model(path, SPECS["qwen3moe-q4_k_m"])
    file_bytes = inspect_json(cli_path, path)["file_bytes"]

    def open_mode(budget):
        try:
            with moestream.Context(path, memory_budget=budget) as ctx:
                return ctx.stats()["io_mode"]
        except moestream.Error as e:  # a streaming budget too small for the runtime
            assert "budget" in str(e)
            return "refused"

    lo, hi = file_bytes, file_bytes + (1 << 30)  # streaming at lo (the runtime needs room), mmap at hi
    assert open_mode(hi) == "mmap"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if open_mode(mid) == "mmap":
            hi = mid
        else:
            lo = mid
    assert inspect_json(cli_path, path, "--memory-budget", hi)["io_mode"] == "mmap"
    assert inspect_json(cli_path, path, "--memory-budget", lo)["io_mode"] in ("direct", "pread")
