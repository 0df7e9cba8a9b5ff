"""The binding against include/qd/qd.h, through its description abi/qd-api.json.

qd/_api.py (struct mirrors, function table, cffi declarations, statuses and their classes) is
written from abi/qd-api.json by abi/gen. Here: that the description is current for this qd.h
(abi/describe --check parses the header completely and confirms the parse with a compiled
layout program), that qd/_api.py is what abi/gen writes from it, that the struct mirrors have
this host's C layout (the committed description has x86-64's), that the exported symbol list is
covered, and what the loaded libqd says about statuses and its version.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from typing import Any, Dict

import pytest

import qd
from qd import _errors, _lib

from conftest import HEADER, REPO_DIR

DESCRIBE = REPO_DIR / "abi" / "describe"
DESCRIPTION = REPO_DIR / "abi" / "qd-api.json"

pytestmark = [
    pytest.mark.skipif(not HEADER.exists(), reason=f"no header at {HEADER}"),
    pytest.mark.skipif(not (DESCRIBE.exists() and DESCRIPTION.exists()),
                       reason=f"no {DESCRIBE} or {DESCRIPTION}"),
]


def _describe(*args: str) -> subprocess.CompletedProcess:
    if not shutil.which(os.environ.get("CC", "cc").split()[0]):
        pytest.skip("no C compiler (cc) for abi/describe's layout program")
    return subprocess.run([sys.executable, str(DESCRIBE), "--header", str(HEADER), *args],
                          capture_output=True, text=True, timeout=120)


def _description() -> Dict[str, Any]:
    return json.loads(DESCRIPTION.read_text())


def test_description_is_current_for_this_header() -> None:
    """abi/qd-api.json describes this qd.h: a change to the header that is not in the description
    fails here, so qd/_api.py is never generated from a stale one."""
    r = _describe("--check", str(DESCRIPTION))
    assert r.returncode == 0, r.stdout + r.stderr


def test_generated_module_is_current() -> None:
    """qd/_api.py is what abi/gen's python target writes from the committed description (a hand
    edit, or a description changed without running abi/gen, fails here)."""
    spec = importlib.util.spec_from_file_location(
        "generators", REPO_DIR / "abi" / "generators" / "__init__.py",
        submodule_search_locations=[str(REPO_DIR / "abi" / "generators")])
    if spec is None or not (REPO_DIR / "abi" / "generators" / "python.py").exists():
        pytest.skip("no abi/generators in this tree")
    generators = importlib.util.module_from_spec(spec)
    sys.modules["generators"] = generators
    try:
        spec.loader.exec_module(generators)  # type: ignore[union-attr]
        files = generators.python.generate(_description())
    finally:
        for name in [m for m in sys.modules if m == "generators" or m.startswith("generators.")]:
            del sys.modules[name]
    for rel, text in files.items():
        assert (REPO_DIR / rel).read_text() == text, f"{rel} is stale: run abi/gen"


def test_struct_layout_matches_this_hosts_c() -> None:
    """sizeof, alignment and offsetof of every field, as this host's C compiler lays them out
    (abi/describe --with-layout), against the ctypes mirrors."""
    r = _describe("--with-layout")
    assert r.returncode == 0, r.stderr
    host = json.loads(r.stdout)
    assert {s["name"] for s in host["structs"]} == set(_lib.STRUCTS)
    for struct in host["structs"]:
        cls = _lib.STRUCTS[struct["name"]]
        assert ctypes.sizeof(cls) == struct["size"], f"sizeof({struct['name']})"
        assert ctypes.alignment(cls) == struct["align"], f"alignment of {struct['name']}"
        assert [f[0] for f in cls._fields_] == [f["name"] for f in struct["fields"]]
        for field in struct["fields"]:
            assert getattr(cls, field["name"]).offset == field["offset"], \
                f"offsetof({struct['name']}, {field['name']})"


def test_exported_symbol_list_is_covered() -> None:
    listing = REPO_DIR / "abi" / "exported-symbols.txt"
    if not listing.exists():
        pytest.skip(f"{listing} not present")
    symbols = {line.split()[0] for line in listing.read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    symbols = {s for s in symbols if s.startswith("qd_")}
    assert symbols, "empty exported-symbols.txt"
    assert not sorted(symbols - set(_lib.FUNCTIONS))


def test_library_names_every_status_as_the_header_does() -> None:
    statuses = _description()["statuses"]
    assert len(statuses) >= 20
    for status in statuses:
        name, value = status["name"], status["value"]
        assert getattr(qd.Status, name[len("QD_"):]) == value, name
        assert qd.status_name(value) == name
        if value != 0:
            cls = _errors._BY_STATUS[value]
            exc = _errors.error_for_status(value, "m")
            assert type(exc) is cls and exc.status == value and exc.status_name == name
            assert str(exc) == f"{name}: m"
    assert qd.status_name(12345) == "QD_STATUS_UNKNOWN"
    assert type(_errors.error_for_status(-12345, "x")) is qd.QdError


def test_library_version_is_the_headers_release() -> None:
    version = _description()["version"]
    major, minor = version["major"], version["minor"]
    assert (_lib.ABI_MAJOR, _lib.ABI_MINOR) == (major, minor)
    assert qd.version()[:2] >= (major, minor) and qd.version()[0] == major
