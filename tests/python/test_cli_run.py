"""moestream run: sampling options and saved sessions, checked against the
library through the Python binding (same sampler, same state files)."""
import subprocess

import pytest

PROMPT = [5, 9, 3, 200]


def cli(cli_path, *args):
    return subprocess.run([str(cli_path), *map(str, args)], capture_output=True, text=True, timeout=300)


def ids(r):
    assert r.returncode == 0, r.stderr
    return [int(t) for t in r.stdout.split()]


@pytest.fixture(scope="module")
def model(cli_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "tiny.gguf"
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "-o", str(path)], check=True, capture_output=True)
    return path


def binding_generation(binding, model, prompt, n, sampler=None, state=None, accept=False):
    """What the library gives: step the prompt (fed to the sampler first when
    accept), then pick and step n tokens."""
    with binding.Context(model, n_threads=1, profile_path="") as ctx:
        if state:
            ctx.load_state(state, sampler)
        if accept:
            sampler.accept(prompt)
        logits = ctx.step(prompt)
        out = []
        for _ in range(n):
            token = sampler.sample(logits) if sampler else int(logits.argmax())
            out.append(token)
            logits = ctx.step([token])
        return out


def test_sampling_options_draw_what_the_library_sampler_draws(cli_path, binding, model):
    tokens = ",".join(map(str, PROMPT))
    sampled = ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 10, "--temp", 1.5, "--seed", 7))
    sampler = binding.Sampler(temperature=1.5, seed=7)  # the other options at the library's defaults
    assert sampled == binding_generation(binding, model, PROMPT, 10, sampler)
    assert sampled == ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 10, "--temp", 1.5, "--seed", 7))
    greedy = ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 10))
    assert greedy == binding_generation(binding, model, PROMPT, 10)
    assert greedy == ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 10, "--temp", 0))
    assert sampled != greedy


def test_a_saved_session_continues_exactly(cli_path, binding, model, tmp_path):
    state = tmp_path / "s.state"
    first = ids(cli(cli_path, "run", "-m", model, "--tokens", ",".join(map(str, PROMPT)), "-n", 6,
                    "--save-state", state))
    with binding.Context(model, n_threads=1, profile_path="") as ctx:
        ctx.load_state(state)
        assert ctx.n_past == len(PROMPT) + len(first)  # every token printed is in the session
    more = [17, 4]
    cont = ids(cli(cli_path, "run", "-m", model, "--tokens", "17,4", "-n", 5, "--load-state", state))
    # Greedy: the same as one run over the whole history.
    assert cont == binding_generation(binding, model, PROMPT + first + more, 5)


def test_a_saved_sampling_session_continues_its_sampler(cli_path, binding, model, tmp_path):
    state = tmp_path / "s.state"
    ids(cli(cli_path, "run", "-m", model, "--tokens", ",".join(map(str, PROMPT)), "-n", 6, "--temp", 1.2,
            "--seed", 3, "--save-state", state))
    r = cli(cli_path, "run", "-m", model, "--tokens", "17", "-n", 5, "--seed", 99, "--load-state", state)
    assert "continuing the saved sampler" in r.stderr
    sampler = binding.Sampler(seed=12345)  # replaced by the file's
    assert ids(r) == binding_generation(binding, model, [17], 5, sampler, state)
    assert sampler.params["temperature"] == pytest.approx(1.2)


def test_bad_sampling_values_and_state_files_are_refused(cli_path, model, tmp_path):
    r = cli(cli_path, "run", "-m", model, "--tokens", "1", "--temp", -1)
    assert r.returncode == 2 and "--temp takes a number of at least 0, got '-1'" in r.stderr, r.stderr
    r = cli(cli_path, "run", "-m", model, "--tokens", "1", "--top-p", "x")
    assert r.returncode == 2 and "--top-p" in r.stderr, r.stderr
    r = cli(cli_path, "run", "-m", model, "--tokens", "1", "--load-state", tmp_path / "missing.state")
    assert r.returncode == 1 and "missing.state" in r.stderr, r.stderr
    other = tmp_path / "other.gguf"
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "--seed", "2", "-o", str(other)], check=True,
                   capture_output=True)
    state = tmp_path / "o.state"
    ids(cli(cli_path, "run", "-m", other, "--tokens", "1,2", "-n", 2, "--save-state", state))
    for extra in ([], ["--temp", "0.7"]):
        r = cli(cli_path, "run", "-m", model, "--tokens", "1", "--load-state", state, *extra)
        assert r.returncode == 1 and "state" in r.stderr, r.stderr


def test_penalties_alone_keep_greedy_and_count_the_prompt(cli_path, binding, model):
    greedy = ids(cli(cli_path, "run", "-m", model, "--tokens", ",".join(map(str, PROMPT)), "-n", 21))
    # A prompt ending where greedy is about to repeat tokens it already holds.
    prompt = PROMPT + greedy[:13]
    assert set(greedy[13:15]) <= set(prompt), greedy
    tokens = ",".join(map(str, prompt))
    penalties = dict(repeat_penalty=3, presence_penalty=100, penalty_last_n=64)
    penalised = ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 8, "--repeat-penalty", 3,
                        "--presence-penalty", 100, "--repeat-last-n", 64))
    assert penalised == binding_generation(binding, model, prompt, 8, binding.Sampler(temperature=0, **penalties),
                                           accept=True)
    # Not feeding the prompt would have given other tokens, and so does plain greedy.
    assert penalised != binding_generation(binding, model, prompt, 8, binding.Sampler(temperature=0, **penalties))
    plain = ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 8))
    assert plain == greedy[13:21] != penalised
    # Off values are plain greedy.
    assert plain == ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 8, "--repeat-penalty", 1,
                            "--frequency-penalty", 0))


