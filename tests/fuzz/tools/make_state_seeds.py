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


if __name__ == "__main__":
    main(sys.argv[1])
