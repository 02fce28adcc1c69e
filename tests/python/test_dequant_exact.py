"""The engine's dequantisation (through tests/tools/dequant_tool) equals reference/dequant.py
bit for bit on random blocks of every type, including edge blocks (all-zero blocks, zero and
maximal sub-scales, extreme and denormal f16 scales, signed zeros).

    dequant_tool TYPE_ID IN.bin OUT.f32     # raw blocks in, float32 out

The reference evaluates each block formula in float32 with one rounding per operation (no
fused multiply-add); see reference/dequant.py. Skips while the tool is not built."""
import subprocess

import numpy as np
import pytest

from reference import dequant
from tools.gguf_writer import BLOCK_GEOMETRY
from tools.quants import ALL_TYPES, random_blocks

N_BLOCKS = 3000


@pytest.fixture(scope="module")
def dequant_tool(tools_dir):
    path = tools_dir / "dequant_tool"
    if not path.exists():
        pytest.skip(f"{path} not built yet")
    return path


def _describe_mismatch(t, got, want, blocks):
    be = BLOCK_GEOMETRY[t][0]
    bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
    lines = [f"{t.name}: {bad.size} of {want.size} values differ"]
    for i in bad[:5]:
        b = i // be
        lines.append(f"  element {i} (block {b}, index {i % be}): engine {got[i]!r} "
                     f"(0x{got.view(np.uint32)[i]:08x}) vs reference {want[i]!r} (0x{want.view(np.uint32)[i]:08x}); "
                     f"block bytes {blocks[b].tobytes().hex()}")
    return "\n".join(lines)


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_dequant_bit_exact(dequant_tool, tmp_path, t):
    be, bb = BLOCK_GEOMETRY[t]
    n = N_BLOCKS if be > 1 else N_BLOCKS * 16
    blocks = random_blocks(t, n, np.random.default_rng(1000 + int(t)))
    src, dst = tmp_path / "in.bin", tmp_path / "out.f32"
    blocks.tofile(src)
    p = subprocess.run([str(dequant_tool), str(int(t)), str(src), str(dst)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, f"dequant_tool {int(t)} failed: {p.stderr.strip()}"
    got = np.fromfile(dst, dtype="<f4")
    with np.errstate(over="ignore"):
        want = dequant.dequantize(blocks, int(t))
    assert got.size == want.size, f"{t.name}: tool wrote {got.size} floats, expected {want.size}"
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), _describe_mismatch(t, got, want, blocks)

