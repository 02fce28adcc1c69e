"""The engine's logits against the float64 reference for every architecture, several quant
mixes (the low-bit ones Q2_K / Q3_K_M / IQ4_XS on one architecture each) and shapes (top-k 1/2/8, GQA ratios 1/4/8, an expert count that is not a power of two,
head_dim != n_embd/n_head, tied output), after 1 token, after 40 tokens in one step and at
every position of 40 one-token steps, in normal mode (1e-2 of the logit spread) and --exact
mode (1e-4), and with different --batch sizes; after one token also against the reference
with the engine's activation rounding emulated. Every generated model is first checked to
keep the emulated rounding's own cost under 0.6 of the normal-mode bound. Criteria: see
engine_check.py.

Skips (with the reason) while `moestream logits` does not exist."""
import dataclasses

import numpy as np
import pytest

import engine_check as ec
from reference.forward import Reference
from tools import make_model as mm

N_TOKENS = 40

SHAPES = {
    # top-1, 6 experts, GQA 8 (olmoe keeps n_head_kv == n_head as its real files do)
    "k1-e6-gqa8": dict(n_embd=128, n_layer=2, n_head=8, n_head_kv=1, n_expert=6, n_expert_used=1,
                       n_ff_expert=64, n_vocab=320, rope_theta=10000.0),
    # top-8 of 16, GQA 1, k-quant friendly sizes
    "k8-e16-gqa1": dict(n_embd=256, n_layer=3, n_head=4, n_head_kv=4, n_expert=16, n_expert_used=8,
                        n_ff_expert=256, n_vocab=512, rope_theta=1e6),
    # top-2 of 10, GQA 4, head_dim 32 != n_embd/n_head, tied output where allowed, n_ff not /256
    "k2-e10-hd32": dict(n_embd=128, n_layer=2, n_head=8, n_head_kv=2, head_dim=32, n_expert=10,
                        n_expert_used=2, n_ff_expert=96, n_vocab=300, rope_theta=5e5),
}
MIXES = ("q8_0", "q4_k_m", "mixed")
MATRIX = [(a, m, s) for a in mm.ARCHS for s in ("k1-e6-gqa8", "k8-e16-gqa1") for m in MIXES] + \
         [(a, "q4_0", "k2-e10-hd32") for a in mm.ARCHS] + [(a, "bf16", "k2-e10-hd32") for a in ("qwen3moe",)] + \
         [("qwen3moe", "q2_k", "k8-e16-gqa1"), ("llama", "q3_k_m", "k8-e16-gqa1"), ("olmoe", "iq4_xs", "k8-e16-gqa1"),
          ("qwen2moe", "iq4_xs", "k2-e10-hd32")]   # the last: IQ4_NL wherever a row is not a multiple of 256
IDS = [f"{a}-{m}-{s}" for a, m, s in MATRIX]


def _spec(arch, mix, shape):
    kw = dict(SHAPES[shape])
    if arch == "olmoe":
        kw["n_head_kv"] = kw["n_head"]
        kw.pop("head_dim", None)
    if shape == "k2-e10-hd32" and arch in mm.TIED_OUTPUT_ALLOWED:
        kw["tie_output"] = True
    if arch == "deepseek2":   # YaRN's sharper attention leaves less room for rounding: its own test below
        kw["yarn_factor"] = 0.0
    seed = sum(map(ord, arch + mix + shape))
    return mm.ModelSpec(arch=arch, quant_mix=mix, seed=seed, **kw)


class _Case:
    def __init__(self, path, spec):
        self.path = path
        self.spec = spec
        rng = np.random.default_rng(spec.seed)
        self.tokens = [int(t) for t in rng.integers(0, spec.n_vocab, N_TOKENS)]
        self.ref = Reference(path).run(self.tokens)   # logits of every position
        # the same with the engine's activation rounding (Q8_0/Q8_1/Q8_K/F16/BF16) and F16 KV cache
        self.emu = Reference(path, act_quant=True, kv_f16=True).run(self.tokens).logits
        self.n_vocab = spec.n_vocab
        self._engine_out = {}

    def engine_positions(self, eng, n, exact=False, batch=None):
        """(first position, logits [rows, n_vocab]) of the engine for the first n tokens; with
        batch 1 the logits of every position (--all)."""
        if batch == n:
            batch = None      # one step of n tokens is the default
        key = (n, exact, batch)
        if key not in self._engine_out:
            extra = ("--all",) if batch == 1 else ()
            self._engine_out[key] = eng.try_positions(self.path, self.tokens[:n], self.n_vocab,
                                                      exact=exact, batch=batch, extra=extra)
        return self._engine_out[key]

    def engine(self, eng, n, exact=False, batch=None):
        return self.engine_positions(eng, n, exact, batch)[1][-1]


