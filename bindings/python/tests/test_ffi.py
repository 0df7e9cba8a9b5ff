"""The two ways the binding calls libqd: cffi (ABI mode, declared from qd._api.CDEF, generated
from abi/qd-api.json) and ctypes. The whole suite runs in both (tools/test-all:
QD_PYTHON_FFI=ctypes, then =cffi); these tests check that the mode asked for is the mode in use,
and that cffi's declarations and the ctypes mirrors are the same API."""

from __future__ import annotations

import ctypes
import os

import pytest

import qd
from qd import _api, _base, _lib

from conftest import subprocess_env


def test_mode_is_the_one_asked_for() -> None:
    asked = os.environ.get("QD_PYTHON_FFI", "")
    if asked in ("cffi", "ctypes"):
        assert qd.FFI == asked
    assert qd.FFI == ("cffi" if _lib.CFFI else "ctypes")
    if not _lib.CFFI:
        assert _lib.why_not_cffi  # says why (forced, or cffi not importable)


def test_hot_functions_go_through_the_mode_in_use() -> None:
    for name in ("_f_acquire", "_f_release", "_f_set_active", "_f_launch", "_f_memcpy"):
        fn = getattr(_base, name)
        if _lib.CFFI:
            assert type(fn).__module__ != "ctypes" and "CFuncPtr" not in type(fn).__name__, fn
        else:
            assert "CFuncPtr" in type(fn).__mro__[1].__name__ or hasattr(fn, "restype"), fn
    assert (_lib.C is _lib.lib) == (not _lib.CFFI)


def test_cffi_declarations_and_ctypes_mirrors_are_the_same_api() -> None:
    """Every function of the table is declared to cffi and found in the library, and cffi lays
    out every struct as its ctypes mirror (both generated from one description)."""
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(_api.CDEF)
    lib = ffi.dlopen(qd.library_path)
    for name in _api.FUNCTIONS:
        assert getattr(lib, name) is not None
    for name, mirror in _api.STRUCTS.items():
        assert ffi.sizeof(name) == ctypes.sizeof(mirror), name
        for field, _ in mirror._fields_:
            assert ffi.offsetof(name, field) == getattr(mirror, field).offset, f"{name}.{field}"


def test_package_reads_no_api_description_at_run_time(tmp_path) -> None:
    """cffi mode works from a copy of the package with no qd-api.json anywhere near it."""
    import shutil
    import subprocess
    import sys
    pytest.importorskip("cffi")
    pkg = tmp_path / "pkg"
    shutil.copytree(os.path.dirname(qd.__file__), pkg / "qd",
                    ignore=shutil.ignore_patterns("__pycache__", "qd-api.json"))
    env = subprocess_env()
    env["PYTHONPATH"] = str(pkg)
    env["QD_PYTHON_FFI"] = "cffi"
    done = subprocess.run([sys.executable, "-c", "import qd; print(qd.FFI, qd.__file__)"],
                          env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cffi", str(pkg / "qd" / "__init__.py")]


def test_forcing_an_unknown_mode_or_missing_cffi_fails_loudly(tmp_path) -> None:
    import subprocess
    import sys
    env = subprocess_env()
    env["QD_PYTHON_FFI"] = "fortran"
    done = subprocess.run([sys.executable, "-c", "import qd"], env=env, capture_output=True,
                          text=True, cwd=str(tmp_path))
    assert done.returncode != 0 and "QD_PYTHON_FFI" in done.stderr
    env["QD_PYTHON_FFI"] = "ctypes"
    done = subprocess.run([sys.executable, "-c", "import qd; print(qd.FFI)"], env=env,
                          capture_output=True, text=True, cwd=str(tmp_path))
    assert done.returncode == 0 and done.stdout.strip() == "ctypes", done.stderr
