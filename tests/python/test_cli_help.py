"""Every command's --help lists exactly the options its parser takes: an option
the parser takes but the help leaves out cannot be found, one the help lists
but the parser refuses is a broken promise. What a parser takes is asked of the
binary itself, one option at a time, so the check follows the parsers as they
change instead of a list kept beside them."""
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

COMMANDS = [["run"], ["logits"], ["perplexity"], ["tokenize"], ["bench"], ["demo"], ["generate"], ["inspect"],
            ["pack"], ["version"], ["trace", "synth"], ["trace", "info"], ["trace", "replay"], ["trace", "record"]]

# "-m", "--memory-budget", "--attn-kv-b"; not "top-k", "gpt-oss" or "-1".
OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
# What every command's parser answers for an option it does not take.
UNKNOWN = "unknown option {}\n"
# No command takes it: after an option the command takes, the parser stops at
# it, so that no probe ever runs anything.
NOT_AN_OPTION = "--not-an-option"


def run(cli_path, *args):
    return subprocess.run([str(cli_path), *args], capture_output=True, text=True, timeout=60)


def help_text(cli_path, command):
    r = run(cli_path, *command, "--help")
    assert r.returncode == 0 and r.stderr == "", (command, r.stderr)
    if command[0] != "trace":
        return r.stdout
    # trace's help describes its subcommands in one text: a subcommand's part
    # is its usage line and the indented lines that continue it.
    part, current = [], None
    for line in r.stdout.splitlines():
        if m := re.match(r"(?:usage: )?\s*moestream trace (\w+)", line):
            current = m.group(1)
        elif not line.startswith(" "):
            current = None
        if current == command[1]:
            part.append(line)
    assert part, r.stdout
    return "\n".join(part)


def listed_options(text):
    return set(OPTION.findall(text)) - {"--help", "-h"}


def takes(cli_path, command, option):
    # A value after the option: one that takes a value consumes it, a flag
    # leaves it as an argument, which the parser reports after NOT_AN_OPTION
    # or which is refused as an unexpected argument ('1').
    r = run(cli_path, *command, option, "1", NOT_AN_OPTION)
    assert r.returncode == 2, (command, option, r.returncode, r.stdout, r.stderr)
    return not re.search(UNKNOWN.format(re.escape(option)), r.stderr)


@pytest.fixture(scope="module")
def helps(cli_path):
    return {" ".join(c): listed_options(help_text(cli_path, c)) for c in COMMANDS}


def test_the_probe_tells_a_taken_option_from_an_unknown_one(cli_path):
    # The check below can fail: an option no command takes is found unknown.
    assert not takes(cli_path, ["run"], "--frobnicate")
    assert not takes(cli_path, ["trace", "record"], "--frobnicate")
    assert takes(cli_path, ["run"], "--temp") and takes(cli_path, ["trace", "record"], "--seed")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_lists_every_option_the_parser_takes_and_no_other(cli_path, helps, command):
    # The candidates: every option any command's help lists. One command
    # taking another's option (--threads, --memory-budget, --tokens, ...)
    # without listing it is the drift this finds.
    everything = set().union(*helps.values())
    listed = helps[" ".join(command)]
    with ThreadPoolExecutor(8) as pool:
        taken = {o for o, t in zip(sorted(everything), pool.map(lambda o: takes(cli_path, command, o),
                                                                 sorted(everything))) if t}
    assert taken - listed == set(), f"taken but not in --help: {sorted(taken - listed)}"
    assert listed - taken == set(), f"in --help but not taken: {sorted(listed - taken)}"


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_prints_its_help_for_both_spellings(cli_path, command, flag):
    r = run(cli_path, *command, flag)
    assert r.returncode == 0 and r.stderr == "", (command, flag, r.stderr)
    assert r.stdout.startswith(f"usage: moestream {command[0]}"), r.stdout
