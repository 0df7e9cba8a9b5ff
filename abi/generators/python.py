"""abi/gen target: python, the Python binding's low layer (bindings/python/qd/_api.py).

One module, made from the description alone, that the hand-written rest of the package imports:

- ABI_MAJOR / ABI_MINOR, every constant and enumerator of qd.h as a module constant;
- ``Status`` (QD_STATUS_LIST), and per status but QD_SUCCESS an exception class based on
  ``QdError`` (hand-written in qd/_errors.py), with ``BY_STATUS`` (status -> class);
- the ctypes mirror of every struct (``STRUCTS``), the ``CFUNCTYPE`` of every function pointer,
  and ``FUNCTIONS`` {name: (restype, argtypes)}, which ctypes declares;
- ``CDEF``, the cffi declarations of the same API (cffi ABI mode reads this, so the package
  needs no qd-api.json at run time);
- ``SIGNATURES``: per function its parameters with their roles and the statuses qd.h lists for
  it, and ``FIELD_TYPES`` / ``HANDLES``, for tests that are driven by the API itself (the
  forged-handle fuzz test).

Python names are made from C names (``qd_context_desc`` -> ``ContextDesc``,
``QD_ERROR_NOT_FOUND`` -> ``NotFoundError``); the few places where the binding is more
idiomatic than that rule (an extra Python base class, a name that would shadow a builtin, a
longer docstring) are the overlay tables below. A new status, struct, function pointer or
function needs no edit here.
"""

from __future__ import annotations

import builtins
import json
from typing import Any, Dict, List, Optional, Tuple

from . import common

PATH = "bindings/python/qd/_api.py"

# ----------------------------------------------------------------------------------------------
# Overlays: what the binding says differently from the naming rule or qd.h's one-line text.
# ----------------------------------------------------------------------------------------------

#: Status -> (class name or None for the rule's, extra Python bases, docstring or None for
#: "<STATUS>: <qd.h's description>.").
STATUS_OVERLAY: Dict[str, Tuple[Optional[str], Tuple[str, ...], Optional[str]]] = {
    "QD_NOT_READY": (None, (), "QD_NOT_READY where a result needs completed work (e.g. "
                     "Event.elapsed_ms too early)."),
    "QD_ERROR_INVALID_ARGUMENT": (None, ("ValueError",), None),
    "QD_ERROR_WRONG_CONTEXT": (None, ("ValueError",), "QD_ERROR_WRONG_CONTEXT: objects of "
                               "different contexts were mixed in one call."),
    "QD_ERROR_OUT_OF_MEMORY": (None, ("MemoryError",), None),
    "QD_ERROR_OVERFLOW": ("QdOverflowError", ("OverflowError",), None),
    "QD_ERROR_INVALID_ADDRESS": (None, ("ValueError",), "QD_ERROR_INVALID_ADDRESS: an address "
                                 "is not a live allocation, or a range runs past the end of its "
                                 "allocation (or of a Python buffer, which the binding checks "
                                 "itself)."),
    "QD_ERROR_NOT_FOUND": (None, ("LookupError",), None),
    "QD_ERROR_INTERNAL": (None, (), "QD_ERROR_INTERNAL: an internal error of qd; please report "
                          "it."),
    "QD_ERROR_HAZARD": (None, (), "QD_ERROR_HAZARD: the validation mode found a hazard in this "
                        "call and refused it (``Context(validate=\"raise\")``); the message is "
                        "the report."),
}

#: Struct -> its docstring's text after ``qd_name``: (None: "a struct of qd.h").
STRUCT_DOCS: Dict[str, str] = {
    "qd_context_desc": "parameters of ``qd_context_create``.",
    "qd_stream_desc": "parameters of ``qd_stream_create``.",
    "qd_launch_config": "grid, block and shared memory of a launch.",
    "qd_arg": "one kernel argument, ``size`` bytes read from ``data``.",
    "qd_task": "one task of ``qd_launch_parallel``.",
    "qd_host_kernel_info": "what a CPU host kernel receives for one block.",
    "qd_context_stats": "statistics of one context.",
    "qd_device_info": "what ``qd_device_get_info`` reports.",
    "qd_hazard": "one hazard the validation mode reports (valid during the handler only).",
}

