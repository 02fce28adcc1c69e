"""The Python binding (python/moestream) against the built library: version and
layout checks, errors, NULL-safety, sampler, generator, inspect and, where the
library implements them, Context end to end."""
import ctypes
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import moestream
from moestream import _ffi

HEADER_FILE = "include/moestream.h"


@pytest.fixture(scope="session")
def header(source_dir):
    return (source_dir / HEADER_FILE).read_text()


def require(lib, *names):
    missing = [n for n in names if not lib.has(n)]
    if missing:
        pytest.skip(f"library does not provide {', '.join(missing)} yet")


def skip_if_unsupported(fn, *args, **kwargs):
    """Runs fn; a status of UNSUPPORTED (not implemented yet) skips the test."""
    try:
        return fn(*args, **kwargs)
    except moestream.Error as e:
        if e.status == moestream.Status.UNSUPPORTED:
            pytest.skip(f"not supported by this library: {e.message}")
        raise


# --- version and ABI --------------------------------------------------------------


def header_define(header, name):
    m = re.search(rf"#define {name} (\S+)", header)
    assert m, name
    return m.group(1).strip('"')


def test_version_matches_header(lib, header):
    major, minor, patch = (int(header_define(header, f"MOESTREAM_VERSION_{p}")) for p in ("MAJOR", "MINOR", "PATCH"))
    assert moestream.version() == header_define(header, "MOESTREAM_VERSION_STRING") == f"{major}.{minor}.{patch}"
    assert moestream.version_number() == major * 10000 + minor * 100 + patch
    assert moestream.ABI_MAJOR == major
    assert os.path.samefile(moestream.library_path(), os.environ["MOESTREAM_LIB"])


def test_kernel_isa_follows_moestream_isa(lib):
    def isa(value):
        env = {"MOESTREAM_ISA": value} if value is not None else {}
        r = run_python("import moestream; print(moestream.kernel_isa())", env, drop=("MOESTREAM_ISA",))
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()
    best = isa(None)
    assert best in ("avx512", "avx2", "scalar")
    assert isa("scalar") == "scalar"
    assert isa("no-such-isa") == best
    assert isa("avx512") == best  # never above what the CPU has
    if best == "avx512":
        assert isa("avx2") == "avx2"


def header_functions(header):
    names = re.findall(r"^MOESTREAM_API\s+[^;(]*?\b(moestream_\w+)\s*\(", header, re.M)
    assert len(names) > 20
    return names


def test_every_header_function_is_declared(header):
    declared = [name for name, _, _ in _ffi.FUNCTIONS]
    assert sorted(declared) == sorted(header_functions(header))


def test_declared_argument_counts_match_header(header):
    for name, _, argtypes in _ffi.FUNCTIONS:
        m = re.search(rf"\b{name}\s*\(([^)]*)\)", header)
        params = m.group(1).strip()
        n = 0 if params in ("", "void") else params.count(",") + 1
        assert len(argtypes) == n, name


def header_structs(header):
    structs = {}
    for name, body in re.findall(r"typedef struct (moestream_\w+) \{(.*?)\} \1;", header, re.S):
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        structs[name] = [re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", decl.strip()).group(1)
                         for decl in body.split(";") if decl.strip()]
    return structs


MIRRORS = {
    "moestream_params": _ffi.Params,
    "moestream_model_info": _ffi.ModelInfo,
    "moestream_stats": _ffi.Stats,
    "moestream_read_replay": _ffi.ReadReplay,
    "moestream_sampler_params": _ffi.SamplerParams,
    "moestream_generate_params": _ffi.GenerateParams,
    "moestream_trace_synth_params": _ffi.TraceSynthParams,
    "moestream_trace_info": _ffi.TraceInfo,
    "moestream_replay_params": _ffi.ReplayParams,
    "moestream_replay_result": _ffi.ReplayResult,
}


def test_struct_fields_match_header(header):
    structs = header_structs(header)
    assert set(structs) == set(MIRRORS)
    for name, fields in structs.items():
        assert [f for f, _ in MIRRORS[name]._fields_] == fields, name


