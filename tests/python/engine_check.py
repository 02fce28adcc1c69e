"""Helpers to run `moestream logits` and compare its output with the float64 reference.

Engine command (one process per evaluation):
    moestream logits -m MODEL --tokens 1,2,3 [--exact] [--batch N] --out FILE
FILE holds raw little-endian float32 logits: either the last token's (n_vocab values) or
every position's (n_tokens * n_vocab values, row-major); both are accepted.

Tolerances (all relative to the spread max-min of the reference logits of that position):
  normal mode   max |engine - ref| / spread < NORMAL_TOL, nothing added. The generated models
                are built to be insensitive to activation rounding (tools/make_model.py), and
                models_insensitive() checks that the emulated rounding alone
                (Reference(act_quant=True, kv_f16=True)) stays under ROUNDING_BUDGET (0.6 of
                NORMAL_TOL): an engine that rounds like the emulation deviates by another draw
                of the same noise, so this leaves it room under the bound. The top-1 token must agree unless the reference itself has a
                near-tie: its gap between its top-1 and the engine's top-1 is within
                2 * NORMAL_TOL of the spread (an error under the bound can flip only such a pair);
  first token   after a single token the engine follows the emulation closely (no accumulated
                rounding cascades): max |engine - emu| / spread < FIRST_TOKEN_EMU_TOL;
  exact mode    max |engine - ref| / max|ref| < EXACT_TOL;
  batching      logits for the same tokens evaluated with different --batch sizes agree within
                BATCH_TOL (normal mode) / BATCH_TOL_EXACT (exact mode).
Routing near-ties are not absorbed by tolerances: a comparison refuses to run when the
reference reports a routing margin below MIN_ROUTING_MARGIN for the evaluated tokens.
"""
from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from dataclasses import dataclass

import numpy as np
import pytest

NORMAL_TOL = 1e-2
ROUNDING_BUDGET = 0.6 * NORMAL_TOL
FIRST_TOKEN_EMU_TOL = 1e-3
EXACT_TOL = 1e-4
BATCH_TOL = 5e-3
BATCH_TOL_EXACT = 1e-5
MIN_ROUTING_MARGIN = 0.05
ENGINE_TIMEOUT_S = 120


class EngineUnsupported(Exception):
    """The engine declined the model (e.g. an architecture or type it does not implement yet)."""


@dataclass
class Engine:
    cli: str

    def run_logits(self, model, tokens, exact=False, batch=None, extra=()):
        """Runs `moestream logits`; returns float32 logits [n_positions_written, n_vocab_or_all]
        as a flat array (callers reshape with n_vocab)."""
        with tempfile.TemporaryDirectory(prefix="moestream-logits-") as d:
            out = os.path.join(d, "logits.f32")
            cmd = [self.cli, "logits", "-m", str(model), "--tokens", ",".join(str(int(t)) for t in tokens),
                   "--out", out]
            if exact:
                cmd.append("--exact")
            if batch is not None:
                cmd += ["--batch", str(batch)]
            cmd += list(extra)
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S)
            if p.returncode != 0:
                msg = (p.stderr or p.stdout).strip()
                if "unsupported" in msg.lower() or "not supported" in msg.lower():
                    raise EngineUnsupported(msg)
                raise AssertionError(f"engine failed ({p.returncode}): {' '.join(cmd)}\n{msg}")
            return np.fromfile(out, dtype="<f4")

    def positions(self, model, tokens, n_vocab, **kw) -> tuple:
        """(first position index, float64 logits [rows, n_vocab]): the last position only, or
        every position when the engine writes per-step logits."""
        flat = self.run_logits(model, tokens, **kw)
        if flat.size == n_vocab:
            return len(tokens) - 1, flat.reshape(1, n_vocab).astype(np.float64)
        if flat.size == n_vocab * len(tokens):
            return 0, flat.reshape(len(tokens), n_vocab).astype(np.float64)
        raise AssertionError(f"engine wrote {flat.size} floats; expected {n_vocab} or {n_vocab * len(tokens)}")

    def logits(self, model, tokens, n_vocab, **kw) -> np.ndarray:
        """Last position's logits (float64 [n_vocab])."""
        return self.positions(model, tokens, n_vocab, **kw)[1][-1]

    def try_positions(self, model, tokens, n_vocab, **kw):
        try:
            return self.positions(model, tokens, n_vocab, **kw)
        except EngineUnsupported as e:
            pytest.skip(f"engine does not support this model yet: {e}")