@pytest.fixture(scope="session")
def engine(cli_path):
    return ec.engine_or_skip(cli_path)


@pytest.fixture(scope="session")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine-models")
    made = {}

    def get(arch, mix, shape):
        key = (arch, mix, shape)
        if key not in made:
            spec = _spec(arch, mix, shape)
            path = root / f"{arch}-{mix}-{shape}.gguf"
            mm.make_model(path, spec)
            case = _Case(path, spec)
            ec.require_clear_routing(case.ref.margins, N_TOKENS, f"{path.name}")
            made[key] = case
        return made[key]
    return get


def _runs(n_tokens):
    """(label, n, batch) of the engine runs compared with the reference: one token, the 40
    tokens in one step, and the 40 tokens one per step with every position's logits."""
    return [("1 token", 1, None), (f"{n_tokens} tokens in one step", n_tokens, None),
            (f"{n_tokens} one-token steps", n_tokens, 1)]


@pytest.mark.parametrize("arch,mix,shape", MATRIX, ids=IDS)
def test_model_is_insensitive_to_activation_rounding(cases, arch, mix, shape):
    """The precondition of the strict normal-mode bound (no engine needed)."""
    c = cases(arch, mix, shape)
    ec.models_insensitive(c.ref.logits, c.emu, c.path.name)


@pytest.mark.parametrize("arch,mix,shape", MATRIX, ids=IDS)
def test_logits_match_reference(engine, cases, arch, mix, shape):
    c = cases(arch, mix, shape)
    for label, n, batch in _runs(N_TOKENS):
        first, rows = c.engine_positions(engine, n, batch=batch)
        for i, row in enumerate(rows):   # the last position, or every one with --all
            ec.compare_normal(c.ref.logits[first + i], row, f"{c.path.name}, {label}: position {first + i + 1}")
    ec.compare_to_emulation(c.emu[0], c.engine(engine, 1), f"{c.path.name} after 1 token")


@pytest.mark.parametrize("arch,mix,shape", MATRIX, ids=IDS)
def test_exact_mode_matches_reference(engine, cases, arch, mix, shape):
    c = cases(arch, mix, shape)
    for label, n, batch in _runs(N_TOKENS):
        first, rows = c.engine_positions(engine, n, exact=True, batch=batch)
        for i, row in enumerate(rows):
            ec.compare_exact(c.ref.logits[first + i], row, f"{c.path.name} --exact, {label}: position {first + i + 1}")


@pytest.mark.parametrize("arch,mix,shape", MATRIX, ids=IDS)
def test_multi_token_steps_equal_single_steps(engine, cases, arch, mix, shape):
    c = cases(arch, mix, shape)
    one = c.engine(engine, N_TOKENS, batch=1)
    for b in (7, N_TOKENS):
        many = c.engine(engine, N_TOKENS, batch=b)
        err = np.abs(many - one).max() / ec.spread(c.ref.logits[-1])
        assert err < ec.BATCH_TOL, f"{c.path.name}: --batch {b} vs --batch 1 differ by {err:.3g} of the spread"
    one_x = c.engine(engine, N_TOKENS, exact=True, batch=1)
    for b in (7, N_TOKENS):
        many_x = c.engine(engine, N_TOKENS, exact=True, batch=b)
        err = np.abs(many_x - one_x).max() / np.abs(one_x).max()
        assert err < ec.BATCH_TOL_EXACT, f"{c.path.name}: --exact --batch {b} vs --batch 1 differ by {err:.3g}"


def exact_logits_match_reference(engine, path, spec, skip_unsupported=True, normal_too=False):
    """Writes the model of `spec` and compares the engine's exact logits (and normal-mode ones
    with normal_too) at every one of 12 positions with the reference's; returns the reference's."""
    mm.make_model(path, spec)
    tokens = [int(t) for t in np.random.default_rng(3).integers(0, spec.n_vocab, 12)]
    ref = Reference(path).run(tokens)
    ec.require_clear_routing(ref.margins, len(tokens), path.name)
    run = engine.try_positions if skip_unsupported else engine.positions
    for exact in (True, False) if normal_too else (True,):
        first, rows = run(path, tokens, spec.n_vocab, exact=exact, batch=1, extra=("--all",))
        compare = ec.compare_exact if exact else ec.compare_normal
        for i, row in enumerate(rows):
            compare(ref.logits[first + i], row, f"{path.name} exact={exact}: position {first + i + 1}")
    return ref.logits