#: Function pointer type -> a sentence added to its docstring.
FUNCTION_POINTER_DOCS: Dict[str, str] = {
    "qd_host_kernel_fn": "Wrap a Python function with it (as a decorator) to make a raw ctypes "
                         "host kernel.",
    "qd_host_fn": "A host callback.",
}

# ----------------------------------------------------------------------------------------------
# C types -> ctypes
# ----------------------------------------------------------------------------------------------

_SCALARS = {
    "uint64_t": "c_uint64", "uint32_t": "c_uint32", "uint16_t": "c_uint16", "uint8_t": "c_uint8",
    "int64_t": "c_int64", "int32_t": "c_int32", "int16_t": "c_int16", "int8_t": "c_int8",
    "float": "c_float", "double": "c_double", "char": "c_char", "int": "c_int",
    "unsigned int": "c_uint", "size_t": "c_size_t",
}
_ENUM_BY_SIZE = {1: "c_int8", 2: "c_int16", 4: "c_int32", 8: "c_int64"}


class _Types:
    """Resolves the description's C types to ctypes expressions (as source text)."""

    def __init__(self, api: Dict[str, Any]) -> None:
        self.api = api
        self.kind = common.kinds(api)
        self.typedefs = {t["name"]: t["type"] for t in api["typedefs"]}
        self.enum_size = {e["name"]: e.get("size", 4) for e in api["enums"]}
        self.used: set = set()  # ctypes names used, for the import line

    def py_name(self, c_name: str) -> str:
        """The Python class of a struct or function pointer type."""
        return common.camel(c_name)

    def base(self, name: str) -> Optional[str]:
        if name == "void":
            return None
        if name in _SCALARS:
            self.used.add(_SCALARS[name])
            return _SCALARS[name]
        kind = self.kind.get(name)
        if kind == "handle":
            self.used.add("c_uint64")
            return "c_uint64"
        if kind == "typedef":
            return self.base(self.typedefs[name])
        if kind == "enum":
            t = _ENUM_BY_SIZE[self.enum_size[name]]
            self.used.add(t)
            return t
        if kind in ("struct", "function_pointer"):
            return self.py_name(name)
        raise SystemExit(f"abi/generators/python.py: a C type it cannot map: {name!r}")

    def of(self, c_type: str) -> str:
        """'const qd_arg *' -> 'POINTER(Arg)'; 'const char *' -> 'c_char_p'; 'void' -> 'None'."""
        depth = c_type.count("*")
        words = [w for w in c_type.replace("*", " ").split() if w not in ("const", "volatile")]
        name = " ".join(words)
        if depth == 0:
            return self.base(name) or "None"
        if depth == 1 and name == "void":
            self.used.add("c_void_p")
            return "c_void_p"
        if depth == 1 and name == "char":
            self.used.add("c_char_p")
            return "c_char_p"
        self.used.add("POINTER")
        inner = name + " " + "*" * (depth - 1)
        return f"POINTER({self.of(inner.strip())})"

    def field(self, f: Dict[str, Any]) -> str:
        t = self.of(f["type"])
        return f"{t} * {f['array_length']}" if f.get("array_length") else t

    def deps(self, c_type: str) -> List[str]:
        """The structs and function pointer types a C type names."""
        words = [w for w in c_type.replace("*", " ").split() if w not in ("const", "volatile")]
        name = " ".join(words)
        return [name] if self.kind.get(name) in ("struct", "function_pointer") else []


# ----------------------------------------------------------------------------------------------
# Rendering helpers
# ----------------------------------------------------------------------------------------------


def _wrap(text: str, indent: str, width: int = 100) -> List[str]:
    """Words of text as lines of at most width columns, each starting with indent."""
    out: List[str] = []
    line = indent
    for word in text.split():
        if line.strip() and len(line) + 1 + len(word) > width:
            out.append(line)
            line = indent + word
        else:
            line = line + (" " if line.strip() else "") + word
    if line.strip():
        out.append(line)
    return out


def _docstring(text: str, indent: str) -> List[str]:
    body = _wrap('"""' + text.replace('"""', '\\"""'), indent)
    if len(body[-1]) + 3 <= 100:
        body[-1] += '"""'
    else:
        body.append(indent + '"""')
    return body


