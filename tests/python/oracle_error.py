"""Prints, for every model of the engine-vs-reference matrix, how far the engine's logits are
from the float64 reference (max |engine - ref| / spread) after 1 token, after 40 tokens in one
step and at the worst of 40 one-token steps, with what the emulated activation rounding alone
costs; last line: the worst case of each column. The figures in docs/test-oracle.md come
from here.

    cd tests/python && /usr/bin/python3 oracle_error.py ../../build/moestream [NAME_FILTER ...]
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import engine_check as ec  # noqa: E402
import test_engine_vs_reference as matrix  # noqa: E402
from reference.forward import Reference  # noqa: E402
from tools import make_model as mm  # noqa: E402


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    engine, filters = ec.Engine(argv[0]), argv[1:]
    worst = np.zeros(4)
    with tempfile.TemporaryDirectory(prefix="oracle-error-") as d:
        for (arch, mix, shape), name in zip(matrix.MATRIX, matrix.IDS):
            if filters and not any(f in name for f in filters):
                continue
            spec = matrix._spec(arch, mix, shape)
            path = os.path.join(d, name + ".gguf")
            mm.make_model(path, spec)
            tokens = [int(t) for t in np.random.default_rng(spec.seed).integers(0, spec.n_vocab, matrix.N_TOKENS)]
            ref = Reference(path).run(tokens).logits
            emu = Reference(path, act_quant=True, kv_f16=True).run(tokens).logits
            spread = ref.max(axis=1) - ref.min(axis=1)
            one = engine.logits(path, tokens[:1], spec.n_vocab)
            step = engine.logits(path, tokens, spec.n_vocab)
            every = engine.positions(path, tokens, spec.n_vocab, batch=1, extra=("--all",))[1]
            row = np.array([np.abs(one - ref[0]).max() / spread[0], np.abs(step - ref[-1]).max() / spread[-1],
                            (np.abs(every - ref).max(axis=1) / spread).max(),
                            ec.rounding_sensitivity(ref, emu).max()])
            worst = np.maximum(worst, row)
            print(f"{name:30s} after 1 {row[0]:.4f}  after 40 {row[1]:.4f}  any position {row[2]:.4f}  "
                  f"emulated rounding {row[3]:.4f}", flush=True)
            os.unlink(path)
    print(f"{'worst':30s} after 1 {worst[0]:.4f}  after 40 {worst[1]:.4f}  any position {worst[2]:.4f}  "
          f"emulated rounding {worst[3]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
