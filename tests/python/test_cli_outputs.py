"""Output the CLI cannot write is a failure."""
import subprocess

import pytest


@pytest.mark.parametrize("args", [["version"], ["generate", "--preset", "tiny", "--size-only"], ["trace", "--help"]])
def test_output_that_cannot_be_written_fails_the_command(cli_path, args):
    with open("/dev/full", "w") as full:
        r = subprocess.run([str(cli_path), *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "cannot write output" in r.stderr
