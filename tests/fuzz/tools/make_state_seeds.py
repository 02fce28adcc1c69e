"""Writes the seed corpus for fuzz_state: real states saved by a context of a
tiny generated model (f16 and f32 KV caches, empty and partly filled contexts).
Run by hand from the build tree; the outputs are committed:

    cd tests && MOESTREAM_LIB=BUILD/libmoestream.so PYTHONPATH=../python:. \\
        /usr/bin/python3 fuzz/tools/make_state_seeds.py fuzz/corpus/state
"""
import pathlib
import sys
import tempfile

import moestream
from tools.make_model import ModelSpec, make_model


def main(out_dir):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ("qwen3moe", "olmoe"):
            model = pathlib.Path(tmp) / f"{arch}.gguf"
            make_model(model, ModelSpec(arch=arch, n_embd=64, n_layer=2, n_head=2,
                                        n_head_kv=2 if arch == "olmoe" else 1, n_expert=4,
                                        n_expert_used=2, n_ff_expert=32, n_vocab=64, n_ctx=16, seed=3))
            for exact in (False, True):
                with moestream.Context(model, n_ctx=8, n_threads=1, exact=exact, profile_path="") as ctx:
                    kv = "f32" if exact else "f16"
                    ctx.save_state(out / f"{arch}_{kv}_empty.state")
                    ctx.step([1, 2, 3], logits=False)
                    ctx.save_state(out / f"{arch}_{kv}_3tokens.state")
                    ctx.step([60, 7, 8, 9, 10], logits=False)
                    ctx.save_state(out / f"{arch}_{kv}_full.state")
                    if exact:
                        continue
                    with moestream.Sampler(temperature=0.9, top_k=5, seed=17, repeat_penalty=1.2,
                                           penalty_last_n=4) as sampler:
                        ctx.reset()
                        ctx.step([1, 2, 3], logits=False)
                        sampler.accept([1, 2, 3])
                        saved = out / f"{arch}_{kv}_3tokens_sampler_history.state"
                        ctx.save_state(saved, sampler)
                        truncated_sampler_section(saved, out / f"{arch}_{kv}_3tokens_sampler_short.state")
                        version1_sampler_section(saved, out / f"{arch}_{kv}_3tokens_sampler.state")
                    # The window of the whole history (penalty_last_n -1) and
                    # penalties that favour seen tokens (negative).
                    with moestream.Sampler(temperature=0.7, top_k=5, seed=23, presence_penalty=-0.5,
                                           frequency_penalty=-0.25, penalty_last_n=-1) as sampler:
                        ctx.reset()
                        ctx.step([4, 5, 4], logits=False)
                        sampler.accept([4, 5, 4])
                        ctx.save_state(out / f"{arch}_{kv}_3tokens_sampler_whole_history.state", sampler)
        # Format version 2: gpt-oss's sliding layer 0 keeps the last n_swa - 1 = 1 row.
        model = pathlib.Path(tmp) / "gpt-oss.gguf"
        make_model(model, ModelSpec(arch="gpt-oss", n_embd=64, n_layer=2, n_head=2, n_head_kv=1, n_expert=4,
                                    n_expert_used=2, n_ff_expert=32, n_vocab=64, n_ctx=16, n_swa=2, seed=3))
        with moestream.Context(model, n_ctx=8, n_threads=1, profile_path="") as ctx:
            ctx.step([1, 2, 3, 4, 5, 6], logits=False)
            ctx.save_state(out / "gpt-oss_f16_window.state")
        with_window_layout(out / "gpt-oss_f16_window.state", out / "gpt-oss_f16_window_layout.state", window=2)


def with_window_layout(src, dst, window):
    """A copy whose kv_layout carries the bits fuzz_state reads as "the even
    layers slide with this window" (0x200 | (window - 1) << 12), so that its
    first pass checks the rows of a version 2 file; the checksum is left stale."""
    data = bytearray(src.read_bytes())
    assert int.from_bytes(data[8:12], "little") == 2
    layout = int.from_bytes(data[52:56], "little") | 0x200 | (window - 1) << 12
    data[52:56] = layout.to_bytes(4, "little")
    dst.write_bytes(bytes(data))


def last_section(data):
    """The offset of the last section's header (the sampler's in these files)."""
    at, start = 80, None
    for _ in range(int.from_bytes(data[60:64], "little")):
        start = at
        length = int.from_bytes(data[at + 8:at + 16], "little")
        at += 16 + length + (8 - length % 8) % 8
    assert int.from_bytes(data[start:start + 4], "little") == 5
    return start


def truncated_sampler_section(src, dst, keep=40):
    """A copy whose last section (the sampler's) keeps only `keep` bytes; the
    checksum is left stale (the fuzzer's second pass fixes it)."""
    data = bytearray(src.read_bytes())
    start = last_section(data)
    data[start + 8:start + 16] = keep.to_bytes(8, "little")
    del data[start + 16 + keep:]
    data += bytes((8 - keep % 8) % 8)
    data[64:72] = (len(data) - 80).to_bytes(8, "little")
    dst.write_bytes(bytes(data))


def version1_sampler_section(src, dst):
    """A copy whose sampler section is version 1 (its first 64 bytes, as
    files written before the penalties hold); the checksum is left stale."""
    data = bytearray(src.read_bytes())
    start = last_section(data)
    del data[start + 16 + 64:]
    data[start + 8:start + 16] = (64).to_bytes(8, "little")
    data[start + 16:start + 20] = (1).to_bytes(4, "little")
    data[64:72] = (len(data) - 80).to_bytes(8, "little")
    dst.write_bytes(bytes(data))


if __name__ == "__main__":
    main(sys.argv[1])