def _call(head: str, items: List[str], indent: str, tail: str = ",",
          close: str = ")") -> List[str]:
    """``head(item, item)tail`` on one line, or one item per line when it does not fit (head
    ends with the opening bracket, close is the closing one)."""
    one = f"{indent}{head}{', '.join(items)}{close}{tail}"
    if len(one) <= 100:
        return [one]
    return [f"{indent}{head}"] + [f"{indent}    {it}," for it in items] + \
        [f"{indent}{close}{tail}"]


def _pack(head: str, items: List[str], indent: str, tail: str = ",") -> List[str]:
    """Like _call, but several items to a line when they do not fit on one."""
    one = _call(head, items, indent, tail)
    if len(one) == 1:
        return one
    return [f"{indent}{head}"] + _wrap(" ".join(f"{it}," for it in items), indent + "    ") + \
        [f"{indent}){tail}"]


def _status_class(status: Dict[str, Any]) -> Tuple[str, Tuple[str, ...], str]:
    name, extra, doc = STATUS_OVERLAY.get(status["name"], (None, (), None))
    if name is None:
        name = common.camel(common.status_short(status["name"])) + "Error"
        if hasattr(builtins, name):  # never shadow a builtin (OverflowError, ...)
            name = "Qd" + name
    if doc is None:
        doc = f"{status['name']}: {status['description']}."
    return name, extra, doc


# ----------------------------------------------------------------------------------------------
# The module
# ----------------------------------------------------------------------------------------------


def _header(api: Dict[str, Any]) -> List[str]:
    v = api["version"]
    return [
        common.first_line("#"),
        '"""The Python binding\'s low layer: qd.h as ctypes and cffi declarations, statuses and',
        "their exceptions, written by abi/gen (abi/generators/python.py) from abi/qd-api.json.",
        "",
        "Imported by qd/_lib.py (loading, declaring the functions) and qd/_errors.py (QdError and",
        "the binding's own exceptions); nothing here loads libqd. The exception classes below are",
        "based on qd._errors.QdError, which qd/_errors.py defines before it imports this module.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "__IMPORTS__",
        "from typing import Dict, List, NamedTuple, Optional, Tuple, Type",
        "",
        f"#: The release of qd.h this module describes (QD_VERSION_MAJOR / _MINOR; "
        f"{v['major']}.{v['minor']}.{v['patch']}).",
        f"ABI_MAJOR = {v['major']}",
        f"ABI_MINOR = {v['minor']}",
    ]


def _constants(api: Dict[str, Any]) -> List[str]:
    out = ["", "# Constants and enumerators of qd.h.", ""]
    for c in api["constants"]:
        out.append(f"{c['name']} = {c['value']}")
    for e in api["enums"]:
        if e["name"] == "qd_status_code":
            continue  # Status below
        out.append(f"# {e['c_name']}")
        for v in e["values"]:
            if not v.get("internal"):
                out.append(f"{v['name']} = {v['value']}")
    return out


def _statuses(api: Dict[str, Any]) -> List[str]:
    out = ["", "", "class Status:", '    """The qd_status values of qd.h (QD_STATUS_LIST)."""', ""]
    for s in api["statuses"]:
        line = f"    {s['name'][len('QD_'):]} = {s['value']}"
        comment = f"  #: {s['description']}"
        out.append(line + comment if len(line + comment) <= 100 else line)
    return out


