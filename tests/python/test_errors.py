"""One test per row of docs/errors.md that is reached through the public C API:
each feeds the trigger named in the table and checks the status, that the
message names the problem, and that nothing was left half done. Test names
match the table."""
import ctypes
import os
import struct
import subprocess
import threading

import pytest

from capi_support import N_CTX, load, open_ctx, opened, save, step
from moestream import _ffi
from moestream._errors import Status

N_VOCAB = 64


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from tools.make_model import ModelSpec, make_model
    d = tmp_path_factory.mktemp("errors")
    spec = ModelSpec(arch="qwen3moe", n_embd=64, n_layer=2, n_head=2, n_head_kv=1, n_expert=4, n_expert_used=2,
                     n_ff_expert=32, n_vocab=N_VOCAB, n_ctx=64, quant_mix="q8_0", seed=1)
    make_model(d / "a.gguf", spec)
    make_model(d / "b.gguf", spec, seed=2)  # same layout, other weights
    return d


@pytest.fixture
def ctx(lib, models):
    with opened(lib, models / "a.gguf") as handle:
        yield handle


# --- MOESTREAM_ERR_INVALID_ARGUMENT ----------------------------------------

def test_invalid_argument_null_handle(lib, tmp_path):
    logits = (ctypes.c_float * N_VOCAB)()
    calls = [
        lambda: step(lib, None, [1], logits),
        lambda: lib.raw("moestream_reset")(None),
        lambda: save(lib, None, tmp_path / "s"),
        lambda: load(lib, None, tmp_path / "s"),
        lambda: lib.raw("moestream_stats_reset")(None),
    ]
    for call in calls:
        assert call() == Status.INVALID_ARGUMENT
        assert "NULL" in lib.last_error()


def test_invalid_argument_struct_size(lib, models):
    for size in (0, 8, ctypes.sizeof(_ffi.Params) + 8):
        status, out = open_ctx(lib, models / "a.gguf", struct_size=size)
        assert status == Status.INVALID_ARGUMENT
        assert "struct_size" in lib.last_error()
        assert not out


def test_invalid_argument_token_out_of_range(lib, ctx):
    assert step(lib, ctx, [1, 2]) == 0
    for bad in (N_VOCAB, -1, 2**31 - 1):
        assert step(lib, ctx, [3, bad]) == Status.INVALID_ARGUMENT
        assert str(bad) in lib.last_error()
    assert lib.moestream_n_past(ctx) == 2


def test_invalid_argument_n_tokens(lib, ctx):
    arr = (ctypes.c_int32 * 1)(1)
    for n in (0, -1, -(2**31)):
        assert lib.raw("moestream_step")(ctx, arr, n, None) == Status.INVALID_ARGUMENT
    assert lib.raw("moestream_step")(ctx, None, 1, None) == Status.INVALID_ARGUMENT
    assert lib.moestream_n_past(ctx) == 0


def test_invalid_argument_after_failed_open(lib, tmp_path):
    status, out = open_ctx(lib, tmp_path / "missing.gguf")
    assert status == Status.IO
    assert not out  # *out is NULL after a failed open ...
    # ... so every later call gets a clean error instead of a crash.
    assert step(lib, out, [1], None) == Status.INVALID_ARGUMENT
    assert save(lib, out, tmp_path / "s") == Status.INVALID_ARGUMENT
    assert lib.moestream_n_past(out) == -1
    lib.moestream_close(out)


def test_invalid_argument_output_that_is_the_model(lib, models, tmp_path):
    # A state file, routing trace or usage profile is renamed over its path:
    # named by the model's own path (or a link to it), that would replace the model.
    model = tmp_path / "m.gguf"
    model.write_bytes((models / "a.gguf").read_bytes())
    link = tmp_path / "link.gguf"
    link.symlink_to(model)
    hard = tmp_path / "hard.gguf"
    os.link(model, hard)
    original = model.read_bytes()
    for path in (model, link, hard):
        for field in ("profile_path", "routing_trace_path"):
            # pread: the usage profile is only read and written when experts are streamed.
            status, out = open_ctx(lib, model, io_mode=3, **{field: str(path).encode()})
            if status == 0:
                assert step(lib, out, [1, 2]) == 0
                lib.moestream_close(out)
            assert status == Status.INVALID_ARGUMENT and not out, (field, status)
            assert "m.gguf" in lib.last_error() and ("usage profile" in lib.last_error() or
                                                     "routing trace" in lib.last_error())
        with opened(lib, model) as handle:
            assert step(lib, handle, [1, 2]) == 0
            assert save(lib, handle, path) == Status.INVALID_ARGUMENT
            assert "state file" in lib.last_error() and "m.gguf" in lib.last_error()
            assert lib.moestream_n_past(handle) == 2
    assert model.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.gguf", "link.gguf", "m.gguf"]