def test_struct_layout_matches_the_compiler(tools_dir):
    tool = tools_dir / "abi_sizes"
    if not tool.exists():
        pytest.skip("abi_sizes tool not built")
    layout = json.loads(subprocess.run([str(tool)], check=True, capture_output=True, text=True).stdout)
    assert set(layout) == set(MIRRORS)
    for name, c in layout.items():
        mirror = MIRRORS[name]
        assert ctypes.sizeof(mirror) == c["size"], name
        assert ctypes.alignment(mirror) == c["align"], name
        assert [f for f, _ in mirror._fields_] == list(c["fields"]), name
        for field, (offset, size) in c["fields"].items():
            descr = getattr(mirror, field)
            assert (descr.offset, descr.size) == (offset, size), f"{name}.{field}"


# --- errors and NULL-safety ----------------------------------------------------------


def test_status_strings(lib):
    assert moestream.status_string(0) == "ok"
    assert moestream.status_string(moestream.Status.IO) == "I/O error"
    assert moestream.status_string(-1000) == "unknown status"
    for s in moestream.Status:
        assert moestream.status_string(s) != "unknown status"


def test_error_carries_status_and_message(lib):
    with pytest.raises(moestream.Error) as info:
        moestream.Sampler(top_p=2.0)
    e = info.value
    assert e.status == moestream.Status.INVALID_ARGUMENT == -1
    assert isinstance(e.status, int)
    assert "top_p" in e.message and "moestream_sampler_new" in e.message
    assert "top_p" in str(e) and "invalid_argument" in str(e)
    assert lib.last_error() == e.message


def test_null_handles_and_outputs_are_rejected(lib):
    sample = lib.raw("moestream_sample")
    row = (ctypes.c_float * 2)(0.0, 1.0)
    token = ctypes.c_int32(-5)
    assert sample(None, row, 2, ctypes.byref(token)) == moestream.Status.INVALID_ARGUMENT
    assert "sampler" in lib.last_error()
    with moestream.Sampler() as s:
        assert sample(s._handle, None, 2, ctypes.byref(token)) == moestream.Status.INVALID_ARGUMENT
        assert "logits" in lib.last_error()
        assert sample(s._handle, row, 2, None) == moestream.Status.INVALID_ARGUMENT
        assert sample(s._handle, row, 0, ctypes.byref(token)) == moestream.Status.INVALID_ARGUMENT
        assert sample(s._handle, row, -3, ctypes.byref(token)) == moestream.Status.INVALID_ARGUMENT
        assert token.value == -5  # untouched on error
    params = _ffi.SamplerParams()
    lib.moestream_sampler_params_init(ctypes.byref(params))
    assert lib.raw("moestream_sampler_new")(ctypes.byref(params), None) == moestream.Status.INVALID_ARGUMENT
    out = _ffi.SamplerPtr()
    assert lib.raw("moestream_sampler_new")(None, ctypes.byref(out)) == moestream.Status.INVALID_ARGUMENT
    assert not out
    lib.moestream_sampler_params_init(None)
    lib.moestream_sampler_free(None)
    if lib.has("moestream_close"):
        lib.moestream_close(None)
    for name in ("moestream_n_vocab", "moestream_n_ctx"):
        if lib.has(name):
            assert getattr(lib, name)(None) == -1
    for name in ("moestream_params_init", "moestream_model_info_init", "moestream_stats_init",
                 "moestream_generate_params_init", "moestream_read_replay_init"):
        if lib.has(name):
            getattr(lib, name)(None)
    if lib.has("moestream_step"):
        assert lib.raw("moestream_step")(None, None, 0, None) == moestream.Status.INVALID_ARGUMENT


def test_wrong_struct_size_is_rejected(lib):
    params = _ffi.SamplerParams()
    lib.moestream_sampler_params_init(ctypes.byref(params))
    assert params.struct_size == ctypes.sizeof(_ffi.SamplerParams)
    params.struct_size = 8
    out = _ffi.SamplerPtr()
    assert lib.raw("moestream_sampler_new")(ctypes.byref(params), ctypes.byref(out)) == -1
    assert "struct_size" in lib.last_error()


def test_handles_are_typed(lib):
    # A sampler handle cannot be passed where a context is expected.
    require(lib, "moestream_n_vocab")
    with moestream.Sampler() as s:
        with pytest.raises(ctypes.ArgumentError):
            lib.moestream_n_vocab(s._handle)


# --- sampler -----------------------------------------------------------------------------