def _types(api: Dict[str, Any], types: _Types) -> List[str]:
    out = [
        "",
        "",
        "class _Described(Structure):",
        '    """A qd descriptor as its INIT macro makes it: ``struct_size`` is this struct\'s size,',
        "    the fields the macro sets (``_init_values_``: an array field's value is every element's)",
        "    have its values, and a nested descriptor is made the same way; a field given to the",
        '    constructor keeps the value given."""',
        "",
        "    _init_values_: Dict[str, int] = {}",
        "",
        "    def __init__(self, *args: object, **kwargs: object) -> None:",
        "        super().__init__(*args, **kwargs)",
        "        if not self.struct_size:",
        "            self.struct_size = sizeof(self)",
        "        given = set(kwargs).union(name for name, _ in self._fields_[:len(args)])",
        "        for name, ctype in self._fields_:",
        "            if name in given:",
        "                continue",
        "            if name in self._init_values_:",
        "                value = self._init_values_[name]",
        "                length = getattr(ctype, \"_length_\", None)",
        "                setattr(self, name, ctype(*[value] * length) if length else value)",
        "            elif isinstance(ctype, type) and issubclass(ctype, _Described):",
        "                setattr(self, name, ctype())",
    ]
    types.used.update({"Structure", "sizeof"})
    items: List[Tuple[str, Dict[str, Any]]] = [("struct", s) for s in api["structs"]]
    items += [("function_pointer", f) for f in api["function_pointers"]]
    done: set = set()
    pending = list(items)
    while pending:  # header order, each after the types it names
        for i, (kind, item) in enumerate(pending):
            if kind == "struct":
                needs = [d for f in item["fields"] for d in types.deps(f["type"])]
            else:
                needs = [d for p in item["params"] + [{"type": item["return"]}]
                         for d in types.deps(p["type"])]
            if all(d in done or d == item["name"] for d in needs):
                break
        else:
            raise SystemExit("abi/generators/python.py: types that name each other in a cycle: "
                             + ", ".join(it["name"] for _, it in pending))
        pending.pop(i)
        done.add(item["name"])
        out += _struct(item, types) if kind == "struct" else _function_pointer(item, types)
    out += ["", "", "#: C struct name -> its ctypes mirror (every public struct of qd.h).",
            "STRUCTS: Dict[str, type] = {"]
    out += [f'    "{s["name"]}": {types.py_name(s["name"])},' for s in api["structs"]]
    out += ["}", "", "#: C struct name -> {field: its C type}, as qd.h writes them.",
            "FIELD_TYPES: Dict[str, Dict[str, str]] = {"]
    for s in api["structs"]:
        fields = [_s(f["name"]) + ": " + _s(f["type"] + (f"[{f['array_length']}]"
                                                           if f.get("array_length") else ""))
                  for f in s["fields"]]
        out += _call(_s(s["name"]) + ": {", fields, "    ", ",", "}")
    out += ["}", "", "#: The handle types of qd.h (each a uint64_t)."]
    out += _call("HANDLES: Tuple[str, ...] = (", [_s(h["name"]) for h in api["handles"]], "", "")
    return out


def _struct(s: Dict[str, Any], types: _Types) -> List[str]:
    name = types.py_name(s["name"])
    described = s.get("has_struct_size") and s.get("init_macro")
    doc = f"``{s['name']}``: {STRUCT_DOCS.get(s['name'], 'a struct of qd.h.')}"
    out = ["", "", f"class {name}({'_Described' if described else 'Structure'}):"]
    out += _docstring(doc, "    ")
    out += ["", "    _fields_ = ["]
    for f in s["fields"]:
        out.append(f'        ("{f["name"]}", {types.field(f)}),')
    out.append("    ]")
    if described and s.get("init_values"):
        values = ", ".join(f"{_s(k)}: {v}" for k, v in s["init_values"].items())
        out.append(f"    _init_values_ = {{{values}}}  # {s['init_macro']}")
    return out


def _decl(c_type: str, name: str) -> str:
    """'const qd_arg *', 'args' -> 'const qd_arg *args'; 'uint32_t', 'n' -> 'uint32_t n'."""
    return f"{c_type}{name}" if c_type.endswith("*") else f"{c_type} {name}"


def _s(text: str) -> str:
    """A Python string literal in double quotes."""
    return json.dumps(text)


def _fp_signature(fp: Dict[str, Any]) -> str:
    params = ", ".join(_decl(p["type"], p["name"]) for p in fp["params"]) or "void"
    return f"{fp['return']} (*)({params})"


def _function_pointer(fp: Dict[str, Any], types: _Types) -> List[str]:
    name = types.py_name(fp["name"])
    types.used.add("CFUNCTYPE")
    args = [types.of(fp["return"])] + [types.of(p["type"]) for p in fp["params"]]
    doc = f"{fp['name']}: {_fp_signature(fp)}."
    if fp["name"] in FUNCTION_POINTER_DOCS:
        doc += " " + FUNCTION_POINTER_DOCS[fp["name"]]
    out = ["", "", f"#: ``{fp['name']}``: {_fp_signature(fp)}."]
    if len(out[-1]) > 100:
        out[-1] = f"#: ``{fp['name']}``."
    out += _call(f"{name} = CFUNCTYPE(", args, "", "")
    out += _wrap_assign(f"{name}.__doc__ = ", doc)
    return out


