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

# "-m", "--memory-budget", "--attn-kv-b"; not "top-k", "gpt-oss", "-1" or the
# optional part of a name ("-decay" of "lfu[-decay]").
OPTION = re.compile(r"(?<![\w-])(?<!\w\[)--?[A-Za-z][\w-]*")
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


# Options that take one of a few names (--io-mode, --prefetch, --cache-policy,
# ...): the names --help lists for one and the names its parser takes must be
# the same, spellings of one name included ("lfu[-decay]" lists lfu and
# lfu-decay). Which options take names, and the names their usage errors list,
# is asked of the binary too: a name a parser does not take is worded
# "unknown WHAT 'NAME' (NAMES)".
UNKNOWN_NAME = re.compile(r"unknown ([\w ]+) '(.*)' \(([^)]*)\)\n")
NOT_A_NAME = "not-a-name"
NAME_COMMANDS = [["run"], ["logits"], ["perplexity"], ["tokenize"], ["bench"], ["trace", "record"],
                 ["trace", "replay"]]
# A name: a word, or a word with an optional part ("previous[-token]").
NAME = re.compile(r"([a-z][a-z0-9-]*)(?:\[(-[a-z0-9-]+)\])?")


def spellings(word):
    m = NAME.fullmatch(word)
    if not m:
        return set()
    return {m.group(1), m.group(1) + m.group(2)} if m.group(2) else {m.group(1)}


def listed_names(text, option):
    """The names the help lists for `option`: "OPTION a|b[-c]|d" in a usage line,
    or "OPTION X   a, b[-c] or d" in an option's description."""
    names = set()
    for m in re.finditer(rf"(?<![\w-]){re.escape(option)} ([a-z][\w\[\]|,.-]*\|[\w\[\]|,.-]*)", text):
        for word in m.group(1).replace("[,...]", "").split("|"):
            # The last word ends with the usage line's "]" when the option is optional.
            names |= spellings(word[:-1] if word.count("]") > word.count("[") else word)
    for m in re.finditer(rf"^\s+(?:-\w, )?{re.escape(option)} [A-Z]+ +(.*)$", text, re.M):
        for word in re.findall(r"[a-z][a-z0-9-]*(?:\[-[a-z0-9-]+\])?", m.group(1)):
            names |= spellings(word) - {"or"}
    return names


@pytest.fixture(scope="module")
def name_probe(cli_path, tmp_path_factory):
    """probe(command, option, value) -> None when the parser takes the name,
    else what its error calls the names and the names it lists. Each command is given arguments that stop
    it before it does any work with a name it takes: an option no command takes
    after it, a model that is not there, or a replay of a few tokens."""
    tmp = tmp_path_factory.mktemp("names")
    missing = str(tmp / "absent.gguf")
    trace = tmp / "s.trace"
    subprocess.run([str(cli_path), "trace", "synth", "--layers", "2", "--experts", "8", "--top-k", "2", "-n", "8",
                    "-o", str(trace)], check=True, capture_output=True)
    around = {
        "bench": (["bench", "-m", missing], []),
        "trace record": (["trace", "record", "-m", missing, "-o", str(tmp / "x.trace")], []),
        "trace replay": (["trace", "replay", str(trace), "--budget", "50%"], []),
    }

    def probe(command, option, value):
        key = " ".join(command)
        before, after = around.get(key, (command, [NOT_AN_OPTION]))
        r = subprocess.run([str(cli_path), *before, option, value, *after], capture_output=True, text=True,
                           timeout=60, cwd=tmp)
        m = UNKNOWN_NAME.search(r.stderr)
        return (m.group(1), m.group(3).split(", ")) if m and m.group(2) == value else None

    return probe


@pytest.fixture(scope="module")
def name_options(cli_path, helps, name_probe):
    """Per command, per WHAT of its usage errors: the options that take those
    names, the names the help lists for them and the names the error lists."""
    found = {}
    with ThreadPoolExecutor(8) as pool:
        for command in NAME_COMMANDS:
            text = help_text(cli_path, command)
            options = sorted(helps[" ".join(command)])
            errors = pool.map(lambda o: (o, name_probe(command, o, NOT_A_NAME)), options)
            by_what = {}
            for option, error in errors:
                if error is None:
                    continue
                entry = by_what.setdefault(error[0], {"options": [], "errors": set(error[1]), "listed": set()})
                entry["options"].append(option)
                entry["listed"] |= listed_names(text, option)
            found[" ".join(command)] = by_what
    return found


def test_the_name_probe_tells_a_taken_name_from_an_unknown_one(name_probe):
    assert name_probe(["run"], "--io-mode", "mmap") is None
    assert name_probe(["run"], "--io-mode", "resident") == ("io mode", ["auto", "mmap", "direct", "pread"])
    assert name_probe(["bench"], "--io-mode", "resident") is None
    assert name_probe(["trace", "replay"], "--policy", "all") is None


def test_names_are_read_from_both_forms_of_help():
    assert listed_names("  [--policy auto|lfu[-decay]|x[,...]] [--io-mode a|b]", "--policy") == \
        {"auto", "lfu", "lfu-decay", "x"}
    assert listed_names("  --prefetch M             auto, previous[-token] or both\n", "--prefetch") == \
        {"auto", "previous", "previous-token", "both"}


@pytest.mark.parametrize("command", NAME_COMMANDS, ids=" ".join)
def test_help_lists_every_name_the_parser_takes_and_no_other(cli_path, name_options, name_probe, command):
    options = name_options[" ".join(command)]
    assert options, f"{command}: no option takes names"
    # The candidates for names taken but not listed: every name any command
    # lists for the same option, and the parts of each ("lfu" of "lfu-decay").
    everything = {}
    for by_what in name_options.values():
        for what, entry in by_what.items():
            pool = everything.setdefault(what, set())
            for name in entry["listed"] | entry["errors"]:
                pool |= {name, *name.split("-")}
                pool |= {name[:i] for i in range(len(name)) if name[i] == "-"}
    for what, entry in options.items():
        option, listed = entry["options"][0], entry["listed"]
        assert listed, f"--help lists no {what} names for {entry['options']}"
        assert entry["errors"] <= listed, (entry["options"], entry["errors"], listed)
        candidates = sorted(listed | everything[what])
        with ThreadPoolExecutor(8) as pool:
            taken = {n for n, e in zip(candidates, pool.map(lambda n: name_probe(command, option, n), candidates))
                     if e is None}
        assert listed - taken == set(), f"{option}: in --help but not taken: {sorted(listed - taken)}"
        assert taken - listed == set(), f"{option}: taken but not in --help: {sorted(taken - listed)}"
