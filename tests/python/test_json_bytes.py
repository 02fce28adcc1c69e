"""--json output stays valid JSON (UTF-8) when a path is not: a Linux file
name is bytes, and each byte outside a well-formed UTF-8 sequence is printed
as U+FFFD while valid multi-byte characters pass unchanged."""
import json
import os
import subprocess

import pytest

# 0xFF never occurs in UTF-8; 0xC3 starts a sequence that '(' breaks; ED A0 80
# encodes a surrogate, which UTF-8 forbids; "é" is valid and must survive.
ODD_NAME = b"m\xffodel-\xc3(-\xed\xa0\x80-\xc3\xa9"
# What each of those bytes reads as.
SHOWN = ODD_NAME.decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def odd_dir(cli_path, tmp_path_factory):
    directory = os.path.join(os.fsencode(tmp_path_factory.mktemp("json")), ODD_NAME)
    os.mkdir(directory)
    subprocess.run([str(cli_path), "generate", "--preset", "tiny", "-o", os.path.join(directory, b"m.gguf")],
                   check=True, capture_output=True)
    return directory


def json_of(cli_path, *args):
    out = subprocess.run([os.fsencode(str(cli_path)), *args], capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # bytes: rejected unless they are UTF-8


def test_inspect_json_with_a_non_utf8_path(cli_path, odd_dir):
    path = os.path.join(odd_dir, b"m.gguf")
    data = json_of(cli_path, b"inspect", path, b"--json")
    assert data["path"] == path.decode("utf-8", errors="replace")
    assert SHOWN in data["path"] and "\ufffdodel-\ufffd(-\ufffd\ufffd\ufffd-\u00e9" in data["path"]


def test_bench_json_with_a_non_utf8_path(cli_path, odd_dir):
    path = os.path.join(odd_dir, b"m.gguf")
    data = json_of(cli_path, b"bench", b"-m", path, b"-n", b"2", b"--prompt", b"2", b"--io-mode", b"mmap", b"--json")
    assert data["model"] == path.decode("utf-8", errors="replace")


def test_trace_json_with_a_non_utf8_path(cli_path, odd_dir):
    trace = os.path.join(odd_dir, b"t.trace")
    subprocess.run([os.fsencode(str(cli_path)), b"trace", b"synth", b"--layers", b"2", b"--experts", b"8",
                    b"--top-k", b"2", b"-n", b"20", b"-o", trace], check=True, capture_output=True)
    info = json_of(cli_path, b"trace", b"info", trace, b"--json")
    assert info["trace"] == trace.decode("utf-8", errors="replace")
    replay = json_of(cli_path, b"trace", b"replay", trace, b"--budget", b"50%", b"--json")
    assert replay["trace"] == trace.decode("utf-8", errors="replace")