def _wrap_assign(head: str, text: str) -> List[str]:
    one = f"{head}{_s(text)}"
    if len(one) <= 100:
        return [one]
    parts = _wrap(text, "", 92)
    lines = [f"{head}("]
    for i, p in enumerate(parts):
        lines.append(f"    {_s(p + (' ' if i < len(parts) - 1 else ''))}")
    lines.append(")")
    return lines


def _functions(api: Dict[str, Any], types: _Types) -> List[str]:
    out = ["", "", "#: Every function of qd.h: name -> (restype, argtypes), as ctypes declares it. "
           "Handles are", "#: c_uint64, qd_status c_int32.",
           "FUNCTIONS: Dict[str, Tuple[object, List[object]]] = {"]
    group = None
    for fn in api["functions"]:
        if fn.get("group") != group:
            group = fn.get("group")
            out.append(f"    # {group}" + (f" (since {fn['since']})" if fn.get("since") and
                                             fn["since"] != "0.1" else ""))
        args = [types.of(p["type"]) for p in fn["params"]]
        ret = types.of(fn["return"])
        one = f'    "{fn["name"]}": ({ret}, [{", ".join(args)}]),'
        if len(one) <= 100:
            out.append(one)
        else:
            out.append(f'    "{fn["name"]}": (')
            out.append(f"        {ret},")
            row = f"        [{', '.join(args)}],"
            if len(row) <= 100:
                out.append(row)
            else:
                out.append("        [")
                out += [f"            {a}," for a in args]
                out.append("        ],")
            out.append("    ),")
    out.append("}")
    return out


_PARAM_KEYS = ("of", "count", "size", "optional", "handle")


def _signatures(api: Dict[str, Any]) -> List[str]:
    out = [
        "",
        "",
        "class Param(NamedTuple):",
        '    """One parameter of a qd.h function: its C name and type, and its role (abi/README.md:',
        "    handle, out, in_array, out_array, count, in_struct, inout_struct, string, bytes, size,",
        '    callback, user_data, host_pointer, address, value) with what the role names."""',
        "",
        "    name: str",
        "    type: str",
        "    role: str",
        "    of: Optional[str] = None  #: the handle, pointee, element, struct or callback type",
        "    count: Optional[str] = None  #: in_array/out_array: the parameter that counts it",
        "    size: Optional[str] = None  #: bytes: the parameter that gives its size",
        "    optional: bool = False  #: NULL is allowed",
        "    handle: bool = False  #: ``of`` is a handle type",
        "",
        "",
        "class Signature(NamedTuple):",
        '    """One function of qd.h: its return type, parameters, and the statuses qd.h lists for it',
        '    (None where it returns no qd_status)."""',
        "",
        "    returns: str",
        "    params: Tuple[Param, ...]",
        "    statuses: Optional[Tuple[str, ...]]",
        "    since: str",
        "    group: str",
        "    experimental: bool = False",
        "",
        "",
        "#: Every function of qd.h, described: name -> Signature.",
        "SIGNATURES: Dict[str, Signature] = {",
    ]
    for fn in api["functions"]:
        out.append(f'    "{fn["name"]}": Signature(')
        out.append(f'        {_s(fn["return"])},')
        if fn["params"]:
            out.append("        (")
            for p in fn["params"]:
                items = [_s(p["name"]), _s(p["type"]), _s(p["role"])]
                items += [f"{k}={_s(p[k]) if isinstance(p[k], str) else repr(p[k])}"
                          for k in _PARAM_KEYS if p.get(k) not in (None, False)]
                out += _call("Param(", items, "            ")
            out.append("        ),")
        else:
            out.append("        (),")
        statuses = fn.get("statuses")
        if statuses is None:
            out.append("        None,")
        else:
            out += _pack("(", [_s(s) for s in statuses], "        ")
        out.append(f'        {_s(fn.get("since", ""))},')
        out.append(f'        {_s(fn.get("group", ""))},')
        if fn.get("experimental"):
            out.append("        experimental=True,")
        out.append("    ),")
    out.append("}")
    return out


