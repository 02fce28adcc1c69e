"""Option values and input files the CLI must refuse, with the exit status
README.md promises: 2 for a usage error, 1 for a failure at run time."""
import json
import re
import subprocess

import pytest


def cli(cli_path, *args):
    return subprocess.run([str(cli_path), *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def model(cli_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("options") / "tiny.gguf"
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "-o", str(path)], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def trace(cli_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("options") / "s.trace"
    subprocess.run([str(cli_path), "trace", "synth", "--layers", "2", "--experts", "8", "--top-k", "2", "-n", "20",
                    "-o", str(path)], check=True, capture_output=True)
    return path


def vocabulary(cli_path, model):
    return int(next(line.split()[-1] for line in cli(cli_path, "inspect", model).stdout.splitlines()
                    if line.startswith("vocab")))


@pytest.mark.parametrize("ids,position", [("1 2 99999999", 2), ("5,3,-1", 2), ("1 2 3 {vocab}", 3)])
def test_perplexity_checks_every_token_id(cli_path, model, tmp_path, ids, position):
    # The last id of a chunk is only scored, never stepped: it too must be in the vocabulary.
    ids = ids.format(vocab=vocabulary(cli_path, model))
    bad_id = [t for t in ids.replace(",", " ").split()][position]
    tokens = tmp_path / "ids.txt"
    tokens.write_text(ids)
    r = cli(cli_path, "perplexity", "-m", model, "--tokens", tokens)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"token id {bad_id} at position {position}" in r.stderr
    assert "perplexity" not in r.stdout


@pytest.mark.parametrize("args,option", [
    (["run", "--tokens", "1", "--ctx", "4294967298"], "--ctx"),
    (["run", "--tokens", "1", "--threads", "4294967297"], "--threads"),
    (["run", "--tokens", "1", "-n", "4294967297"], "-n"),
    (["logits", "--tokens", "1", "--out", "x.bin", "--batch", "4294967297"], "--batch"),
    (["run", "--tokens", "1", "--lookahead", "-7"], "--lookahead"),
    (["run", "--tokens", "1", "--lookahead", "5"], "--lookahead"),
    (["bench", "-n", "3000000000"], "-n"),
    (["bench", "--prompt", "4294967297"], "--prompt"),
    (["bench", "--threads", "4294967297"], "--threads"),
    (["trace", "record", "-o", "x.trace", "--threads", "4294967297"], "--threads"),
    # -t is --threads for trace record as for run and bench.
    (["trace", "record", "-o", "x.trace", "-t", "4294967297"], "--threads"),
    (["trace", "record", "-o", "x.trace", "--tokens", "x"], "--tokens"),
])
def test_integers_too_large_for_their_field_are_usage_errors(cli_path, model, tmp_path, args, option):
    command = args[:2] if args[0] == "trace" else args[:1]
    r = subprocess.run([str(cli_path), *command, "-m", str(model), *args[len(command):]], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert option + " " in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["generate", "--preset", "tiny", "-o", "x.gguf", "extra"],
    ["bench", "-m", "{model}", "-n", "2", "--prompt", "2", "--warm", "extra"],
    ["demo", "--model", "{model}", "-n", "2", "--no-mmap", "extra"],
    ["trace", "synth", "-n", "8", "-o", "x.trace", "extra"],
    ["trace", "record", "-m", "{model}", "--tokens", "2", "-o", "x.trace", "extra"],
])
def test_commands_without_positional_arguments_refuse_one(cli_path, model, tmp_path, args):
    # An argument a command does not take was ignored: a mistyped option value
    # ("--layers 2 4") ran with the defaults instead.
    r = subprocess.run([str(cli_path), *[a.format(model=model) for a in args]], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "unexpected argument 'extra'" in r.stderr, r.stderr
    assert r.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["run", "--tokens", "1"], ["tokenize", "-p", "a"], ["perplexity", "-f", "{text}"]])
def test_batch_is_an_option_of_logits_only(cli_path, model, tmp_path, command):
    # --batch is in logits' --help alone; the other commands must not take it and ignore it.
    text = tmp_path / "t.txt"
    text.write_text("hello world")
    r = cli(cli_path, *[a.format(text=text) for a in command], "-m", model, "--batch", "2")
    assert r.returncode == 2 and "--batch" in r.stderr, (r.returncode, r.stderr)


def test_token_ids_wider_than_32_bits_are_refused(cli_path, model):
    r = cli(cli_path, "run", "-m", model, "--tokens", "4294967297")
    assert r.returncode == 2 and "4294967297" in r.stderr, r.stderr


@pytest.mark.parametrize("command", [["tokenize", "-f"], ["perplexity", "-f"], ["perplexity", "--tokens"],
                                     ["run", "-f"]])
def test_a_directory_or_missing_input_file_is_a_runtime_error(cli_path, model, tmp_path, command):
    r = cli(cli_path, *command, tmp_path, "-m", model)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"{tmp_path}: is a directory" in r.stderr
    r = cli(cli_path, *command, tmp_path / "absent.txt", "-m", model)
    assert r.returncode == 1 and "absent.txt" in r.stderr, (r.returncode, r.stderr)
    # An empty path names no file either (not an empty prompt): a usage error,
    # as for every option that names a file.
    r = cli(cli_path, *command, "", "-m", model)
    assert r.returncode == 2 and f"{command[-1]} needs a file name" in r.stderr, (r.returncode, r.stderr)


@pytest.mark.parametrize("args,option", [
    (["--vocab", "10000000"], "--vocab"),
    (["--experts", str(2**30), "--ff-expert", str(2**30)], "--experts"),
    (["--ff-expert", str(2**30)], "--ff-expert"),
    (["--layers", "4294967297"], "--layers"),
])
def test_generate_bounds_every_shape(cli_path, args, option):
    r = cli(cli_path, "generate", *args, "--size-only")
    assert r.returncode == 2 and option in r.stderr, (r.returncode, r.stderr)
    assert r.stdout == ""


def test_generate_sizes_the_largest_shapes_without_wrapping(cli_path):
    # Within the limits the size arithmetic cannot wrap: the biggest expert
    # tensors alone (f32, 3 per layer) are 3 x 256 x 65536 x 65536 x 4096 x 4 bytes.
    r = cli(cli_path, "generate", "--quant", "f32", "--layers", "256", "--embd", "65536", "--experts", "4096",
            "--ff-expert", "65536", "--vocab", "1048576", "--size-only")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) > 3 * 256 * 65536 * 65536 * 4096 * 4