def test_penalties_with_sampling_draw_what_the_library_draws(cli_path, binding, model, tmp_path):
    tokens = ",".join(map(str, PROMPT))
    state = tmp_path / "p.state"
    args = ["--temp", 1.3, "--seed", 5, "--frequency-penalty", 0.8, "--repeat-last-n", 8]
    drawn = ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 10, *args, "--save-state", state))
    sampler = binding.Sampler(temperature=1.3, seed=5, frequency_penalty=0.8, penalty_last_n=8)
    assert drawn == binding_generation(binding, model, PROMPT, 10, sampler, accept=True)
    # The continued session keeps the saved sampler's history and feeds it the new prompt.
    r = cli(cli_path, "run", "-m", model, "--tokens", "17", "-n", 6, "--repeat-penalty", 2, "--load-state", state)
    assert "repeat-last-n 8" in r.stderr, r.stderr
    restored = binding.Sampler()
    assert ids(r) == binding_generation(binding, model, [17], 6, restored, state, accept=True)
    assert restored.params["frequency_penalty"] == pytest.approx(0.8)


def test_whole_history_window_and_negative_penalties_draw_what_the_library_draws(cli_path, binding, model):
    tokens = ",".join(map(str, PROMPT))
    args = ["--temp", 1.1, "--seed", 4, "--presence-penalty", -0.7, "--frequency-penalty", 0.3, "--repeat-last-n", -1]
    drawn = ids(cli(cli_path, "run", "-m", model, "--tokens", tokens, "-n", 10, *args))
    sampler = binding.Sampler(temperature=1.1, seed=4, presence_penalty=-0.7, frequency_penalty=0.3, penalty_last_n=-1)
    assert drawn == binding_generation(binding, model, PROMPT, 10, sampler, accept=True)
    # The window decides the draws: one of the last 2 tokens gives others.
    sampler = binding.Sampler(temperature=1.1, seed=4, presence_penalty=-0.7, frequency_penalty=0.3, penalty_last_n=2)
    assert drawn != binding_generation(binding, model, PROMPT, 10, sampler, accept=True)


def test_bad_penalty_values_are_refused(cli_path, model):
    # Refused by run in the words of every option, before the library sees them.
    for option, value, words in (("--repeat-penalty", 0, "--repeat-penalty takes a positive number"),
                                 ("--repeat-penalty", -1, "--repeat-penalty takes a positive number"),
                                 ("--presence-penalty", "1e39", "--presence-penalty takes a number"),  # inf as a float
                                 ("--frequency-penalty", "nan", "--frequency-penalty"),
                                 ("--repeat-last-n", 70000, "--repeat-last-n takes an integer from -1 to 65536"),
                                 ("--repeat-last-n", -2, "--repeat-last-n"),
                                 ("--repeat-penalty", "x", "--repeat-penalty")):
        r = cli(cli_path, "run", "-m", model, "--tokens", "1", option, value)
        assert r.returncode == 2 and words in r.stderr, (option, value, r.stderr)


@pytest.mark.parametrize("prompt,n,ctx", [("1,2,3", 5, 4), ("1,2,3,4,5", 1, 4), ("1,2,3", 2, 4)])
def test_a_run_the_context_cannot_hold_is_refused_before_any_token(cli_path, model, prompt, n, ctx):
    # The prompt and every token asked for must fit: a run that printed the
    # tokens that fit and then failed with "context full" looked like a result.
    r = cli(cli_path, "run", "-m", model, "--tokens", prompt, "-c", ctx, "-n", n)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stdout == ""
    need = len(prompt.split(",")) + n
    assert f"{need} tokens" in r.stderr and f"holds {ctx}" in r.stderr, r.stderr
    assert f"-c {need}" in r.stderr, r.stderr
    assert ids(cli(cli_path, "run", "-m", model, "--tokens", prompt, "-c", need, "-n", n)) != []


def test_a_continued_session_counts_its_tokens_against_the_context(cli_path, model, tmp_path):
    state = tmp_path / "s.state"
    ids(cli(cli_path, "run", "-m", model, "--tokens", "1,2,3", "-n", 3, "-c", 16, "--save-state", state))
    r = cli(cli_path, "run", "-m", model, "--tokens", "4,5", "-n", 10, "-c", 16, "--load-state", state)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert "6 tokens of the loaded session, the prompt's 2 and -n 10 need 18 tokens" in r.stderr, r.stderr
    assert len(ids(cli(cli_path, "run", "-m", model, "--tokens", "4,5", "-n", 8, "-c", 16, "--load-state", state))) == 8