def _cdef(api: Dict[str, Any]) -> List[str]:
    """cffi cdef text: handles, typedefs, enums, structs, function pointers and functions."""
    decl: List[str] = []
    for h in api["handles"]:
        decl.append(f"typedef {h['type']} {h['name']};")
    for t in api["typedefs"]:
        decl.append(f"typedef {t['type']} {t['name']};")
    for e in api["enums"]:
        values = [f"{v['name']} = {v['value']}" for v in e["values"]]
        if e["c_name"].startswith("enum "):
            head, tail = f"{e['c_name']} {{", "};"
        else:
            head, tail = "typedef enum {", f"}} {e['name']};"
        one = f"{head} {', '.join(values)} {tail}"
        if len(one) <= 100:
            decl.append(one)
        else:
            decl += [head] + [f"    {v}," for v in values] + [tail]
    for st in api["structs"]:
        decl.append(f"typedef struct {st['name']} {st['name']};")
    for fp in api["function_pointers"]:
        params = ", ".join(_decl(p["type"], p["name"]) for p in fp["params"]) or "void"
        decl.append(f"typedef {fp['return']} (*{fp['name']})({params});")
    for st in api["structs"]:
        decl.append(f"struct {st['name']} {{")
        for f in st["fields"]:
            dim = f"[{f['array_length']}]" if f.get("array_length") else ""
            decl.append(f"    {f['type']} {f['name']}{dim};")
        decl.append("};")
    for fn in api["functions"]:
        params = [_decl(p["type"], p["name"]) for p in fn["params"]] or ["void"]
        one = f"{_decl(fn['return'], fn['name'])}({', '.join(params)});"
        if len(one) <= 96:
            decl.append(one)
        else:
            decl.append(f"{_decl(fn['return'], fn['name'])}(")
            decl += [f"    {p}," for p in params[:-1]] + [f"    {params[-1]});"]
    for line in decl:
        assert "\\" not in line and '"""' not in line, line
    return ["", "", "#: The cffi declarations (ABI mode) of qd.h: the same types and functions as "
            "above.", 'CDEF = """\\'] + decl + ['"""']


def _exceptions(api: Dict[str, Any]) -> List[str]:
    out = ["", "", "# One exception class per status but QD_SUCCESS (qd/_errors.py defines QdError, "
           "the base,", "# and the binding's own subclasses).", "",
           "from ._errors import QdError  # noqa: E402  (after Status: _errors imports it)"]
    names = []
    for s in api["statuses"]:
        if s["value"] == 0:
            continue
        name, extra, doc = _status_class(s)
        names.append(name)
        out += ["", "", f"class {name}({', '.join(('QdError',) + extra)}):"]
        out += _docstring(doc, "    ")
        out += ["", f"    default_status = Status.{s['name'][len('QD_'):]}"]
    out += ["", "", "#: Every exception class above, in QD_STATUS_LIST order.",
            "EXCEPTIONS: Tuple[Type[QdError], ...] = ("]
    out += [f"    {n}," for n in names]
    out += [")", "#: status -> its exception class.",
            "BY_STATUS: Dict[int, Type[QdError]] = {cls.default_status: cls for cls in EXCEPTIONS}"]
    return out


def render(api: Dict[str, Any]) -> str:
    types = _Types(api)
    body: List[str] = []
    body += _constants(api)
    body += _statuses(api)
    body += _types(api, types)
    body += _functions(api, types)
    body += _signatures(api)
    body += _cdef(api)
    body += _exceptions(api)
    head = _header(api)
    names = sorted(types.used, key=lambda n: (n[0].islower(), n))  # CFUNCTYPE, POINTER, ...
    i = head.index("__IMPORTS__")
    head[i:i + 1] = _call("from ctypes import (", names, "", "")
    text = "\n".join(head + body) + "\n"
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > 100:
            raise SystemExit(f"abi/generators/python.py: {PATH}:{n} is longer than 100 columns")
    return text


def generate(api: Dict[str, Any]) -> Dict[str, str]:
    return {PATH: render(api)}