def test_sampler_defaults_come_from_the_library(lib):
    s = moestream.Sampler()
    assert s.params["temperature"] == pytest.approx(0.8)
    assert s.params["top_k"] == 40
    assert s.params["top_p"] == pytest.approx(0.95)
    assert s.params["min_p"] == pytest.approx(0.05)
    s.close()
    s.close()  # idempotent
    with pytest.raises(moestream.Error) as e:
        s.sample([1.0])
    assert e.value.status == moestream.Status.INVALID_ARGUMENT


def test_greedy_and_top_k_one_are_argmax(lib):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=5000).astype(np.float32)
    want = int(np.argmax(logits))
    with moestream.Sampler(temperature=0) as greedy, moestream.Sampler(temperature=3.0, top_k=1) as top1:
        assert greedy.sample(logits) == want
        assert greedy.sample(logits.astype(np.float64)) == want
        assert greedy.sample(logits.tolist()) == want
        assert all(top1.sample(logits) == want for _ in range(50))


def test_sampler_follows_softmax_and_is_seeded(lib):
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    logits = np.log(probs).astype(np.float32)
    s = moestream.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=123)
    draws = [s.sample(logits) for _ in range(20000)]
    freq = np.bincount(draws, minlength=4) / len(draws)
    assert np.allclose(freq, probs, atol=0.02), freq
    again = moestream.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=123)
    assert [again.sample(logits) for _ in range(200)] == draws[:200]
    other = moestream.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=124)
    assert [other.sample(logits) for _ in range(200)] != draws[:200]


def test_sampler_handles_nan(lib):
    nan = float("nan")
    with moestream.Sampler(temperature=1.0, seed=1) as s:
        for _ in range(100):
            assert s.sample([nan, 0.0, nan, 0.5]) in (1, 3)
        with pytest.raises(moestream.Error) as e:
            s.sample([nan, nan])
        assert e.value.status == moestream.Status.INVALID_ARGUMENT


@pytest.mark.parametrize("kwargs", [dict(temperature=-1), dict(temperature=float("nan")), dict(top_k=-2),
                                    dict(top_p=0.0), dict(min_p=1.5), dict(seed=-1)])
def test_invalid_sampler_params(lib, kwargs):
    with pytest.raises(moestream.Error) as e:
        moestream.Sampler(**kwargs)
    assert e.value.status == moestream.Status.INVALID_ARGUMENT


def test_sampler_rejects_2d_input(lib):
    with moestream.Sampler() as s, pytest.raises(moestream.Error):
        s.sample(np.zeros((2, 3), dtype=np.float32))
    # A scalar is no row either (it was sampled as a row of one: None as a NaN).
    for scalar in (None, 2.0):
        with moestream.Sampler() as s, pytest.raises(moestream.Error, match="1-D row"):
            s.sample(scalar)


def test_arguments_of_the_wrong_kind_are_type_errors(lib, model_path, ctx, tmp_path):
    # A log that cannot be called failed silently on every message; a sampler
    # that is not one raised AttributeError from inside the binding.
    with pytest.raises(TypeError, match="log"):
        moestream.Context(model_path, profile_path="", log="warnings.txt")
    ctx.step([1], logits=False)
    for call in (ctx.save_state, ctx.load_state):
        with pytest.raises(TypeError, match="Sampler"):
            call(tmp_path / "s.state", sampler=42)
    assert list(tmp_path.iterdir()) == []


# --- library lookup (subprocesses, so this process's loaded library is untouched) -----------


def run_python(code, env_extra, drop=("MOESTREAM_LIB", "PYTHONPATH")):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def copy_package(source_dir, dest):
    shutil.copytree(source_dir / "python" / "moestream", dest / "moestream",
                    ignore=shutil.ignore_patterns("__pycache__", "_install_paths.py"))