# --- MOESTREAM_ERR_IO --------------------------------------------------------

def test_io_missing_model(lib, tmp_path):
    status, out = open_ctx(lib, tmp_path / "nowhere.gguf")
    assert status == Status.IO
    assert "nowhere.gguf" in lib.last_error() and "errno" in lib.last_error()


def test_io_state_path(lib, ctx, tmp_path):
    assert save(lib, ctx, tmp_path / "no-such-dir" / "s.state") == Status.IO
    assert "no-such-dir" in lib.last_error()
    assert load(lib, ctx, tmp_path / "absent.state") == Status.IO
    assert "absent.state" in lib.last_error()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


# --- MOESTREAM_ERR_BAD_FORMAT -------------------------------------------------

def test_bad_format_model(lib, models, tmp_path):
    data = (models / "a.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) // 3])
    (tmp_path / "junk.gguf").write_bytes(b"GGUF" + b"\xff" * 100)
    for name in ("cut.gguf", "junk.gguf"):
        status, out = open_ctx(lib, tmp_path / name)
        assert status == Status.BAD_FORMAT, lib.last_error()
        assert name in lib.last_error()
        assert not out


def _gguf_string(text):
    return struct.pack("<Q", len(text)) + text.encode()


def _u32_key(key, value):
    return _gguf_string(key) + struct.pack("<II", 4, value)  # 4: UINT32


def _tensor_dims(name, *ne):
    return _gguf_string(name) + struct.pack(f"<I{len(ne)}q", len(ne), *ne)


# models/a.gguf (qwen3moe, n_embd 64, head_dim 32, one KV head, 4 experts of 32
# rows) with one edit of its header that keeps every tensor's byte size: a
# file GGUF-valid whose tensors do not match its metadata.
TENSOR_MISMATCHES = {
    "fewer_layers": (_u32_key("qwen3moe.block_count", 2), _u32_key("qwen3moe.block_count", 1),
                     "tensor 'blk.1.attn_norm.weight' is not used by a 1-layer qwen3moe model"),
    "missing_tensor": (_gguf_string("blk.1.ffn_norm.weight"), _gguf_string("blk.1.ffn_norx.weight"),
                       "tensor 'blk.1.ffn_norm.weight' is missing"),
    "matrix_shape": (_tensor_dims("blk.0.attn_k.weight", 64, 32), _tensor_dims("blk.0.attn_k.weight", 32, 64),
                     "tensor 'blk.0.attn_k.weight' has shape [32, 64]; expected [64, 32]"),
    "expert_shape": (_tensor_dims("blk.1.ffn_up_exps.weight", 64, 32, 4),
                     _tensor_dims("blk.1.ffn_up_exps.weight", 64, 4, 32),
                     "tensor 'blk.1.ffn_up_exps.weight' has shape [64, 4, 32]; expected [64, 32, 4]"),
}


@pytest.mark.parametrize("case", sorted(TENSOR_MISMATCHES))
def test_bad_format_tensors_inspect_as_open(lib, models, tmp_path, cli_path, case):
    old, new, problem = TENSOR_MISMATCHES[case]
    data = (models / "a.gguf").read_bytes()
    assert data.count(old) == 1
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(data.replace(old, new))
    status, out = open_ctx(lib, path)
    open_error = lib.last_error()
    assert status == Status.BAD_FORMAT, open_error
    assert not out
    message = f"{path}: {problem}"
    assert open_error.startswith("moestream_open: ") and message in open_error
    # inspect checks the tensors as open binds them, without loading weights:
    # the same status and the same message (after the function's name).
    info = _ffi.ModelInfo()
    lib.moestream_model_info_init(ctypes.byref(info))
    assert lib.raw("moestream_inspect")(str(path).encode(), 0, ctypes.byref(info)) == Status.BAD_FORMAT
    assert lib.last_error() == open_error.replace("moestream_open: ", "moestream_inspect: ", 1)
    r = subprocess.run([str(cli_path), "inspect", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and message in r.stderr, (r.returncode, r.stderr)
    assert r.stdout == ""


@pytest.mark.parametrize("missing", ["blk.1.attn_output.bias", "blk.0.ffn_gate_inp.bias"])
def test_bad_format_tensors_gpt_oss_without_a_bias(lib, tmp_path, missing):
    # Zero biases would give other logits than the model's, silently.
    from tools.make_model import ModelSpec, make_model
    path = tmp_path / "oss.gguf"
    make_model(path, ModelSpec(arch="gpt-oss", n_embd=64, n_layer=2, n_head=2, n_head_kv=1, n_expert=4,
                               n_expert_used=2, n_ff_expert=32, n_vocab=64, n_ctx=64, quant_mix="q8_0",
                               omit_tensors=(missing,)))
    status, out = open_ctx(lib, path)
    assert status == Status.BAD_FORMAT, lib.last_error()
    assert f"tensor '{missing}' is missing" in lib.last_error()
    assert not out
    make_model(path, ModelSpec(arch="gpt-oss", n_embd=64, n_layer=2, n_head=2, n_head_kv=1, n_expert=4,
                               n_expert_used=2, n_ff_expert=32, n_vocab=64, n_ctx=64, quant_mix="q8_0"))
    status, out = open_ctx(lib, path)
    assert status == Status.OK, lib.last_error()
    lib.moestream_close(out)


def test_bad_format_state(lib, ctx, tmp_path):
    assert step(lib, ctx, [1, 2, 3]) == 0
    good = tmp_path / "good.state"
    assert save(lib, ctx, good) == 0
    data = good.read_bytes()
    (tmp_path / "cut.state").write_bytes(data[:-5])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    (tmp_path / "flip.state").write_bytes(bytes(flipped))
    (tmp_path / "text.state").write_bytes(b"hello")
    assert step(lib, ctx, [4]) == 0
    for name in ("cut.state", "flip.state", "text.state"):
        assert load(lib, ctx, tmp_path / name) == Status.BAD_FORMAT
        assert name in lib.last_error()
        assert lib.moestream_n_past(ctx) == 4  # untouched


# --- MOESTREAM_ERR_UNSUPPORTED -----------------------------------------------

def test_unsupported_architecture(lib, models, tmp_path):
    data = (models / "a.gguf").read_bytes().replace(b"qwen3moe", b"qwen9moe")
    (tmp_path / "other-arch.gguf").write_bytes(data)
    status, out = open_ctx(lib, tmp_path / "other-arch.gguf")
    assert status == Status.UNSUPPORTED
    assert "qwen9moe" in lib.last_error()
    assert not out
    info = _ffi.ModelInfo()
    lib.moestream_model_info_init(ctypes.byref(info))
    assert lib.raw("moestream_inspect")(str(tmp_path / "other-arch.gguf").encode(), 0,
                                        ctypes.byref(info)) == Status.UNSUPPORTED
    assert "qwen9moe" in lib.last_error()


def test_unsupported_state_version(lib, ctx, tmp_path):
    path = tmp_path / "s.state"
    assert save(lib, ctx, path) == 0
    data = bytearray(path.read_bytes())
    data[8:12] = (99).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    assert load(lib, ctx, path) == Status.UNSUPPORTED
    assert "version 99" in lib.last_error()


# --- MOESTREAM_ERR_STATE_MISMATCH --------------------------------------------

def test_state_mismatch_other_model(lib, ctx, models, tmp_path):
    status, other = open_ctx(lib, models / "b.gguf")
    assert status == 0
    try:
        assert step(lib, other, [1, 2]) == 0
        assert save(lib, other, tmp_path / "b.state") == 0
    finally:
        lib.moestream_close(other)
    assert load(lib, ctx, tmp_path / "b.state") == Status.STATE_MISMATCH
    assert "another model" in lib.last_error()
    assert lib.moestream_n_past(ctx) == 0


def test_state_mismatch_other_shape(lib, ctx, models, tmp_path):
    status, wide = open_ctx(lib, models / "a.gguf", n_ctx=N_CTX * 2)
    assert status == 0
    try:
        assert save(lib, wide, tmp_path / "wide.state") == 0
    finally:
        lib.moestream_close(wide)
    assert load(lib, ctx, tmp_path / "wide.state") == Status.STATE_MISMATCH
    assert "n_ctx" in lib.last_error()


# --- MOESTREAM_ERR_CONTEXT_FULL ------------------------------------------------

def test_context_full(lib, ctx):
    assert step(lib, ctx, list(range(N_CTX - 1))) == 0
    assert step(lib, ctx, [1, 2]) == Status.CONTEXT_FULL
    assert "n_ctx" in lib.last_error()
    assert lib.moestream_n_past(ctx) == N_CTX - 1
    assert step(lib, ctx, [1]) == 0
    assert lib.raw("moestream_reset")(ctx) == 0
    assert step(lib, ctx, [1, 2]) == 0


# --- MOESTREAM_ERR_INTERNAL ----------------------------------------------------

def test_internal_never_for_bad_input(lib, ctx, tmp_path):
    """INTERNAL means a bug; none of the bad inputs above may produce it."""
    (tmp_path / "z.state").write_bytes(b"\0" * 4096)
    results = [
        load(lib, ctx, tmp_path / "z.state"),
        load(lib, ctx, tmp_path),  # a directory
        save(lib, ctx, tmp_path),  # a directory in the way
        step(lib, ctx, [N_VOCAB * 1000]),
    ]
    assert Status.INTERNAL not in results
    assert all(r < 0 for r in results)
    assert lib.moestream_status_string(Status.INTERNAL) == b"internal error"


# --- MOESTREAM_ERR_BUSY ----------------------------------------------------------

def test_busy_second_thread(lib, ctx):
    """A second thread calling while a step runs gets BUSY (never a crash or a
    corrupted context). ctypes drops the GIL during calls, so the two threads
    really overlap; the first thread keeps stepping until the second has seen
    BUSY three times. The bound on steps is far above what that takes (14 to
    767 steps in ten measured runs) so that a prober starved of CPU on a loaded
    machine still gets its overlaps; test_busy.py has the BUSY cases that need
    no overlap by chance."""
    seen = {"busy": 0, "other": [], "messages": set()}
    done = threading.Event()

    def prober():
        stats = _ffi.Stats()
        lib.moestream_stats_init(ctypes.byref(stats))
        while not done.is_set():
            r = lib.raw("moestream_stats_get")(ctx, ctypes.byref(stats))
            if r == Status.BUSY:
                seen["busy"] += 1
                seen["messages"].add(lib.last_error())  # per thread: read here, checked below
            elif r != 0:
                seen["other"].append(r)

    t = threading.Thread(target=prober)
    t.start()
    statuses = []
    try:
        for _ in range(100_000):
            r = step(lib, ctx, list(range(N_CTX)))
            statuses.append(r)
            assert lib.raw("moestream_reset")(ctx) in (0, Status.BUSY)
            if seen["busy"] >= 3:
                break
    finally:
        done.set()
        t.join()
    assert seen["other"] == []
    assert set(statuses) <= {0, Status.BUSY, Status.CONTEXT_FULL}
    assert seen["busy"] > 0
    assert all("another thread" in m for m in seen["messages"]), seen["messages"]


# --- the table itself ------------------------------------------------------------

def test_errors_table_covers_every_status_with_existing_tests(source_dir):
    """docs/errors.md has a row for every status in moestream.h, and every test
    it names exists."""
    import re
    header = (source_dir / "include" / "moestream.h").read_text()
    statuses = set(re.findall(r"\b(MOESTREAM_ERR_[A-Z_]+)\s*=", header))
    table = (source_dir / "docs" / "errors.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) >= len(statuses)
    assert statuses == set(re.findall(r"`(MOESTREAM_ERR_[A-Z_]+)`", table))
    sources = {p: p.read_text() for p in (source_dir / "tests").rglob("*") if p.suffix in (".py", ".cpp")}
    for row in rows:
        tests = row.rstrip(" |").rsplit("|", 1)[1]
        names = re.findall(r"`([^`]+)`", tests)
        assert names, row
        for name in names:
            if "::" in name:
                file, func = name.split("::")
                assert f"def {func}(" in (source_dir / "tests" / "python" / file).read_text(), name
            elif "." in name and not name.endswith(".cpp"):
                suite, case = name.split(".")
                pattern = re.compile(rf"TEST(_P|_F)?\(\s*{suite},\s*{case}\b")
                assert any(pattern.search(text) for text in sources.values()), name
            else:
                assert (source_dir / name).exists(), name
