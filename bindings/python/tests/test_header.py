"""The binding against include/qd/qd.h: every function declared with matching argument count and
types, every struct mirrored with the C layout (compiled with cc), every status mapped."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import qd
from qd import _errors, _lib
from qd._base import MAX_ARGS

from conftest import HEADER, INCLUDE_DIR, REPO_DIR

pytestmark = pytest.mark.skipif(not HEADER.exists(), reason=f"no header at {HEADER}")


def _header_text() -> str:
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text


def _code_text() -> str:
    """The header without comments and preprocessor lines (continuations included)."""
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", _header_text(), flags=re.M)


def header_functions() -> Dict[str, Tuple[str, List[str]]]:
    """name -> (return type, [parameter declarations]) for every QD_API function."""
    out: Dict[str, Tuple[str, List[str]]] = {}
    for m in re.finditer(r"QD_API\s+([^;{}()]*?)\b(qd_\w+)\s*\(([^)]*)\)\s*;", _code_text()):
        ret, name, params = m.group(1), m.group(2), m.group(3)
        plist = [" ".join(p.split()) for p in params.split(",")]
        if plist == ["void"]:
            plist = []
        out[name] = (" ".join(ret.split()), plist)
    return out


def test_header_parses_to_many_functions() -> None:
    funcs = header_functions()
    # Sanity of the parser itself: the header has dozens of functions, and every "QD_API"
    # outside the #define is one of them.
    assert len(funcs) >= 40
    assert len(funcs) == len(re.findall(r"\bQD_API\s+[^\n]*\bqd_\w+\s*\(", _code_text()))


def test_every_header_function_is_declared() -> None:
    missing = sorted(set(header_functions()) - set(_lib.FUNCTIONS))
    assert not missing, f"qd.h functions the binding does not declare: {missing}"


def test_binding_declares_nothing_the_header_lacks() -> None:
    extra = sorted(set(_lib.FUNCTIONS) - set(header_functions()))
    assert not extra, f"declared but not in qd.h: {extra}"


def test_exported_symbol_list_is_covered() -> None:
    listing = REPO_DIR / "abi" / "exported-symbols.txt"
    if not listing.exists():
        pytest.skip(f"{listing} not present")
    symbols = {line.split()[0] for line in listing.read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    symbols = {s for s in symbols if s.startswith("qd_")}
    assert symbols, "empty exported-symbols.txt"
    assert not sorted(symbols - set(_lib.FUNCTIONS))


_SCALARS = {
    "qd_context": ctypes.c_uint64, "qd_stream": ctypes.c_uint64, "qd_event": ctypes.c_uint64,
    "qd_module": ctypes.c_uint64, "qd_kernel": ctypes.c_uint64, "uint64_t": ctypes.c_uint64,
    "uint32_t": ctypes.c_uint32, "uint8_t": ctypes.c_uint8, "int32_t": ctypes.c_int32,
    "qd_status": ctypes.c_int32, "qd_backend": ctypes.c_int32, "float": ctypes.c_float,
}
_FUNCTION_POINTERS = {"qd_host_kernel_fn": _lib.HostKernelFn, "qd_host_fn": _lib.HostFn}


def _split_param(decl: str) -> Tuple[str, int]:
    """('const qd_arg *args') -> ('qd_arg', 1): the base type and the pointer depth."""
    depth = decl.count("*")
    words = decl.replace("*", " * ").replace("const", " ").split()
    words = [w for w in words if w != "*"]
    base = words[0] if len(words) == 1 else " ".join(words[:-1])
    return base, depth


def _expected(base: str, depth: int):
    if depth == 0:
        if base in _FUNCTION_POINTERS:
            return _FUNCTION_POINTERS[base]
        return _SCALARS[base]
    if depth == 1 and base == "void":
        return ctypes.c_void_p
    if depth == 1 and base == "char":
        return ctypes.c_char_p
    if depth == 2 and base == "void":
        return ctypes.POINTER(ctypes.c_void_p)
    assert depth == 1, f"unexpected pointer depth in {base}"
    if base in _lib.STRUCTS:
        return ctypes.POINTER(_lib.STRUCTS[base])
    return ctypes.POINTER(_SCALARS[base])


@pytest.mark.parametrize("name", sorted(header_functions()) if HEADER.exists() else [])
def test_function_signature_matches_header(name: str) -> None:
    ret, params = header_functions()[name]
    restype, argtypes = _lib.FUNCTIONS[name]
    assert len(argtypes) == len(params), f"{name}: {len(params)} parameters in qd.h"
    fn = getattr(qd.lib, name)
    assert list(fn.argtypes) == list(argtypes), f"{name}: argtypes not applied"
    assert fn.restype is restype
    ret_base, ret_depth = _split_param(ret + " r")
    assert restype is _expected(ret_base, ret_depth), f"{name}: return type {ret}"
    for i, (decl, have) in enumerate(zip(params, argtypes)):
        want = _expected(*_split_param(decl))
        assert have is want, f"{name} parameter {i} ({decl}): {have} != {want}"


def _struct_fields(text: str) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = {}
    for m in re.finditer(r"typedef\s+struct\s+(qd_\w+)\s*\{(.*?)\}\s*(qd_\w+)\s*;", text, re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = decl.strip()
            if decl:
                fields.append(re.sub(r"\[.*?\]", "", decl).replace("*", " ").split()[-1])
        out[m.group(3)] = fields
    return out


def test_every_public_struct_is_mirrored_field_for_field() -> None:
    structs = _struct_fields(_code_text())
    assert set(structs) == set(_lib.STRUCTS), "public structs of qd.h vs binding mirrors"
    for cname, fields in structs.items():
        mirror = [f[0] for f in _lib.STRUCTS[cname]._fields_]
        assert mirror == fields, f"{cname}: fields {mirror} != {fields}"


def test_struct_layout_matches_c(tmp_path: Path) -> None:
    """Compile a C program that prints sizeof, alignment and offsetof of every field."""
    lines = ["#include <qd/qd.h>", "#include <stdio.h>", "#include <stddef.h>",
             "int main(void) {"]
    for cname, cls in _lib.STRUCTS.items():
        lines.append(f'    printf("{cname} %zu %zu\\n", sizeof({cname}), '
                     f"offsetof(struct {{ char c; {cname} s; }}, s));")
        for field, _ in cls._fields_:
            lines.append(f'    printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
    lines += ["    return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler (cc)")
    subprocess.run([cc, "-std=c99", f"-I{INCLUDE_DIR}", str(src), "-o", str(tmp_path / "lay")],
                   check=True, capture_output=True, text=True)
    printed = subprocess.run([str(tmp_path / "lay")], check=True, capture_output=True,
                             text=True).stdout.split("\n")
    c_values = {}
    for line in printed:
        if line.strip():
            key, *nums = line.split()
            c_values[key] = [int(n) for n in nums]
    for cname, cls in _lib.STRUCTS.items():
        size, align = c_values[cname]
        assert ctypes.sizeof(cls) == size, f"sizeof({cname})"
        assert ctypes.alignment(cls) == align, f"alignment of {cname}"
        for field, _ in cls._fields_:
            assert getattr(cls, field).offset == c_values[f"{cname}.{field}"][0], \
                f"offsetof({cname}, {field})"


def test_descriptors_initialise_struct_size() -> None:
    for cls in (_lib.ContextDesc, _lib.StreamDesc, _lib.LaunchConfig, _lib.Task,
                _lib.ContextStats, _lib.DeviceInfo):
        assert cls().struct_size == ctypes.sizeof(cls)


def header_statuses() -> Dict[str, int]:
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"X\((QD_\w+),\s*(-?\d+),", _header_text())}


def test_status_values_names_and_classes_match_header() -> None:
    statuses = header_statuses()
    assert len(statuses) >= 20
    for name, value in statuses.items():
        assert getattr(qd.Status, name[len("QD_"):]) == value, name
        assert qd.status_name(value) == name
        if value < 0 or value == 1:
            cls = _errors._BY_STATUS[value]
            exc = _errors.error_for_status(value, "m")
            assert type(exc) is cls and exc.status == value and exc.status_name == name
            assert str(exc) == f"{name}: m"
    assert qd.status_name(12345) == "QD_STATUS_UNKNOWN"
    assert type(_errors.error_for_status(-12345, "x")) is qd.QdError


def test_constants_match_header() -> None:
    text = _header_text()
    assert int(re.search(r"#define QD_MAX_ARGS (\d+)u", text).group(1)) == MAX_ARGS
    for name, value in re.findall(r"QD_BACKEND_(\w+) = (\d+)", text):
        if name != "FORCE_32_":
            assert qd.Backend[name] == int(value)
    major = int(re.search(r"#define QD_VERSION_MAJOR (\d+)", text).group(1))
    minor = int(re.search(r"#define QD_VERSION_MINOR (\d+)", text).group(1))
    assert (_lib.ABI_MAJOR, _lib.ABI_MINOR) == (major, minor)
    assert qd.version()[:2] >= (major, minor) and qd.version()[0] == major