def test_library_warnings_reach_stderr(cli_path, model, tmp_path):
    # The usage profile is written at close; a path in a missing directory cannot be.
    r = cli(cli_path, "bench", "-m", model, "-n", "2", "--prompt", "2", "--io-mode", "pread", "--warm",
            "--profile", tmp_path / "absent" / "p.prof")
    assert r.returncode == 0, r.stderr
    assert "moestream: warning: usage profile not saved" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [
    ["perplexity", "--tokens", "{ids}", "--ctx", "1"],
    ["bench", "--sweep", ","],
    ["bench", "--io-mode", ","],
])
def test_arguments_that_select_nothing_are_usage_errors(cli_path, model, tmp_path, args):
    ids = tmp_path / "ids.txt"
    ids.write_text("1 2 3")
    r = cli(cli_path, args[0], "-m", model, *[a.format(ids=ids) for a in args[1:]])
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "perplexity -nan" not in r.stdout


@pytest.mark.parametrize("option", ["--budget", "--policy"])
def test_trace_replay_needs_a_budget_and_a_policy(cli_path, trace, option):
    r = cli(cli_path, "trace", "replay", trace, option, ",")
    assert r.returncode == 2 and option in r.stderr, (r.returncode, r.stderr)
    assert r.stdout == ""


def test_run_and_bench_take_the_same_prefetch_names(cli_path, model):
    r = cli(cli_path, "run", "-m", model, "--tokens", "1", "-n", "1", "--prefetch", "previous-token")
    assert r.returncode == 0, r.stderr
    for command in (["run", "--tokens", "1"], ["bench"]):
        r = cli(cli_path, command[0], "-m", model, *command[1:], "--prefetch", "sideways")
        assert r.returncode == 2 and "prefetch mode 'sideways'" in r.stderr, r.stderr


@pytest.mark.parametrize("command", ["run", "tokenize", "perplexity", "logits"])
def test_help_lists_the_model_options_on_stdout(cli_path, command):
    r = cli(cli_path, command, "--help")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith(f"usage: moestream {command}")
    for option in ("--memory-budget", "--io-mode", "--threads", "--ctx", "--lookahead", "--cache-policy"):
        assert option in r.stdout, option


