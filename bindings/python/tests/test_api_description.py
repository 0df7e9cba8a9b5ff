"""The binding against abi/qd-api.json, the machine-readable description of qd.h (abi/README.md).

_lib.py and _errors.py are written by hand; these tests fail on any drift from the description:
a function missing, extra, or with other argument or return types; a status missing, renumbered
or without its exception class; a struct mirror with other fields, types, sizes or offsets; a
constant or enum value that the binding mirrors with another value (or a new one it has not
decided about). That the description itself matches qd.h is test_header.py's job (and meson's,
suite abi: abi/describe --check).
"""

from __future__ import annotations

import ctypes
import json
import platform
import sys
from typing import Any, Dict, List

import pytest

import qd
from qd import _base, _context, _errors, _kernel, _lib

from conftest import REPO_DIR

DESCRIPTION = REPO_DIR / "abi" / "qd-api.json"

pytestmark = pytest.mark.skipif(not DESCRIPTION.exists(), reason=f"no {DESCRIPTION}")


def load() -> Dict[str, Any]:
    return json.loads(DESCRIPTION.read_text())


API: Dict[str, Any] = load() if DESCRIPTION.exists() else {
    "functions": [], "structs": [], "statuses": [], "enums": [], "constants": []}

# ---------------------------------------------------------------------------------------------
# C types -> the ctypes _lib.py uses for them
# ---------------------------------------------------------------------------------------------

_SCALARS = {
    "uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32, "uint8_t": ctypes.c_uint8,
    "int32_t": ctypes.c_int32, "float": ctypes.c_float, "char": ctypes.c_char,
}


def _camel(c_name: str) -> str:
    """qd_host_kernel_fn -> HostKernelFn: the name _lib.py gives a C type's mirror."""
    return "".join(part.capitalize() for part in c_name[len("qd_"):].split("_"))


def ctype_of(c_type: str) -> Any:
    """The ctypes type _lib.py uses for a C type of the description ('const qd_arg *', ...)."""
    depth = c_type.count("*")
    words = [w for w in c_type.replace("*", " ").split() if w not in ("const", "volatile")]
    base = " ".join(words)
    if depth == 0:
        return _base_type(base)
    if depth == 1 and base == "void":
        return ctypes.c_void_p
    if depth == 1 and base == "char":
        return ctypes.c_char_p
    inner = base + " " + "*" * (depth - 1)
    return ctypes.POINTER(ctype_of(inner))


def _base_type(name: str) -> Any:
    if name == "void":
        return None
    if name in _SCALARS:
        return _SCALARS[name]
    kinds = {h["name"]: ("handle", h) for h in API["handles"]}
    kinds.update({t["name"]: ("typedef", t) for t in API["typedefs"]})
    kinds.update({e["name"]: ("enum", e) for e in API["enums"]})
    kinds.update({s["name"]: ("struct", s) for s in API["structs"]})
    kinds.update({f["name"]: ("function_pointer", f) for f in API["function_pointers"]})
    kind, item = kinds.get(name, (None, None))
    if kind == "handle":
        return ctypes.c_uint64
    if kind == "typedef":
        return _base_type(item["type"])
    if kind == "enum":
        assert item["size"] == 4, f"enum {name}: size {item['size']}"
        return ctypes.c_int32  # as _lib.py passes qd_backend (int-sized)
    if kind == "struct":
        assert name in _lib.STRUCTS, f"struct {name} has no mirror in _lib.STRUCTS"
        return _lib.STRUCTS[name]
    if kind == "function_pointer":
        mirror = getattr(_lib, _camel(name), None)
        assert mirror is not None, f"{name} has no CFUNCTYPE _lib.{_camel(name)}"
        return mirror
    raise AssertionError(f"a C type this test does not know: {name!r} (teach ctype_of)")


def same_ctype(have: Any, want: Any) -> bool:
    if isinstance(have, type) and issubclass(have, ctypes.Array):
        return (isinstance(want, type) and issubclass(want, ctypes.Array)
                and have._length_ == want._length_ and same_ctype(have._type_, want._type_))
    return have is want


def field_ctype(field: Dict[str, Any]) -> Any:
    t = ctype_of(field["type"])
    return t * field["array_length"] if field["array_length"] is not None else t


# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------


def test_description_is_plausible() -> None:
    assert API["format"] == 1
    assert len(API["functions"]) >= 40 and len(API["statuses"]) >= 20 and API["structs"]