@functools.lru_cache(maxsize=None)
def logits_command_status(cli: str) -> str | None:
    """None if `moestream logits` exists, else the reason it does not."""
    try:
        p = subprocess.run([cli, "logits", "--help"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"cannot run {cli}: {e}"
    text = (p.stderr + p.stdout).lower()
    if "unknown command" in text:
        return "`moestream logits` is not implemented yet (CLI reports unknown command)"
    return None


def engine_or_skip(cli_path) -> Engine:
    reason = logits_command_status(str(cli_path))
    if reason:
        pytest.skip(reason)
    return Engine(str(cli_path))


def spread(ref: np.ndarray) -> float:
    return float(ref.max() - ref.min())


def compare_normal(ref: np.ndarray, eng: np.ndarray, what: str, tol: float = NORMAL_TOL):
    """Asserts the normal-mode criteria; returns (relative max error, top1 agreed)."""
    assert eng.shape == ref.shape, f"{what}: shape {eng.shape} vs {ref.shape}"
    assert np.all(np.isfinite(eng)), f"{what}: engine logits not finite"
    s = spread(ref)
    err = float(np.abs(eng - ref).max()) / s
    assert err < tol, f"{what}: max |engine - ref| = {err:.3g} of the logit spread (limit {tol:.3g})"
    r1, e1 = int(np.argmax(ref)), int(np.argmax(eng))
    if r1 != e1:
        gap = float(ref[r1] - ref[e1])
        assert gap <= 2 * tol * s, (f"{what}: top-1 differs (ref {r1}, engine {e1}) and the reference gap "
                                    f"{gap:.4g} is not a near-tie (limit {2 * tol * s:.4g})")
    return err, r1 == e1


def rounding_sensitivity(ref: np.ndarray, emu: np.ndarray) -> np.ndarray:
    """Per position: max |emu - ref| / spread, what emulated activation rounding alone costs."""
    return np.abs(emu - ref).max(axis=-1) / (ref.max(axis=-1) - ref.min(axis=-1))


def models_insensitive(ref: np.ndarray, emu: np.ndarray, what: str, budget: float = ROUNDING_BUDGET):
    """The model keeps the cost of activation rounding (every position) under the budget, so
    an engine that rounds like the emulation has room to spare under NORMAL_TOL."""
    cost = rounding_sensitivity(ref, emu)
    worst = int(np.argmax(cost))
    assert cost[worst] < budget, (f"{what}: emulated activation rounding alone moves the logits by "
                                  f"{cost[worst]:.3g} of the spread at position {worst} (budget {budget}); "
                                  f"the generated model is too sensitive for the {NORMAL_TOL} bound")
    return float(cost[worst])


def compare_to_emulation(emu: np.ndarray, eng: np.ndarray, what: str, tol: float = FIRST_TOKEN_EMU_TOL):
    assert eng.shape == emu.shape, f"{what}: shape {eng.shape} vs {emu.shape}"
    err = float(np.abs(eng - emu).max()) / spread(emu)
    assert err < tol, (f"{what}: max |engine - emulated reference| = {err:.3g} of the spread (limit {tol}); "
                       f"the activation formats (Q8_0/Q8_1/Q8_K/F16/BF16) or the F16 KV cache differ")
    return err


def compare_exact(ref: np.ndarray, eng: np.ndarray, what: str, tol: float = EXACT_TOL):
    assert eng.shape == ref.shape, f"{what}: shape {eng.shape} vs {ref.shape}"
    assert np.all(np.isfinite(eng)), f"{what}: engine logits not finite"
    err = float(np.abs(eng - ref).max() / np.abs(ref).max())
    assert err < tol, f"{what}: exact mode max |engine - ref| / max|ref| = {err:.3g} (limit {tol})"
    assert int(np.argmax(ref)) == int(np.argmax(eng)) or \
        float(ref.max() - ref[int(np.argmax(eng))]) <= 2 * tol * float(np.abs(ref).max()), f"{what}: top-1 differs"
    return err


def require_clear_routing(margins: np.ndarray, n_tokens: int, what: str):
    """margins [n_tokens_total, n_layer] from the reference; the first n_tokens are evaluated."""
    m = margins[:n_tokens]
    finite = m[np.isfinite(m)]
    if finite.size and finite.min() < MIN_ROUTING_MARGIN:
        t, layer = np.unravel_index(int(np.argmin(np.where(np.isfinite(m), m, np.inf))), m.shape)
        raise AssertionError(f"{what}: the reference has a routing near-tie at token {t}, layer {layer} "
                             f"(margin {finite.min():.3g} < {MIN_ROUTING_MARGIN}); choose another seed or "
                             f"token sequence instead of widening tolerances")