def test_version_help_prints_its_usage(cli_path):
    r = cli(cli_path, "version", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: moestream version")
    assert cli(cli_path, "version", "--bogus").returncode == 2


def test_top_level_help_goes_to_stdout_and_a_missing_command_to_stderr(cli_path):
    for flag in ("--help", "-h"):
        r = cli(cli_path, flag)
        assert r.returncode == 0 and r.stderr == "", (flag, r.stderr)
        assert r.stdout.startswith("usage: moestream <command>") and "  run " in r.stdout, r.stdout
        # run samples too: its summary must not call it greedy alone.
        run_line = next(line for line in r.stdout.splitlines() if line.startswith("  run "))
        assert "sampled" in run_line, run_line
    for args in ([], ["frob"]):
        r = cli(cli_path, *args)
        assert r.returncode == 2 and r.stdout == "" and "usage: moestream <command>" in r.stderr, r


# Every command reports a usage error one way: what is wrong and where the
# options are described, on stderr without the usage text (which would push
# the error off the screen), exit status 2, nothing written.
@pytest.mark.parametrize("args,command,what", [
    (["bench", "--bogus"], "bench", "unknown option --bogus"),
    (["bench"], "bench", "-m MODEL is required"),
    (["bench", "-m", "{model}", "--io-mode", "sideways"], "bench",
     "unknown io mode 'sideways' (auto, mmap, direct, pread, resident)"),
    # Checked before the model is opened: a usage error whatever the model.
    (["bench", "-m", "missing.gguf", "--seed", "x"], "bench", "--seed takes an integer from 0 to 18446744073709551615, got 'x'"),
    (["bench", "-m", "missing.gguf", "--io-mode", "sideways"], "bench",
     "unknown io mode 'sideways' (auto, mmap, direct, pread, resident)"),
    # Every real-number option words a bad value as the integer ones do.
    (["bench", "-m", "missing.gguf", "--max-seconds", "0"], "bench", "--max-seconds takes a positive number, got '0'"),
    (["bench", "-m", "missing.gguf", "--max-seconds", "soon"], "bench",
     "--max-seconds takes a positive number, got 'soon'"),
    # demo's --max-seconds as bench's: checked before a demo model is generated.
    (["demo", "--max-seconds", "0"], "demo", "--max-seconds takes a positive number, got '0'"),
    (["demo", "--max-seconds", "soon"], "demo", "--max-seconds takes a positive number, got 'soon'"),
    (["run", "-m", "{model}", "--tokens", "1", "--temp", "warm"], "run", "--temp takes a number of at least 0, got 'warm'"),
    (["run", "-m", "{model}", "--tokens", "1", "--frequency-penalty", "1e999"], "run",
     "--frequency-penalty takes a number, got '1e999'"),
    # The sampler's ranges, refused by run in these words rather than the library's.
    (["run", "-m", "{model}", "--tokens", "1", "--temp", "-0.5"], "run", "--temp takes a number of at least 0, got '-0.5'"),
    (["run", "-m", "{model}", "--tokens", "1", "--top-p", "0"], "run",
     "--top-p takes a number from 0 to 1 (0 excluded), got '0'"),
    (["run", "-m", "{model}", "--tokens", "1", "--min-p", "1.5"], "run", "--min-p takes a number from 0 to 1, got '1.5'"),
    # Checked on the float the sampler gets: these are 0 as floats, outside the range.
    (["run", "-m", "{model}", "--tokens", "1", "--top-p", "1e-50"], "run",
     "--top-p takes a number from 0 to 1 (0 excluded), got '1e-50'"),
    (["run", "-m", "{model}", "--tokens", "1", "--repeat-penalty", "1e-46"], "run",
     "--repeat-penalty takes a positive number, got '1e-46'"),
    # perplexity's --ctx words its least value as every integer option words its range.
    (["perplexity", "-m", "{model}", "-f", "a.txt", "--ctx", "1"], "perplexity",
     "--ctx takes an integer from 2 to 2147483647, got '1'"),
    (["perplexity", "-m", "{model}", "-f", "a.txt", "-c", "0"], "perplexity",
     "-c takes an integer from 2 to 2147483647, got '0'"),
    (["perplexity", "-m", "{model}", "-f", "a.txt", "--ctx", "-3"], "perplexity",
     "--ctx takes an integer from 2 to 2147483647, got '-3'"),
    (["run", "-m", "{model}", "--tokens", "1", "--repeat-penalty", "0"], "run",
     "--repeat-penalty takes a positive number, got '0'"),
    (["run", "-m", "{model}", "--tokens", "1", "--repeat-last-n", "65537"], "run",
     "--repeat-last-n takes an integer from -1 to 65536, got '65537'"),
    (["bench", "-m", "missing.gguf", "--sweep", "50%", "--memory-budget", "1GiB"], "bench",
     "--sweep and --memory-budget both set the budget: give one"),
    # A budget of 0 bytes would silently run with the automatic one; a share beyond 64 bits is no size.
    (["bench", "-m", "{model}", "--sweep", "0%,50%"], "bench", "--sweep takes a positive share or size (50%, 512MiB, 1.5GiB, ...), got '0%'"),
    (["bench", "-m", "{model}", "--sweep", "50%,1e30%"], "bench",
     "--sweep takes a positive share or size (50%, 512MiB, 1.5GiB, ...), got '1e30%'"),
    (["bench", "-m", "{model}", "--memory-budget", "0"], "bench",
     "--memory-budget takes a positive share or size (50%, 512MiB, 1.5GiB, ...), got '0'"),
    (["trace"], "trace", "expected a subcommand: synth, info, replay or record"),
    (["trace", "frob"], "trace", "unknown subcommand 'frob'"),
    (["trace", "synth", "--reuse", "3", "-o", "x.trace"], "trace synth", "--reuse takes a number from 0 to 1, got '3'"),
    (["trace", "synth", "--window", "4", "--recall", "1.5", "-o", "x.trace"], "trace synth",
     "--recall takes a number from 0 to 1, got '1.5'"),
    (["trace", "synth", "--skew", "-0.5", "-o", "x.trace"], "trace synth",
     "--skew takes a number from 0 to 8, got '-0.5'"),
    # The library refuses a skew above 8: the command says so before it is called.
    (["trace", "synth", "--skew", "8.5", "-o", "x.trace"], "trace synth", "--skew takes a number from 0 to 8, got '8.5'"),
    # A size option's wording composes whether 0 is refused and whether a share is taken.
    (["trace", "synth", "--expert-bytes", "0", "-o", "x.trace"], "trace synth",
     "--expert-bytes takes a positive size (4096, 512MiB, 1.5GiB, ...), got '0'"),
    (["bench", "--membw-size", "512k", "--membw"], "bench",
     "--membw-size takes a size of at least 1MiB (512MiB, 1.5GiB, ...), got '512k'"),
    (["bench", "--membw-size", "lots", "--membw"], "bench",
     "--membw-size takes a size of at least 1MiB (512MiB, 1.5GiB, ...), got 'lots'"),
    (["trace", "replay", "{trace}", "--budget", "lots"], "trace replay",
     "--budget takes a share or size (50%, 512MiB, 1.5GiB, ...), got 'lots'"),
    # A half-open range names its open end: a warm-up of the whole trace would measure nothing.
    (["trace", "replay", "{trace}", "--warmup", "1"], "trace replay",
     "--warmup takes a number from 0 to 1 (1 excluded), got '1'"),
    (["trace", "replay", "{trace}", "--warmup", "-0.1"], "trace replay",
     "--warmup takes a number from 0 to 1 (1 excluded), got '-0.1'"),
    (["trace", "info"], "trace info", "expected one TRACE argument"),
    # The cache policy names of run and bench, and "all".
    (["trace", "replay", "{trace}", "--policy", "sideways"], "trace replay",
     "unknown cache policy 'sideways' (auto, lru, lfu-decay, pinned-hot, reuse-aware, all)"),
    (["trace", "replay", "{trace}", "--policy", "lru,default"], "trace replay",
     "unknown cache policy 'default' (auto, lru, lfu-decay, pinned-hot, reuse-aware, all)"),
    (["inspect"], "inspect", "expected one MODEL argument"),
    (["inspect", "{model}", "--memory-budget", "lots"], "inspect",
     "--memory-budget takes a size (4096, 512MiB, 1.5GiB, ...), got 'lots'"),
    (["demo", "-n", "0"], "demo", "-n takes an integer from 1 to 2147483647, got '0'"),
    (["generate", "--seed", "x", "-o", "x.gguf"], "generate",
     "--seed takes an integer from 0 to 18446744073709551615, got 'x'"),
    (["generate", "--preset", "tiny"], "generate", "-o PATH is required"),
    (["generate", "--arch", "llama", "-o", "x.gguf"], "generate",
     "moestream_generate_model_size: generator: architecture 'llama' not supported (qwen3moe, gpt-oss, deepseek2)"),
    (["version", "x"], "version", "unexpected argument 'x'"),
    (["version", "--bogus"], "version", "unknown option --bogus"),
    (["version", "--help=yes"], "version", "option --help takes no value"),
    # The commands that read their options one at a time word a value given to a flag as parse_args does.
    (["run", "-m", "{model}", "--tokens", "1", "--exact=1"], "run", "option --exact takes no value"),
    (["run", "--help=yes"], "run", "option --help takes no value"),
    (["logits", "-m", "{model}", "--tokens", "1", "-o", "x.bin", "--all=yes"], "logits", "option --all takes no value"),
    (["perplexity", "-m", "{model}", "-f", "a.txt", "--exact="], "perplexity", "option --exact takes no value"),
    (["tokenize", "-m", "{model}", "-p", "a", "--pieces=1"], "tokenize", "option --pieces takes no value"),
    (["tokenize", "-m", "{model}", "-p", "a", "--no-bos=no"], "tokenize", "option --no-bos takes no value"),
    # Every command words an argument it does not take alike, an option unquoted as in every other error.
    (["run", "-m", "{model}", "--bogus"], "run", "unknown option --bogus"),
    (["run", "-m", "{model}", "--tokens", "1", "extra"], "run", "unexpected argument 'extra'"),
    (["logits", "-m", "{model}", "-5"], "logits", "unexpected argument '-5'"),
    (["tokenize", "-m", "{model}", "-p", "a", "--bogus"], "tokenize", "unknown option --bogus"),
    (["perplexity", "-m", "{model}", "-q"], "perplexity", "unknown option -q"),
    # Given options are not reported as missing.
    (["run", "-m", "{model}", "-p", "hi", "--tokens", "1"], "run", "-p and --tokens both give the prompt: give one"),
    # A second prompt source, or the same one again, is refused rather than the last one taken.
    (["run", "-m", "{model}", "-p", "a", "-p", "b"], "run", "-p is given twice: give the prompt once"),
    (["run", "-m", "{model}", "-p", "a", "-f", "b.txt"], "run", "-p and -f both give the prompt: give one"),
    (["run", "-m", "{model}", "-f", "a.txt", "--prompt", "b"], "run", "-f and --prompt both give the prompt: give one"),
    (["run", "-m", "{model}", "--tokens", "1", "--tokens", "2"], "run",
     "--tokens is given twice: give the prompt once"),
    (["tokenize", "-m", "{model}", "-p", "a", "-p", "b"], "tokenize", "-p is given twice: give the text once"),
    (["tokenize", "-m", "{model}", "-f", "a.txt", "-p", "b"], "tokenize", "-f and -p both give the text: give one"),
    (["tokenize", "-m", "{model}", "--file", "a.txt", "--file", "b.txt"], "tokenize",
     "--file is given twice: give the text once"),
    (["perplexity", "-m", "{model}", "-f", "a.txt", "-f", "b.txt"], "perplexity", "-f is given twice: give the text once"),
    # One option by both its spellings is given twice, not two sources.
    (["run", "-m", "{model}", "-f", "a.txt", "--file", "b.txt"], "run",
     "--file is given twice (first as -f): give the prompt once"),
    (["tokenize", "-m", "{model}", "--prompt", "a", "-p", "b"], "tokenize",
     "-p is given twice (first as --prompt): give the text once"),
    (["perplexity", "-m", "{model}", "--file", "a.txt", "-f", "b.txt"], "perplexity",
     "-f is given twice (first as --file): give the text once"),
    (["run", "-m", "{model}", "--tokens", ","], "run", "--tokens lists no token id"),
    (["logits", "-m", "{model}", "--tokens", "", "-o", "x.bin"], "logits", "--tokens lists no token id"),
    (["perplexity", "-m", "{model}", "-f", "a.txt", "--tokens", "b.txt"], "perplexity",
     "-f and --tokens both give the text: give one"),
    (["pack"], "pack", "expected one MODEL argument"),
    # An empty file name names no file: refused rather than taken as the option left out
    # (no state saved or loaded, no heat map, generated tokens recorded instead of a text).
    (["run", "-m", "{model}", "-f", ""], "run", "-f needs a file name"),
    (["run", "-m", "{model}", "--file", ""], "run", "--file needs a file name"),
    (["tokenize", "-m", "{model}", "-f", ""], "tokenize", "-f needs a file name"),
    (["perplexity", "-m", "{model}", "--file", ""], "perplexity", "--file needs a file name"),
    (["perplexity", "-m", "{model}", "--tokens", ""], "perplexity", "--tokens needs a file name"),
    (["run", "-m", "{model}", "--tokens", "1", "--save-state", ""], "run", "--save-state needs a file name"),
    (["run", "-m", "{model}", "--tokens", "1", "--load-state", ""], "run", "--load-state needs a file name"),
    (["logits", "-m", "{model}", "--tokens", "1", "--out", ""], "logits", "--out needs a file name"),
    (["trace", "synth", "--heat", "", "-o", "x.trace"], "trace synth", "--heat needs a file name"),
    (["trace", "synth", "-o", ""], "trace synth", "-o needs a file name"),
    (["trace", "record", "-m", "{model}", "-f", "", "-o", "x.trace"], "trace record", "-f needs a file name"),
    (["trace", "record", "-m", "{model}", "-o", ""], "trace record", "-o needs a file name"),
    (["generate", "--preset", "tiny", "-o", ""], "generate", "-o needs a file name"),
    (["pack", "{model}", "-o", ""], "pack", "--output needs a file name"),
    (["bench", "-m", "{model}", "--profile", ""], "bench", "--profile needs a file name"),
    (["run", "-m", "{model}", "--tokens", "1", "--packed", ""], "run", "--packed needs a file name"),
    (["run", "--tokens", "1", "--model", ""], "run", "--model needs a file name"),
    (["tokenize", "-p", "a", "-m", ""], "tokenize", "-m needs a file name"),
    (["demo", "--model", ""], "demo", "--model needs a file name"),
    (["bench", "-m", ""], "bench", "-m needs a file name"),
    (["trace", "record", "-m", "", "-o", "x.trace"], "trace record", "-m needs a file name"),
    # bench and trace record take the same --feed names and word a bad one alike.
    (["trace", "record", "-m", "{model}", "-o", "x.trace", "--feed", "sideways"], "trace record",
     "unknown feed mode 'sideways' (greedy, random)"),
    (["bench", "-m", "{model}", "--feed", "sideways"], "bench", "unknown feed mode 'sideways' (greedy, random)"),
    (["trace", "record", "-o", "x.trace"], "trace record", "-m MODEL and -o TRACE are required"),
])
def test_usage_errors_name_the_problem_and_point_to_help(cli_path, model, trace, tmp_path, args, command, what):
    r = subprocess.run([str(cli_path), *[a.format(model=model, trace=trace) for a in args]], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr == f"moestream {command}: {what}\n'moestream {command} --help' lists the options.\n"
    assert r.stdout == ""
    assert list(tmp_path.iterdir()) == []
    # The help it points to exists.
    help = cli(cli_path, *command.split(), "--help")
    assert help.returncode == 0 and help.stdout.startswith(f"usage: moestream {command.split()[0]}"), help


# Every command that takes a memory budget words a bad one alike: the option,
# what it takes (a share too where the command takes one) and the value.
@pytest.mark.parametrize("args,command,option,takes", [
    (["run", "-m", "{model}", "--tokens", "1"], "run", "--memory-budget", "a size (4096, 512MiB, 1.5GiB, ...)"),
    (["logits", "-m", "{model}", "--tokens", "1", "-o", "x.bin"], "logits", "--memory-budget",
     "a size (4096, 512MiB, 1.5GiB, ...)"),
    (["perplexity", "-m", "{model}", "--tokens", "1,2"], "perplexity", "--memory-budget",
     "a size (4096, 512MiB, 1.5GiB, ...)"),
    (["tokenize", "-m", "{model}", "-p", "hi"], "tokenize", "--memory-budget", "a size (4096, 512MiB, 1.5GiB, ...)"),
    (["inspect", "{model}"], "inspect", "--memory-budget", "a size (4096, 512MiB, 1.5GiB, ...)"),
    (["trace", "record", "-m", "{model}", "-o", "x.trace"], "trace record", "--memory-budget",
     "a size (4096, 512MiB, 1.5GiB, ...)"),
    (["bench", "-m", "{model}"], "bench", "--memory-budget", "a positive share or size (50%, 512MiB, 1.5GiB, ...)"),
    (["demo", "--model", "{model}"], "demo", "--budget", "a positive share or size (50%, 512MiB, 1.5GiB, ...)"),
])
@pytest.mark.parametrize("value", ["lots", "-1GiB", "12 parsecs"])
def test_every_command_words_a_bad_memory_budget_alike(cli_path, model, tmp_path, args, command, option, takes,
                                                       value):
    args = [a.format(model=model) for a in args]
    r = subprocess.run([str(cli_path), *args, "--memory-budget", value], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr == (f"moestream {command}: {option} takes {takes}, got '{value}'\n"
                        f"'moestream {command} --help' lists the options.\n"), r.stderr
    assert list(tmp_path.iterdir()) == []


def test_sizes_between_63_and_64_bits_are_not_wrapped(cli_path, model):
    # 10000000 TiB needs all 64 bits: it must come back whole, not as 2^63.
    r = cli(cli_path, "inspect", model, "--json", "--memory-budget", "10000000T")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memory_budget"] == 10000000 << 40
    r = cli(cli_path, "inspect", model, "--json", "--memory-budget", "16777216T")  # 2^64 bytes
    assert r.returncode == 2 and "--memory-budget" in r.stderr, r.stderr


def test_greedy_commands_fail_on_logits_that_are_not_numbers(cli_path, tmp_path):
    """A model whose weights hold NaN gives NaN logits: run, perplexity, bench and trace record
    must say so and fail, not print token 0 or "perplexity nan" with status 0."""
    from reference.gguf_reader import GGUFReader
    model = tmp_path / "nan.gguf"
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "--quant", "f32", "-o", str(model)],
                   check=True, capture_output=True)
    norm = GGUFReader(str(model)).tensors["output_norm.weight"]
    with open(model, "r+b") as f:
        f.seek(norm.file_offset)
        f.write(b"\x00\x00\xc0\x7f" * (norm.nbytes // 4))  # f32 quiet NaN
    ids = tmp_path / "ids.txt"
    ids.write_text("1,2,3,4")
    r = cli(cli_path, "run", "-m", model, "--tokens", "1,2", "-n", "3")
    assert r.returncode == 1 and "non-finite" in r.stderr, r.stderr
    assert r.stdout.strip() == ""
    r = cli(cli_path, "perplexity", "-m", model, "--tokens", ids)
    assert r.returncode == 1 and "non-finite" in r.stderr and "perplexity" not in r.stdout, r.stdout + r.stderr
    r = cli(cli_path, "bench", "-m", model, "-n", "2", "--prompt", "2", "--io-mode", "mmap", "--feed", "greedy",
            "--no-cgroup", "--json")
    run = json.loads(r.stdout)["runs"][0]
    assert not run["ok"] and "non-finite" in run["error"], run["error"]
    r = cli(cli_path, "trace", "record", "-m", model, "--tokens", "2", "--prompt", "2", "-o", tmp_path / "t.trace")
    assert r.returncode == 1 and "non-finite" in r.stderr, r.stderr


def test_a_profile_that_cannot_be_used_is_named_in_a_warning(cli_path, model, tmp_path):
    # A profile that exists but is not one (or is another model's) is ignored and
    # replaced at close: the run says so, so the loss of the old file is not silent.
    profile = tmp_path / "p.prof"
    profile.write_bytes(b"not a usage profile at all, just some bytes")
    r = cli(cli_path, "bench", "-m", model, "-n", "2", "--prompt", "2", "--io-mode", "pread", "--warm",
            "--profile", profile)
    assert r.returncode == 0, r.stderr
    assert f"moestream: warning: usage profile ignored: {profile}: " in r.stderr, r.stderr
    # A missing profile is the first run's normal case: no warning.
    r = cli(cli_path, "bench", "-m", model, "-n", "2", "--prompt", "2", "--io-mode", "pread", "--warm",
            "--profile", tmp_path / "new.prof")
    assert r.returncode == 0 and "usage profile" not in r.stderr, r.stderr


@pytest.mark.parametrize("args,command,call", [
    (["run", "-m", "{missing}", "--tokens", "1"], "run", "moestream_open"),
    (["tokenize", "-m", "{missing}", "-p", "hi"], "tokenize", "moestream_open"),
    (["logits", "-m", "{missing}", "--tokens", "1", "--out", "x.bin"], "logits", "moestream_open"),
    (["perplexity", "-m", "{missing}", "--tokens", "{ids}"], "perplexity", "moestream_open"),
    (["inspect", "{missing}"], "inspect", "moestream_inspect"),
    (["pack", "{missing}"], "pack", "moestream_pack"),
    (["pack", "{model}", "-o", "{missing}", "--verify"], "pack --verify", "moestream_pack_verify"),
    (["trace", "info", "{missing}"], "trace info", "moestream_trace_info_get"),
    (["trace", "replay", "{missing}"], "trace replay", "moestream_trace_info_get"),
    (["trace", "record", "-m", "{missing}", "-o", "x.trace"], "trace record", "moestream_open"),
    (["bench", "-m", "{missing}"], "bench", "moestream_inspect"),
    (["demo", "--model", "{missing}"], "demo", "moestream_inspect"),
    (["generate", "--preset", "tiny", "-o", "{missing_dir}/x.gguf"], "generate", "moestream_generate_model"),
])
def test_every_command_reports_a_failed_library_call_alike(cli_path, model, tmp_path, args, command, call):
    # One line: the command, the call that failed (the library's message names
    # it first), the library's message and the status name.
    ids = tmp_path / "ids.txt"
    ids.write_text("1 2 3")
    missing = tmp_path / "absent"
    args = [a.format(model=model, missing=missing, missing_dir=missing, ids=ids) for a in args]
    r = subprocess.run([str(cli_path), *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    last = r.stderr.splitlines()[-1]
    assert re.fullmatch(rf"moestream {command}: {call}: .*{missing}.*No such file or directory.* \(I/O error\)",
                        last), r.stderr


STRICT_NUMBER_CASES = [
    # integers: decimal digits, a '-' where negatives are allowed
    *[(["run", "-m", "{model}", "--tokens", "1", option], value)
      for option in ("-n", "--ctx", "--top-k") for value in ("0x10", "+5", " 5", "5 ", "1e3", "5.0", "")],
    (["run", "-m", "{model}", "--tokens", "1", "--repeat-last-n"], "+1"),
    (["bench", "-m", "{model}", "--prompt"], "+2"),
    (["generate", "-o", "x.gguf", "--layers"], " 2"),
    (["trace", "synth", "-o", "x.trace", "--layers"], "+2"),
    (["trace", "synth", "-o", "x.trace", "--window"], "0x10"),
    (["demo", "--model", "{model}", "-n"], "+2"),
    # sizes: a decimal number and a documented unit
    *[(["run", "-m", "{model}", "--tokens", "1", "--memory-budget"], value)
      for value in ("0x10", "+5", " 5", "5 ", "1e3", "-0", "inf", "nan", "5 GiB")],
    (["inspect", "{model}", "--memory-budget"], "0x100000"),
    (["bench", "-m", "{model}", "--memory-budget"], "+1GiB"),
    (["bench", "-m", "{model}", "--sweep"], "0x1p4%"),
    (["trace", "replay", "{trace}", "--budget"], " 50%"),
    # a share or a size never starts with '-' (from_chars reads "-0" as 0)
    (["trace", "replay", "{trace}", "--budget"], "-0%"),
    (["trace", "replay", "{trace}", "--budget"], "-0"),
    (["bench", "-m", "{model}", "--sweep"], "-1%"),
    (["trace", "synth", "-o", "x.trace", "--expert-bytes"], "0x100"),
    # real numbers: decimal, an exponent allowed, finite
    *[(["run", "-m", "{model}", "--tokens", "1", "--temp"], value) for value in ("0x1", "+1", " 1", "1 ", "inf", "nan")],
    (["trace", "synth", "-o", "x.trace", "--reuse"], "+0.5"),
]


@pytest.mark.parametrize("args,value", STRICT_NUMBER_CASES)
def test_numbers_are_plain_decimal(cli_path, model, trace, tmp_path, args, value):
    # strtol and strtod read hexadecimal, a leading '+' and leading blanks:
    # "--memory-budget 0x10" was a budget of 16 bytes.
    args = [a.format(model=model, trace=trace) for a in args]
    r = subprocess.run([str(cli_path), *args, value], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert args[-1] in r.stderr and f"'{value}'" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option,value", [("-n", "2"), ("--ctx", "16"), ("--memory-budget", "1.5GiB"),
                                          ("--memory-budget", "2g"), ("--temp", "0.5"), ("--temp", "5e-1"),
                                          ("--repeat-last-n", "-1"), ("--memory-budget", "0")])
def test_plain_decimal_numbers_are_taken(cli_path, model, option, value):
    r = cli(cli_path, "run", "-m", model, "--tokens", "1", "-n", "2", option, value)
    assert r.returncode == 0, r.stderr


SEED_COMMANDS = [
    ["run", "-m", "{model}", "--tokens", "1", "-n", "2", "--seed"],
    ["generate", "--preset", "tiny", "--size-only", "--seed"],
    ["trace", "synth", "--layers", "2", "--experts", "8", "--top-k", "2", "-n", "4", "-o", "x.trace", "--seed"],
    ["trace", "record", "-m", "{missing}", "-o", "x.trace", "--seed"],  # checked before the model is opened
    ["bench", "-m", "{missing}", "--seed"],
]


@pytest.mark.parametrize("args", SEED_COMMANDS)
def test_every_seed_is_an_unsigned_64_bit_integer(cli_path, model, tmp_path, args):
    args = [a.format(model=model, missing=tmp_path / "absent.gguf") for a in args]
    command = " ".join(args[:2] if args[0] == "trace" else args[:1])
    for bad in ("-1", "18446744073709551616", "+1", "1.0"):
        r = subprocess.run([str(cli_path), *args, bad], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert r.returncode == 2, (bad, r.returncode, r.stderr)
        assert r.stderr.startswith(f"moestream {command}: --seed takes an integer from 0 to 18446744073709551615, "
                                   f"got '{bad}'\n"), r.stderr
    r = subprocess.run([str(cli_path), *args, "18446744073709551615"], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == (1 if "absent.gguf" in " ".join(args) else 0), r.stderr


def test_trace_record_takes_the_io_modes_run_takes(cli_path, model, tmp_path):
    # The routing is the model's, whichever way its bytes are read.
    traces = {}
    for mode in ("mmap", "pread", "direct"):
        out = tmp_path / f"{mode}.trace"
        r = cli(cli_path, "trace", "record", "-m", model, "--io-mode", mode, "--prompt", "3", "--tokens", "4", "-o", out)
        assert r.returncode == 0, (mode, r.stderr)
        traces[mode] = out.read_bytes()
    assert traces["pread"] == traces["mmap"] and traces["direct"] == traces["mmap"]
    for name, args in (("run", ["run", "-m", model, "--tokens", "1"]),
                       ("trace record", ["trace", "record", "-m", model, "-o", tmp_path / "x.trace"])):
        r = cli(cli_path, *args, "--io-mode", "sideways")
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(f"moestream {name}: unknown io mode 'sideways' (auto, mmap, direct, pread)\n"), r.stderr
    assert "--io-mode auto|mmap|direct|pread" in cli(cli_path, "trace", "record", "--help").stdout


@pytest.mark.parametrize("args", [
    ["run", "-m", "{model}", "--tokens=1,2", "--n-predict=2", "--ctx=16", "--temp=0"],
    ["logits", "-m", "{model}", "--tokens=1,2", "--out={out}", "--batch=1"],
    ["perplexity", "-m", "{model}", "--tokens={ids}", "--ctx=16"],
    ["tokenize", "--model={model}", "--prompt=hi", "--threads=1"],
    ["bench", "-m", "{model}", "--tokens=2", "--prompt=2", "--io-mode=pread", "--warm"],
])
def test_every_command_takes_an_option_value_after_an_equals_sign(cli_path, model, tmp_path, args):
    # parse_args took "--name=value"; the commands that read options one at a time refused it as an unknown option.
    ids = tmp_path / "ids.txt"
    ids.write_text("1 2 3")
    r = cli(cli_path, *[a.format(model=model, out=tmp_path / "l.bin", ids=ids) for a in args])
    assert r.returncode == 0, r.stderr


def test_a_value_consumed_by_an_option_is_not_split_at_its_equals_sign(cli_path, model):
    r = cli(cli_path, "tokenize", "-m", model, "-p", "--x=1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == cli(cli_path, "tokenize", "-m", model, "--prompt=--x=1").stdout


def test_logits_takes_output_as_every_command_that_writes_a_file(cli_path, model, tmp_path):
    # -o is --output for generate, pack and trace; logits named its -o only --out.
    out = tmp_path / "l.bin"
    r = cli(cli_path, "logits", "-m", model, "--tokens", "1,2", "--output", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (cli(cli_path, "logits", "-m", model, "--tokens", "1,2", "-o", tmp_path / "o.bin"),
                                (tmp_path / "o.bin").read_bytes())[1]