def test_library_found_in_the_package_directory(lib, source_dir, tmp_path):
    copy_package(source_dir, tmp_path)
    os.symlink(os.environ["MOESTREAM_LIB"], tmp_path / "moestream" / f"libmoestream.so.{moestream.ABI_MAJOR}")
    r = run_python("import moestream; print(moestream.library_path()); print(moestream.version())",
                   {"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    path, version = r.stdout.split()
    assert path == str(tmp_path / "moestream" / f"libmoestream.so.{moestream.ABI_MAJOR}")
    assert version == moestream.version()


def test_library_found_under_the_install_prefix(lib, source_dir, tmp_path):
    site = tmp_path / "lib" / "python3" / "dist-packages"
    site.mkdir(parents=True)
    copy_package(source_dir, site)
    os.symlink(os.environ["MOESTREAM_LIB"], tmp_path / "lib" / f"libmoestream.so.{moestream.ABI_MAJOR}")
    r = run_python("import moestream; print(moestream.library_path())", {"PYTHONPATH": str(site)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "lib" / f"libmoestream.so.{moestream.ABI_MAJOR}")


def test_missing_library_is_a_clear_error(lib, source_dir, tmp_path):
    r = run_python("import moestream; moestream.version()",
                   {"PYTHONPATH": str(source_dir / "python"), "MOESTREAM_LIB": str(tmp_path / "nope.so")})
    assert r.returncode != 0
    assert "MOESTREAM_LIB" in r.stderr and "nope.so" in r.stderr


def test_works_without_numpy(lib, source_dir):
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import moestream\n"
            "s = moestream.Sampler(temperature=0)\n"
            "print(s.sample([0.5, 2.0, 1.0]))\n")
    r = run_python(code, {"PYTHONPATH": str(source_dir / "python"),
                          "MOESTREAM_LIB": os.environ["MOESTREAM_LIB"]})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


# --- generator and inspect -------------------------------------------------------------

TINY = dict(preset="tiny", quant="f32", n_layer=2, n_expert=8, n_expert_used=2, seed=3)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    lib = _ffi.lib() if os.environ.get("MOESTREAM_LIB") else None
    if lib is None:
        pytest.skip("MOESTREAM_LIB not set (run through ctest)")
    path = tmp_path_factory.mktemp("model") / "tiny.gguf"
    skip_if_unsupported(moestream.generate_model, path, **TINY)
    return path


def test_generate_model_writes_the_predicted_size(lib, tiny_model, tmp_path):
    require(lib, "moestream_generate_model", "moestream_generate_model_size")
    assert tiny_model.stat().st_size == moestream.generate_model_size(**TINY)
    seen = []
    moestream.generate_model(tmp_path / "again.gguf", progress=lambda d, t: seen.append((d, t)), **TINY)
    assert (tmp_path / "again.gguf").read_bytes() == tiny_model.read_bytes()
    assert seen and seen[-1][0] == seen[-1][1] == tiny_model.stat().st_size
    with pytest.raises(moestream.Error) as e:
        moestream.generate_model(tmp_path / "x.gguf", preset="no-such-preset")
    assert e.value.status == moestream.Status.INVALID_ARGUMENT
    assert not (tmp_path / "x.gguf").exists()


def test_inspect(lib, tiny_model):
    require(lib, "moestream_inspect")
    info = moestream.inspect(tiny_model)
    assert info["architecture"] == "qwen3moe"
    assert info["n_layer"] == 2 and info["n_expert"] == 8 and info["n_expert_used"] == 2
    assert info["file_bytes"] == tiny_model.stat().st_size
    assert info["dense_bytes"] + info["expert_bytes"] == info["total_bytes"] <= info["file_bytes"]
    assert info["tensor_count_by_type"] == {"f32": info["n_tensors"]}
    assert info["io_mode"] in ("mmap", "direct", "pread")
    assert isinstance(info["io_mode_reason"], str) and info["io_mode_reason"]


def test_inspect_missing_file(lib, tmp_path):
    require(lib, "moestream_inspect")
    missing = tmp_path / "missing.gguf"
    with pytest.raises(moestream.Error) as e:
        moestream.inspect(missing)
    assert e.value.status == moestream.Status.IO
    assert str(missing) in e.value.message


# --- Context end to end ------------------------------------------------------------------

CONTEXT_FUNCTIONS = ("moestream_params_init", "moestream_open", "moestream_close", "moestream_step",
                     "moestream_n_vocab", "moestream_n_past", "moestream_reset")


@pytest.fixture(scope="session")
def model_path(tmp_path_factory):
    """A small qwen3moe model from the Python test generator."""
    try:
        from tools.make_model import ModelSpec, make_model
    except ImportError as e:
        pytest.skip(f"tests/tools/make_model.py not available: {e}")
    path = tmp_path_factory.mktemp("ctx") / "m.gguf"
    make_model(path, ModelSpec(arch="qwen3moe", n_embd=128, n_layer=2, n_expert=8, n_expert_used=2,
                               n_vocab=300, quant_mix="f32", seed=5))
    return path


@pytest.fixture
def ctx(lib, model_path):
    require(lib, *CONTEXT_FUNCTIONS)
    c = skip_if_unsupported(moestream.Context, model_path, n_threads=2, n_ctx=64, profile_path="")
    yield c
    c.close()


def test_context_step_returns_finite_logits(ctx):
    assert ctx.n_vocab == 300
    assert ctx.n_ctx == 64
    assert ctx.n_past == 0
    logits = ctx.step([1, 2, 3])
    assert isinstance(logits, np.ndarray) and logits.dtype == np.float32 and logits.shape == (300,)
    assert np.all(np.isfinite(logits))
    assert ctx.n_past == 3
    assert ctx.step([4], logits=False) is None
    assert ctx.n_past == 4


@pytest.mark.parametrize("io_mode", ["mmap", "pread"])
@pytest.mark.parametrize("what", ["missing", "directory"])
def test_a_named_packed_file_that_is_no_file_fails_open_in_every_mode(lib, model_path, tmp_path, io_mode, what):
    # A mapped model reads no packed file, but a path given for one that names
    # nothing (a typo) or a directory is refused there too, not ignored.
    require(lib, *CONTEXT_FUNCTIONS)
    packed = tmp_path / "m.moepack"
    if what == "directory":
        packed.mkdir()
    with pytest.raises(moestream.Error) as e:
        moestream.Context(model_path, io_mode=io_mode, packed_path=packed, profile_path="")
    assert e.value.status == moestream.Status.IO and str(packed) in str(e.value), e.value
    assert ("No such file" if what == "missing" else "not a regular file") in str(e.value), e.value


def test_a_named_packed_file_a_mapped_model_does_not_read_is_said_so(lib, model_path, tmp_path):
    require(lib, *CONTEXT_FUNCTIONS)
    (tmp_path / "m.moepack").write_bytes(b"")  # a file: what it holds is checked only where it is read
    with moestream.Context(model_path, io_mode="mmap", packed_path=tmp_path / "m.moepack", profile_path="") as ctx:
        assert "packed_path not read: the model is mapped" in ctx.io_mode_reason, ctx.io_mode_reason


def test_context_reset_repeats_results(ctx):
    first = ctx.step([5, 6, 7])
    ctx.reset()
    assert ctx.n_past == 0
    again = ctx.step([5, 6, 7])
    assert np.array_equal(first, again)


def test_context_model_facts(ctx):
    info = skip_if_unsupported(lambda: ctx.info)
    assert info["architecture"] == ctx.architecture == "qwen3moe"
    assert ctx.n_layer == 2 and ctx.n_expert == 8 and ctx.n_expert_used == 2 and ctx.n_embd == 128
    assert info["n_vocab"] == ctx.n_vocab


def test_context_stats(ctx):
    ctx.step([1, 2])
    stats = skip_if_unsupported(ctx.stats)
    keys = {"tokens", "steps", "compute_ns", "io_wait_ns", "step_ns", "bytes_read_demand", "bytes_read_prefetch",
            "bytes_read_wasted", "cache_hits", "cache_misses", "prefetch_issued", "prefetch_useful", "evictions",
            "resident_bytes", "expert_cache_bytes", "dense_bytes", "kv_bytes", "io_mode", "io_mode_reason",
            "n_layer", "layer_hits", "layer_misses", "io_busy_ns", "io_bytes_completed", "io_reads_completed",
            "io_read_ns", "io_queue_depth", "attention_ns", "moe_ns"}
    assert keys <= set(stats)
    assert stats["attention_ns"] > 0 and stats["moe_ns"] > 0
    assert stats["attention_ns"] + stats["moe_ns"] <= stats["compute_ns"]
    assert stats["tokens"] >= 2 and stats["steps"] >= 1
    assert len(stats["layer_hits"]) == stats["n_layer"] == 2


def test_read_log_replays_the_engine_reads(lib, model_path):
    require(lib, *CONTEXT_FUNCTIONS, "moestream_read_log_start", "moestream_read_log_replay")
    c = skip_if_unsupported(moestream.Context, model_path, n_threads=2, n_ctx=64, profile_path="", io_mode="direct")
    try:
        with pytest.raises(moestream.Error) as info:
            c.replay_read_log()
        assert info.value.status == moestream.Status.INVALID_ARGUMENT
        c.start_read_log(4096)
        c.step([1, 2, 3, 4])
        stats = c.stats()
        assert stats["io_queue_depth"] > 0
        assert stats["io_reads_completed"] > 0 and stats["io_bytes_completed"] > 0
        assert stats["io_read_ns"] >= stats["io_busy_ns"] > 0  # a sum over reads covers their union
        r = c.replay_read_log(queue_depth=2)
        assert r["queue_depth"] == 2 and r["engine_queue_depth"] == stats["io_queue_depth"]
        assert r["dropped"] == 0
        # Every read the engine issued since the log started (the replay waits
        # for those still in flight), nothing else; a cancelled prefetch
        # brought no bytes the first time but does in the replay.
        after = c.stats()
        assert r["reads"] == after["io_reads_completed"]
        assert r["bytes"] >= after["io_bytes_completed"] > 0
        assert r["backend"] in ("io_uring", "pread")
        c.start_read_log(1)
        c.reset()
        c.start_read_log(0)
        with pytest.raises(moestream.Error):
            c.replay_read_log()
    finally:
        c.close()


def test_read_log_rejects_null_and_invalid_arguments(lib, model_path):
    require(lib, *CONTEXT_FUNCTIONS, "moestream_read_log_start", "moestream_read_log_replay")
    invalid = moestream.Status.INVALID_ARGUMENT
    replay = _ffi.ReadReplay()
    lib.moestream_read_replay_init(ctypes.byref(replay))
    assert replay.struct_size == ctypes.sizeof(_ffi.ReadReplay) and replay.queue_depth == 0
    assert lib.raw("moestream_read_log_start")(None, 16) == invalid
    assert lib.raw("moestream_read_log_replay")(None, ctypes.byref(replay)) == invalid
    c = skip_if_unsupported(moestream.Context, model_path, n_threads=2, n_ctx=64, profile_path="", io_mode="direct")
    try:
        h = c._h()
        assert lib.raw("moestream_read_log_start")(h, 1 << 40) == invalid
        assert lib.raw("moestream_read_log_start")(h, 64) == moestream.Status.OK
        assert lib.raw("moestream_read_log_replay")(h, None) == invalid
        replay.struct_size = 8
        assert lib.raw("moestream_read_log_replay")(h, ctypes.byref(replay)) == invalid
        lib.moestream_read_replay_init(ctypes.byref(replay))
        replay.queue_depth = -1
        assert lib.raw("moestream_read_log_replay")(h, ctypes.byref(replay)) == invalid
        replay.queue_depth = 0
        assert lib.raw("moestream_read_log_replay")(h, ctypes.byref(replay)) == moestream.Status.OK
        assert replay.reads == 0 and replay.queue_depth == replay.engine_queue_depth > 0
        # A caller built before the io_* fields passes the shorter struct and gets the fields it knows.
        stats = _ffi.Stats()
        lib.moestream_stats_init(ctypes.byref(stats))
        stats.io_queue_depth = -7
        stats.struct_size = _ffi.Stats.io_busy_ns.offset
        assert lib.raw("moestream_stats_get")(h, ctypes.byref(stats)) == moestream.Status.OK
        assert stats.n_layer == 2 and stats.io_queue_depth == -7
        stats.struct_size = _ffi.Stats.io_busy_ns.offset - 8
        assert lib.raw("moestream_stats_get")(h, ctypes.byref(stats)) == invalid
        # One built before attention_ns/moe_ns gets the io_* fields and nothing past them.
        stats = _ffi.Stats()
        lib.moestream_stats_init(ctypes.byref(stats))
        stats.moe_ns = 7
        stats.struct_size = _ffi.Stats.attention_ns.offset
        assert lib.raw("moestream_stats_get")(h, ctypes.byref(stats)) == moestream.Status.OK
        assert stats.io_queue_depth > 0 and stats.attention_ns == 0 and stats.moe_ns == 7
    finally:
        c.close()


def test_read_log_is_unsupported_in_mmap_mode(lib, model_path):
    require(lib, *CONTEXT_FUNCTIONS, "moestream_read_log_start")
    c = skip_if_unsupported(moestream.Context, model_path, n_threads=2, n_ctx=64, profile_path="", io_mode="mmap")
    try:
        with pytest.raises(moestream.Error) as info:
            c.start_read_log(16)
        assert info.value.status == moestream.Status.UNSUPPORTED
        assert c.stats()["io_busy_ns"] == 0
    finally:
        c.close()


def test_invalid_token_is_rejected_and_nothing_kept(ctx):
    ctx.step([1])
    for bad in ([ctx.n_vocab], [-1], [2, 10**6]):
        with pytest.raises(moestream.Error) as e:
            ctx.step(bad)
        assert e.value.status == moestream.Status.INVALID_ARGUMENT
        assert e.value.message
        assert ctx.n_past == 1
    with pytest.raises(moestream.Error):
        ctx.step([2**40])


def test_context_manager_closes(lib, model_path):
    require(lib, *CONTEXT_FUNCTIONS)
    with skip_if_unsupported(moestream.Context, model_path, n_threads=1, n_ctx=32, profile_path="") as c:
        c.step([1])
    assert c.closed
    with pytest.raises(moestream.Error) as e:
        c.step([1])
    assert e.value.status == moestream.Status.INVALID_ARGUMENT
    c.close()


def test_open_missing_model(lib, tmp_path):
    require(lib, "moestream_open", "moestream_params_init")
    missing = tmp_path / "missing.gguf"
    with pytest.raises(moestream.Error) as e:
        moestream.Context(missing)
    assert e.value.status == moestream.Status.IO
    assert str(missing) in e.value.message


def test_paths_with_a_nul_byte_are_value_errors(lib, model_path, ctx, tmp_path):
    # C would end the path at the NUL: save_state("s\0x") wrote the file "s".
    with pytest.raises(ValueError, match="model_path"):
        moestream.Context(f"{model_path}\0.bak")
    with pytest.raises(ValueError, match="profile_path"):
        moestream.Context(model_path, profile_path=tmp_path / "p\0x")
    ctx.step([1, 2], logits=False)
    for call in (lambda: ctx.save_state(tmp_path / "s\0x"), lambda: ctx.load_state(tmp_path / "s\0x"),
                 lambda: moestream.inspect(f"{model_path}\0"), lambda: moestream.trace_info(tmp_path / "t\0x"),
                 lambda: moestream.generate_model(tmp_path / "g\0x", preset="tiny"),
                 lambda: moestream.trace_synth(tmp_path / "t\0x", n_tokens=4)):
        with pytest.raises(ValueError, match="NUL"):
            call()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("field", ["architecture", "preset", "quant"])
def test_generator_names_with_a_nul_byte_are_value_errors(lib, tmp_path, field):
    # C would end the name at the NUL: preset="tiny\0huge" generated the tiny model.
    require(lib, "moestream_generate_model", "moestream_generate_model_size")
    name = {"architecture": "qwen3moe", "preset": "tiny", "quant": "q8_0"}[field] + "\0x"
    for call in (lambda: moestream.generate_model_size(**{field: name}),
                 lambda: moestream.generate_model(tmp_path / "g.gguf", **{field: name})):
        with pytest.raises(ValueError, match=f"{field} holds a NUL byte"):
            call()
    with pytest.raises(TypeError, match=field):
        moestream.generate_model_size(**{field: b"tiny"})
    assert list(tmp_path.iterdir()) == []


def test_bad_enum_names_are_rejected(lib, model_path):
    require(lib, *CONTEXT_FUNCTIONS)
    with pytest.raises(moestream.Error) as e:
        moestream.Context(model_path, io_mode="floppy")
    assert e.value.status == moestream.Status.INVALID_ARGUMENT and "io_mode" in e.value.message


def test_numa_placement_changes_no_logit(lib, model_path):
    require(lib, *CONTEXT_FUNCTIONS)
    runs = []
    for numa in ("local", "interleave"):
        with moestream.Context(model_path, io_mode="direct", numa=numa, n_threads=1, profile_path="") as c:
            runs.append(list(c.step([1, 2, 3, 4])))
            # The full reason names the memory placement; the stats carry its beginning.
            reason = c.io_mode_reason
            assert "cache memory" in reason and "dense weights copied in" in reason, reason
            assert reason.startswith(c.stats()["io_mode_reason"])
    assert runs[0] == runs[1]
    with pytest.raises(moestream.Error) as e:
        moestream.Context(model_path, numa="everywhere")
    assert e.value.status == moestream.Status.INVALID_ARGUMENT and "numa" in e.value.message


def test_state_save_load_continues_exactly(ctx, tmp_path):
    ctx.step([1, 2, 3])
    path = tmp_path / "s.state"
    skip_if_unsupported(ctx.save_state, path)
    after = ctx.step([4, 5])
    ctx.reset()
    ctx.step([9])
    skip_if_unsupported(ctx.load_state, path)
    assert ctx.n_past == 3
    assert np.array_equal(ctx.step([4, 5]), after)


def test_tokenizer_works_or_is_unsupported(ctx):
    try:
        tokens = ctx.tokenize("hello")
    except moestream.Error as e:
        assert e.status == moestream.Status.UNSUPPORTED
        with pytest.raises(moestream.Error) as e2:
            ctx.detokenize([1])
        assert e2.value.status == moestream.Status.UNSUPPORTED
        return
    assert all(isinstance(t, int) and 0 <= t < ctx.n_vocab for t in tokens)


def test_logits_feed_the_sampler(ctx):
    logits = ctx.step([3, 1, 4])
    with moestream.Sampler(temperature=0) as s:
        assert s.sample(logits) == int(np.argmax(logits))
    assert math.isfinite(float(logits.max()))


def test_pyproject_version_matches_header(source_dir, header):
    text = (source_dir / "python" / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == header_define(header, "MOESTREAM_VERSION_STRING")


# --- the README's examples are the real, tested ones -------------------------------------


def readme_block(source_dir, language):
    text = (source_dir / "README.md").read_text()
    blocks = re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)
    assert blocks, f"no {language} block in README.md"
    return blocks[0]


def test_readme_c_quick_start_is_docs_quickstart(source_dir):
    assert readme_block(source_dir, "c") == (source_dir / "docs" / "quickstart.c").read_text()


def test_readme_python_quick_start_runs(lib, source_dir, tmp_path):
    require(lib, *CONTEXT_FUNCTIONS, "moestream_generate_model", "moestream_stats_get")
    r = subprocess.run([sys.executable, "-c", readme_block(source_dir, "python")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    if r.returncode and "[unsupported]" in r.stderr:
        pytest.skip(f"not supported yet: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    assert "True" in r.stdout  # the missing-file error is an IO error


def test_log_callback(lib, model_path, tmp_path):
    require(lib, *CONTEXT_FUNCTIONS)
    seen = []
    log = lambda level, message: seen.append((level, message))  # noqa: E731
    c = skip_if_unsupported(moestream.Context, model_path, n_threads=1, n_ctx=32, profile_path="", log=log,
                            log_level="info")
    c.step([1, 2])
    c.close()
    assert any(level == "info" and message.startswith(f"opened {model_path}") for level, message in seen), seen
    assert any(level == "info" and "closing: 2 tokens in 1 steps" in message for level, message in seen), seen

    seen.clear()
    moestream.Context(model_path, n_threads=1, n_ctx=32, profile_path="", log=log).close()
    assert not [s for s in seen if s[0] == "info"]  # default level is warn

    missing = tmp_path / "missing.gguf"
    with pytest.raises(moestream.Error):
        moestream.Context(missing, log=log)
    assert any(level == "error" and str(missing) in message for level, message in seen), seen

    def broken(level, message):
        raise RuntimeError("a failing log callback must not break the library")

    moestream.Context(model_path, n_threads=1, n_ctx=32, profile_path="", log=broken, log_level="debug").close()


def header_enum(header, typedef):
    body = re.search(rf"typedef enum {typedef} \{{(.*?)\}} {typedef};", header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return {name: int(value) for name, value in re.findall(r"(MOESTREAM_\w+)\s*=\s*(-?\d+)", body)}


@pytest.mark.parametrize("typedef,prefix,table", [
    ("moestream_io_mode", "MOESTREAM_IO_", "IO_MODES"),
    ("moestream_prefetch_mode", "MOESTREAM_PREFETCH_", "PREFETCH_MODES"),
    ("moestream_cache_policy", "MOESTREAM_CACHE_", "CACHE_POLICIES"),
    ("moestream_log_level", "MOESTREAM_LOG_", "LOG_LEVELS"),
    ("moestream_numa_placement", "MOESTREAM_NUMA_", "NUMA_PLACEMENTS"),
])
def test_python_enum_names_match_header(header, typedef, prefix, table):
    from moestream import _convert
    want = {name[len(prefix):].lower(): value for name, value in header_enum(header, typedef).items()}
    assert getattr(_convert, table) == want


def test_status_enum_matches_header(header):
    want = {name.replace("MOESTREAM_ERR_", "").replace("MOESTREAM_", ""): value
            for name, value in header_enum(header, "moestream_status").items()}
    assert {s.name: int(s) for s in moestream.Status} == want
