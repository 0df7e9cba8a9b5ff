"""The two ways the binding calls libqd: cffi (ABI mode, declared from abi/qd-api.json) and
ctypes. The whole suite runs in both (tools/test-all: QD_PYTHON_FFI=ctypes, then =cffi); these
tests check that the mode asked for is the mode in use, and that cffi's declarations are the
header's."""

from __future__ import annotations

import json
import os

import pytest

import qd
from qd import _base, _lib

from conftest import REPO_DIR, subprocess_env

DESCRIPTION = REPO_DIR / "abi" / "qd-api.json"


def test_mode_is_the_one_asked_for() -> None:
    asked = os.environ.get("QD_PYTHON_FFI", "")
    if asked in ("cffi", "ctypes"):
        assert qd.FFI == asked
    assert qd.FFI == ("cffi" if _lib.CFFI else "ctypes")
    if not _lib.CFFI:
        assert _lib.why_not_cffi  # says why (forced, not importable, no declarations)


def test_hot_functions_go_through_the_mode_in_use() -> None:
    for name in ("_f_acquire", "_f_release", "_f_set_active", "_f_launch", "_f_memcpy"):
        fn = getattr(_base, name)
        if _lib.CFFI:
            assert type(fn).__module__ != "ctypes" and "CFuncPtr" not in type(fn).__name__, fn
        else:
            assert "CFuncPtr" in type(fn).__mro__[1].__name__ or hasattr(fn, "restype"), fn
    assert (_lib.C is _lib.lib) == (not _lib.CFFI)


def test_declarations_cover_the_whole_api() -> None:
    api = json.loads(DESCRIPTION.read_text())
    cdef = _lib.declarations(api)
    for fn in api["functions"]:
        assert f" {fn['name']}(" in cdef
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    for st in api["structs"]:  # cffi's layout of the declarations is the header's
        assert ffi.sizeof(st["name"]) == st["size"], st["name"]
        for field in st["fields"]:
            assert ffi.offsetof(st["name"], field["name"]) == field["offset"], field["name"]
    lib = ffi.dlopen(qd.library_path)
    for fn in api["functions"]:
        assert getattr(lib, fn["name"]) is not None


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