def gpt_oss_matches_reference(engine, path, skip_unsupported=True, **spec_kw):
    """exact_logits_match_reference for a gpt-oss model of the k1-e6-gqa8 shape with spec_kw."""
    spec = mm.ModelSpec(arch="gpt-oss", quant_mix="q8_0", seed=11, yarn_orig_ctx=64, **spec_kw,
                        **SHAPES["k1-e6-gqa8"])
    return exact_logits_match_reference(engine, path, spec, skip_unsupported)


@pytest.mark.parametrize("arch,yarn", [("qwen3moe", False), ("llama", False), ("gpt-oss", True),
                                       ("deepseek2", True), ("deepseek2", False)])
def test_rope_attn_factor_is_applied_as_llama_cpp_does(engine, tmp_path, arch, yarn):
    """rope.scaling.attn_factor multiplies the cos/sin of every rotation, on top of YaRN's
    magnitude (gpt-oss), and deepseek2's mscale, so its softmax scale by the square (with YaRN's
    mscale, or alone): the engine follows the reference at every position, and the factor moves
    the reference's logits far past the tolerance (an engine that ignored or refused it fails)."""
    spec = dataclasses.replace(_spec(arch, "q8_0", "k1-e6-gqa8"), yarn_orig_ctx=64,
                               yarn_factor=32.0 if yarn else 0.0)
    logits = {}
    for factor in (None, 1.6):
        path = tmp_path / f"{arch}-attn-factor-{factor}.gguf"
        logits[factor] = exact_logits_match_reference(engine, path, dataclasses.replace(spec, rope_attn_factor=factor),
                                                      skip_unsupported=False)
    diff = np.abs(logits[1.6] - logits[None]).max() / ec.spread(logits[None][-1])
    assert diff > 3 * ec.NORMAL_TOL, diff


@pytest.mark.parametrize("yarn_factor", [0.5, 1.0])
def test_yarn_factor_of_at_most_one(engine, tmp_path, yarn_factor):
    """rope.scaling.type yarn with a factor of at most 1: the angles are still mixed over the
    correction dims (freq_scale 1/factor), cos/sin are not scaled (llama.cpp's get_mscale is 1
    there), in the engine and the reference alike."""
    gpt_oss_matches_reference(engine, tmp_path / "yarn.gguf", yarn_factor=yarn_factor)


@pytest.mark.parametrize("pattern", [0, "all", "flags"])
def test_sliding_window_pattern_as_llama_cpp_reads_it(engine, tmp_path, pattern):
    """gpt-oss's attention.sliding_window_pattern: 0 slides every layer, an array is one flag per
    layer (equal entries included: all 1s slide every layer, not a period of 1). A window of 3
    over 12 positions changes what each sliding layer sees."""
    n_layer = SHAPES["k1-e6-gqa8"]["n_layer"]
    # "flags": odd layers slide, the opposite of gpt-oss's default period 2.
    value = {0: 0, "all": [1] * n_layer, "flags": [i % 2 for i in range(n_layer)]}[pattern]
    # Every pattern here is supported: a refusal fails rather than skips.
    gpt_oss_matches_reference(engine, tmp_path / "swa.gguf", skip_unsupported=False, n_swa=3, swa_pattern=value)


def test_sliding_window_rings_over_contexts_many_windows_long(engine, tmp_path):
    """A window of 4 over 150 positions: the sliding layers keep rings of the window plus a chunk
    (67 rows with the library's 64-token chunks), which wrap here, in one-token steps, steps of 37
    tokens and one step of all 150 (three chunks). Exact mode follows the reference at every
    position, and every way of feeding the tokens gives the same bits, in both modes."""
    spec = mm.ModelSpec(arch="gpt-oss", quant_mix="q8_0", seed=11, yarn_orig_ctx=64, n_swa=4,
                        **SHAPES["k1-e6-gqa8"])
    path = tmp_path / "window4.gguf"
    mm.make_model(path, spec)
    tokens = [int(t) for t in np.random.default_rng(5).integers(0, spec.n_vocab, 150)]
    ref = Reference(path).run(tokens)
    ec.require_clear_routing(ref.margins, len(tokens), path.name)
    for exact in (True, False):
        first, rows = engine.positions(path, tokens, spec.n_vocab, exact=exact, batch=1, extra=("--all",))
        assert first == 0 and len(rows) == len(tokens)
        if exact:
            for i, row in enumerate(rows):
                ec.compare_exact(ref.logits[i], row, f"{path.name} --exact: position {i + 1}")
        steps = engine.run_logits(path, tokens, exact=exact, batch=37, extra=("--all",)).reshape(-1, spec.n_vocab)
        ends = [min(len(tokens), i + 37) - 1 for i in range(0, len(tokens), 37)]
        assert np.array_equal(steps, rows[ends]), f"exact={exact}: steps of 37 tokens differ from one-token steps"
        whole = engine.logits(path, tokens, spec.n_vocab, exact=exact)
        assert np.array_equal(whole, rows[-1]), f"exact={exact}: one step of 150 tokens differs"