def test_every_function_is_declared_and_nothing_else() -> None:
    described = [f["name"] for f in API["functions"]]
    missing = sorted(set(described) - set(_lib.FUNCTIONS))
    extra = sorted(set(_lib.FUNCTIONS) - set(described))
    assert not missing, f"functions of abi/qd-api.json that _lib.FUNCTIONS lacks: {missing}"
    assert not extra, f"_lib.FUNCTIONS declares functions qd.h does not have: {extra}"


@pytest.mark.parametrize("fn", API["functions"], ids=lambda f: f["name"])
def test_function_types_match(fn: Dict[str, Any]) -> None:
    name = fn["name"]
    restype, argtypes = _lib.FUNCTIONS[name]
    assert len(argtypes) == len(fn["params"]), \
        f"{name}: {len(argtypes)} argtypes, qd.h has {len(fn['params'])} parameters"
    assert same_ctype(restype, ctype_of(fn["return"])), \
        f"{name}: restype {restype}, qd.h returns {fn['return']}"
    for i, (param, have) in enumerate(zip(fn["params"], argtypes)):
        want = ctype_of(param["type"])
        assert same_ctype(have, want), \
            f"{name} parameter {i} ({param['type']} {param['name']}): {have} != {want}"
    applied = getattr(_lib.lib, name)
    assert list(applied.argtypes) == list(argtypes), f"{name}: argtypes not applied"
    assert applied.restype is restype


@pytest.mark.parametrize("fp", API.get("function_pointers", []), ids=lambda f: f["name"])
def test_function_pointer_types_match(fp: Dict[str, Any]) -> None:
    mirror = ctype_of(fp["name"])
    assert same_ctype(mirror._restype_, ctype_of(fp["return"])), f"{fp['name']}: return type"
    assert len(mirror._argtypes_) == len(fp["params"]), f"{fp['name']}: parameter count"
    for param, have in zip(fp["params"], mirror._argtypes_):
        assert same_ctype(have, ctype_of(param["type"])), f"{fp['name']}: {param['name']}"


# ---------------------------------------------------------------------------------------------
# Structs
# ---------------------------------------------------------------------------------------------


def test_every_struct_is_mirrored_and_nothing_else() -> None:
    assert set(_lib.STRUCTS) == {s["name"] for s in API["structs"]}


@pytest.mark.parametrize("struct", API["structs"], ids=lambda s: s["name"])
def test_struct_mirror_fields_match(struct: Dict[str, Any]) -> None:
    cls = _lib.STRUCTS[struct["name"]]
    have = [name for name, _ in cls._fields_]
    want = [f["name"] for f in struct["fields"]]
    assert have == want, f"{struct['name']}: fields {have} != {want}"
    for (name, ctype), field in zip(cls._fields_, struct["fields"]):
        assert same_ctype(ctype, field_ctype(field)), \
            f"{struct['name']}.{name}: {ctype} != {field['type']}" + \
            (f"[{field['array_length']}]" if field["array_length"] is not None else "")


def _same_abi_as_description() -> bool:
    return (API.get("abi") == "x86_64-linux-gnu (LP64)" and sys.platform.startswith("linux")
            and platform.machine().lower() in ("x86_64", "amd64")
            and ctypes.sizeof(ctypes.c_void_p) == 8)


@pytest.mark.parametrize("struct", API["structs"], ids=lambda s: s["name"])
def test_struct_mirror_layout_matches(struct: Dict[str, Any]) -> None:
    if not _same_abi_as_description():
        pytest.skip(f"abi/qd-api.json has the layout of {API.get('abi')}; test_header.py checks "
                    "this host's")
    cls = _lib.STRUCTS[struct["name"]]
    assert ctypes.sizeof(cls) == struct["size"], f"sizeof({struct['name']})"
    assert ctypes.alignment(cls) == struct["align"], f"alignment of {struct['name']}"
    for field in struct["fields"]:
        desc = getattr(cls, field["name"])
        assert (desc.offset, desc.size) == (field["offset"], field["size"]), \
            f"{struct['name']}.{field['name']}: offset, size"


@pytest.mark.parametrize("struct", [s for s in API["structs"] if s["init_macro"]],
                         ids=lambda s: s["name"])
def test_descriptor_mirrors_set_struct_size_as_the_init_macro_does(
        struct: Dict[str, Any]) -> None:
    cls = _lib.STRUCTS[struct["name"]]
    if struct["has_struct_size"]:
        assert cls().struct_size == ctypes.sizeof(cls), \
            f"{cls.__name__}() does not set struct_size as {struct['init_macro']} does"
        assert struct["first_size"] <= ctypes.sizeof(cls)


# ---------------------------------------------------------------------------------------------
# Statuses
# ---------------------------------------------------------------------------------------------


