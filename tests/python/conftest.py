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