@pytest.mark.parametrize("mix", ["q8_0", "q4_k_m", "mixed", "bf16"])
def test_deepseek2_with_one_attn_kv_b_a_layer_matches_reference(engine, tmp_path, mix):
    """deepseek2 files converted before absorbed latent attention have one attn_kv_b a layer and
    no key_length_mla; open builds the absorbed attn_k_b (the key rows transposed: F32 from
    quantised blocks, in its own type from a float type) and attn_v_b (the value rows as they
    are). The engine follows the reference at every position, in exact and normal mode, with
    attn_kv_b in Q8_0, Q5_0 (q4_k_m's fallback for its rows), Q4_0 and F16 (the mixed rotation's)
    and BF16, with YaRN."""
    spec = dataclasses.replace(_spec("deepseek2", mix, "k1-e6-gqa8"), joint_kv_b=True, yarn_factor=32.0,
                               yarn_orig_ctx=64)
    exact_logits_match_reference(engine, tmp_path / f"kv-b-{mix}.gguf", spec, skip_unsupported=False, normal_too=True)


def test_engine_check_criteria_can_fail():
    """The comparison helpers reject wrong logits (guards against a harness that always passes)."""
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(100) * 3
    ec.compare_normal(ref, ref + 1e-4, "ok")
    with pytest.raises(AssertionError):
        ec.compare_normal(ref, ref + 0.2 * ec.spread(ref) * rng.standard_normal(100), "noisy")
    swapped = ref.copy()
    i, j = np.argsort(ref)[-1], np.argsort(ref)[0]
    swapped[i], swapped[j] = ref[j], ref[i]
    with pytest.raises(AssertionError):
        ec.compare_normal(ref, swapped, "swapped")
    ec.compare_exact(ref, ref * (1 + 1e-6), "ok")
    with pytest.raises(AssertionError):
        ec.compare_exact(ref, ref * (1 + 1e-3), "off")
    with pytest.raises(AssertionError):
        ec.require_clear_routing(np.array([[0.5, 0.01]]), 1, "tie")
    refs = np.stack([ref, -ref])
    ec.models_insensitive(refs, refs + 1e-3, "quiet")
    with pytest.raises(AssertionError):
        ec.models_insensitive(refs, refs + np.array([[0.0], [0.01 * ec.spread(ref)]]) * (np.arange(100) == 7),
                              "sensitive")
    ec.require_clear_routing(np.array([[0.5, np.inf], [0.0, 0.0]]), 1, "clear")


def test_deepseek2_yarn_angles_and_attention_scale_take_effect(engine, tmp_path):
    """deepseek2 with YaRN: the engine follows the reference, and each part of YaRN changes the
    logits there: the attention scale's mscale^2 (mscale_all_dim 0.707 against 0) and the
    interpolated RoPE angles (factor 32 against no scaling). A short original context puts most
    rotary pairs in the interpolated range within the test's 40 positions."""
    variants = {"yarn": dict(yarn_factor=32.0, yarn_mscale_all_dim=0.707),
                "angles only": dict(yarn_factor=32.0, yarn_mscale_all_dim=0.0),
                "no yarn": dict(yarn_factor=0.0)}
    ref = {}
    for label, kw in variants.items():
        spec = dataclasses.replace(_spec("deepseek2", "q8_0", "k1-e6-gqa8"), yarn_orig_ctx=64, **kw)
        path = tmp_path / f"{label.replace(' ', '-')}.gguf"
        mm.make_model(path, spec)
        c = _Case(path, spec)
        ec.require_clear_routing(c.ref.margins, N_TOKENS, path.name)
        first, rows = c.engine_positions(engine, N_TOKENS)
        ec.compare_normal(c.ref.logits[first], rows[-1], f"{path.name}: position {N_TOKENS}")
        ref[label] = c.ref.logits[-1]
    for a, b in (("yarn", "angles only"), ("angles only", "no yarn")):
        diff = np.abs(ref[a] - ref[b]).max() / ec.spread(ref[a])
        assert diff > 3 * ec.NORMAL_TOL, (a, b, diff)   # well past what compare_normal lets through
