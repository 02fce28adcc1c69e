"""Shared pytest fixtures: where the built artefacts and tools are."""
import os
import pathlib
import sys

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("MOESTREAM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE_DIR / "tests"))
sys.path.insert(0, str(SOURCE_DIR / "python"))


def _env_path(name):
    value = os.environ.get(name)
    return pathlib.Path(value) if value else None


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE_DIR


@pytest.fixture(scope="session")
def cli_path():
    path = _env_path("MOESTREAM_CLI")
    if not path or not path.exists():
        pytest.skip("MOESTREAM_CLI not set (run through ctest)")
    return path


@pytest.fixture(scope="session")
def tools_dir():
    path = _env_path("MOESTREAM_TOOLS_DIR")
    if not path or not path.exists():
        pytest.skip("MOESTREAM_TOOLS_DIR not set (run through ctest)")
    return path


@pytest.fixture(scope="session")
def shared_dir():
    path = SOURCE_DIR.parent / "shared"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def lib():
    """The loaded C library (moestream._ffi); skips outside ctest."""
    from capi_support import load_library
    return load_library()


@pytest.fixture(scope="session")
def binding():
    """The moestream Python package with its library loaded; skips when either is missing."""
    moestream = pytest.importorskip("moestream")
    try:
        moestream.version()
    except OSError:
        pytest.skip("library not loadable")
    return moestream


SMALL_MODEL_VOCAB = 64


@pytest.fixture(scope="session")
def small_model(tmp_path_factory):
    """A two-layer qwen3moe model of 64 tokens, for tests of calls rather than of results."""
    pytest.importorskip("numpy")
    from tools.make_model import ModelSpec, make_model
    path = tmp_path_factory.mktemp("small") / "m.gguf"
    make_model(path, ModelSpec(arch="qwen3moe", n_embd=64, n_layer=2, n_head=2, n_head_kv=1, n_expert=4,
                               n_expert_used=2, n_ff_expert=32, n_vocab=SMALL_MODEL_VOCAB, n_ctx=64, seed=1))
    return path