def _status_attrs() -> Dict[str, int]:
    return {k: v for k, v in vars(_errors.Status).items() if k.isupper()}


def test_every_status_is_mirrored_with_its_value_and_nothing_else() -> None:
    want = {s["name"][len("QD_"):]: s["value"] for s in API["statuses"]}
    assert _status_attrs() == want


@pytest.mark.parametrize("status", [s for s in API["statuses"] if s["value"] != 0],
                         ids=lambda s: s["name"])
def test_every_status_but_success_has_its_exception_class(status: Dict[str, Any]) -> None:
    cls = _errors._BY_STATUS.get(status["value"])
    assert cls is not None, f"{status['name']}: no exception class in _errors._BY_STATUS"
    assert cls is not qd.QdError and issubclass(cls, qd.QdError)
    assert cls.default_status == status["value"]
    assert getattr(qd, cls.__name__) is cls, f"qd.{cls.__name__} is not exported"


# ---------------------------------------------------------------------------------------------
# Constants and enums
# ---------------------------------------------------------------------------------------------

#: Each constant and enumerator of qd.h, and what the binding has for it: its value where the
#: binding mirrors it, or None with the reason it does not. A new one fails
#: test_every_constant_is_decided until it is added here.
MIRRORED: Dict[str, Any] = {
    "QD_VERSION_MAJOR": _lib.ABI_MAJOR,
    "QD_VERSION_MINOR": _lib.ABI_MINOR,
    "QD_MAX_ARGS": _base.MAX_ARGS,
    # _context.py passes these as literals: create_stream(non_blocking=True), create_event(
    # timing=True).
    "QD_STREAM_NON_BLOCKING": 1,
    "QD_EVENT_TIMING": 1,
    # _context.py: Context(validate=True) / validate="raise".
    "QD_CONTEXT_VALIDATE": _context.CONTEXT_VALIDATE,
    "QD_CONTEXT_VALIDATE_FAIL": _context.CONTEXT_VALIDATE_FAIL,
    # Kernel.set_param_access takes these by name ("read", "write", "read_write", "ignore").
    **{f"QD_PARAM_{k.upper()}": v for k, v in _kernel.PARAM_ACCESS.items()},
    **{f"QD_BACKEND_{m.name}": m.value for m in qd.Backend},
}
NOT_MIRRORED: Dict[str, str] = {
    "QD_VERSION_PATCH": "the binding needs major.minor only (_lib.ABI_MAJOR, ABI_MINOR)",
    "QD_VERSION": "qd.version() decodes qd_version() itself",
    "QD_MAX_ARG_BYTES": "C enforces it (QD_ERROR_OVERFLOW becomes qd.QdOverflowError)",
    "QD_HAZARD_RACE": "reports arrive as messages (qd.HazardWarning, qd.HazardError)",
    "QD_HAZARD_FREE_IN_USE": "reports arrive as messages (qd.HazardWarning, qd.HazardError)",
    "QD_HAZARD_USE_AFTER_FREE": "reports arrive as messages (qd.HazardWarning, qd.HazardError)",
}


def _described_values() -> Dict[str, int]:
    out = {c["name"]: c["value"] for c in API["constants"]}
    for enum in API["enums"]:
        if enum["name"] == "qd_status_code":
            continue  # the statuses, checked above
        out.update({v["name"]: v["value"] for v in enum["values"] if not v.get("internal")})
    return out


def test_every_constant_is_decided() -> None:
    undecided = sorted(set(_described_values()) - set(MIRRORED) - set(NOT_MIRRORED))
    assert not undecided, ("constants or enumerators of qd.h the binding has not decided about "
                           f"(add each to MIRRORED or NOT_MIRRORED): {undecided}")
    stale = sorted((set(MIRRORED) | set(NOT_MIRRORED)) - set(_described_values()))
    assert not stale, f"mirrored but not in qd.h (a Backend member too many?): {stale}"


def test_mirrored_constants_have_the_header_values() -> None:
    described = _described_values()
    wrong = {name: (value, described[name]) for name, value in MIRRORED.items()
             if name in described and value != described[name]}
    assert not wrong, f"binding value != qd.h value: {wrong}"


def test_statuses_are_the_status_enum() -> None:
    codes: List[Dict[str, Any]] = [e for e in API["enums"] if e["name"] == "qd_status_code"]
    assert codes, "enum qd_status_code is not in the description"
    assert [(v["name"], v["value"]) for v in codes[0]["values"] if not v.get("internal")] == \
        [(s["name"], s["value"]) for s in API["statuses"]]
