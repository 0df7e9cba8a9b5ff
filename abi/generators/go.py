"""abi/gen target: go. The Go binding's low layer, from the API description.

- bindings/go/qdgo_gen.h: one static inline C wrapper per qd function that returns qd_status,
  gq_<name without qd_>. It makes the qd call and finishes it with gq_finish* (qdgo.h), which
  copies qd_last_error_message() on failure inside the same C call. Every parameter is passed
  through as declared, except a single trailing `out` parameter (its role in the description) of
  a scalar or handle type, which becomes the returned value: gq_u64 for handles and integers
  (unsigned ones as they are, signed ones and enums as their bits zero-extended from their
  width), floats as their bits; gq_ptr for a `void **`. Anything else returns gq_result.
  Experimental functions sit behind #ifdef QD_EXPERIMENTAL, as they do in qd.h.
- bindings/go/status_gen.go: package qd's Status constants, sentinel errors and status table,
  in gofmt's layout (no gofmt is needed to write it; bindings/go/test's go vet builds it).

The hand-written bindings/go/qdgo.h holds the types, gq_finish*, the trampolines and the
wrappers that do more than one qd call; it includes qdgo_gen.h after gq_finish*.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from . import common

GEN_H = "bindings/go/qdgo_gen.h"
STATUS_GO = "bindings/go/status_gen.go"

COLUMNS = 100  # .clang-format's ColumnLimit
INDENT = "    "

# Integer types by size in bytes (LP64, the description's "abi"); unsigned ones fit a uint64_t
# as they are, signed ones are returned as their bits zero-extended from their width.
UNSIGNED = {"uint8_t": 1, "uint16_t": 2, "uint32_t": 4, "uint64_t": 8, "unsigned char": 1,
            "unsigned short": 2, "unsigned int": 4, "unsigned": 4, "unsigned long": 8,
            "unsigned long long": 8, "size_t": 8, "uintptr_t": 8}
SIGNED = {"int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8, "signed char": 1, "short": 2,
          "int": 4, "long": 8, "long long": 8, "intptr_t": 8, "ptrdiff_t": 8}
FLOATS = {"float": 4, "double": 8}
BITS = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}


def generate(api: Dict[str, Any]) -> Dict[str, str]:
    return {GEN_H: wrappers_header(api), STATUS_GO: status_go(api)}


# ---- qdgo_gen.h ---------------------------------------------------------------------------------

def c_decl(ctype: str, name: str) -> str:
    """A parameter or variable declaration in the project's style: `const qd_arg *args`."""
    return ctype + name if ctype.endswith("*") else f"{ctype} {name}"


def resolve(api: Dict[str, Any], ctype: str) -> str:
    """A typedef's C type (qd_status -> int32_t); any other name as it is."""
    for t in api["typedefs"]:
        if t["name"] == ctype:
            return resolve(api, t["type"])
    return ctype


def returned_out(api: Dict[str, Any], fn: Dict[str, Any]) -> Optional[Tuple[str, Dict]]:
    """("u64" | "ptr", the parameter) when fn's only `out` is its last parameter and of a type
    returned by value; None when every parameter is passed through."""
    params = fn["params"]
    outs = [p for p in params if p.get("role") == "out"]
    if len(outs) != 1 or params[-1] is not outs[0]:
        return None
    p = outs[0]
    of = p["of"]
    if of == "void *":
        return "ptr", p
    kind = common.kinds(api).get(of)
    base = resolve(api, of)
    if kind == "handle" or kind == "enum" or base in UNSIGNED or base in SIGNED or base in FLOATS:
        return "u64", p
    return None


def as_u64(api: Dict[str, Any], of: str, name: str, bits: str) -> Tuple[List[str], str]:
    """(statements, expression): the uint64_t that carries the value of variable `name` of C
    type `of` (bits: a free name for a float's bits)."""
    kind = common.kinds(api).get(of)
    base = resolve(api, of)
    if kind == "handle" or base in UNSIGNED:
        return [], name
    if base in FLOATS:
        return [f"memcpy(&{bits}, &{name}, sizeof {bits});"], bits
    size = SIGNED.get(base)
    if size is None:  # an enum: its size from the description
        size = next(e["size"] for e in api["enums"] if e["name"] == of)
    if size == 8:
        return [], f"(uint64_t){name}"
    return [], f"(uint64_t)({BITS[size]}){name}"


def fresh(base: str, taken: List[str]) -> str:
    """base, or base with underscores appended, not among taken."""
    while base in taken:
        base += "_"
    return base


def wrap_call(prefix: str, args: List[str], suffix: str, indent: str) -> List[str]:
    """prefix + args joined by ", " + suffix, broken as clang-format breaks it: on one line when it
    fits, else bin-packed after the opening parenthesis, aligned with it."""
    one = indent + prefix + ", ".join(args) + suffix
    if len(one) <= COLUMNS:
        return [one]
    out: List[str] = []
    line = indent + prefix
    align = " " * len(line)
    for i, a in enumerate(args):
        piece = a + (suffix if i == len(args) - 1 else ",")
        start = line == indent + prefix or line == align
        if not start and len(line) + 1 + len(piece) > COLUMNS:
            out.append(line)
            line = align + piece
        else:
            line += piece if start else " " + piece
    out.append(line)
    return out


def comment(text: str, indent: str = "") -> List[str]:
    """A /* */ comment of text, filled to the column limit."""
    words = text.split()
    out: List[str] = []
    line = indent + "/*"
    for i, w in enumerate(words):
        if len(line) + 1 + len(w) > COLUMNS - (3 if i == len(words) - 1 else 0):
            out.append(line)
            line = indent + " *"
        line += " " + w
    out.append(line + " */")
    return out


def wrapper(api: Dict[str, Any], fn: Dict[str, Any]) -> List[str]:
    name = fn["name"]
    gq = "gq_" + name[3:] if name.startswith("qd_") else "gq_" + name
    params = fn["params"]
    taken = [p["name"] for p in params]
    statuses = ", ".join(common.status_short(s) for s in fn.get("statuses", []))
    text = [f"{name} (since {fn['since']}): {statuses}."] if statuses else []
    out = comment(" ".join(text)) if text else []
    returned = returned_out(api, fn)
    if returned is None:
        sig = [c_decl(p["type"], p["name"]) for p in params] or ["void"]
        head = wrap_call(f"static inline gq_result {gq}(", sig, ") {", "")
        body = wrap_call(f"return gq_finish({name}(", [p["name"] for p in params], "));", INDENT)
        if len(head) == 1 and len(body) == 1:
            merged = f"{head[0]} {body[0].strip()} }}"
            if len(merged) <= COLUMNS:
                return out + [merged]  # as clang-format merges a short function
        return out + head + body + ["}"]
    kind, ret = returned
    passed = params[:-1]
    sig = [c_decl(p["type"], p["name"]) for p in passed] or ["void"]
    st = fresh("st", taken)
    var = ret["name"]
    body: List[str] = []
    if kind == "ptr":
        out += wrap_call(f"static inline gq_ptr {gq}(", sig, ") {", "")
        body.append(f"void *{var} = NULL;")
        finish = f"return gq_finish_ptr({st}, {var});"
        after: List[str] = []
    else:
        out += wrap_call(f"static inline gq_u64 {gq}(", sig, ") {", "")
        body.append(f"{c_decl(ret['of'], var)} = 0;")
        bits = fresh(var + "_bits", taken + [st])
        base = resolve(api, ret["of"])
        if base in FLOATS:
            body.append(f"{BITS[FLOATS[base]]} {bits} = 0;")
        after, value = as_u64(api, ret["of"], var, bits)
        finish = f"return gq_finish_u64({st}, {value});"
    out += [INDENT + b for b in body]
    out += wrap_call(f"qd_status {st} = {name}(", [p["name"] for p in passed] + ["&" + var],
                     ");", INDENT)
    out += [INDENT + a for a in after]
    out.append(INDENT + finish)
    out.append("}")
    return out


def wrappers_header(api: Dict[str, Any]) -> str:
    lines = [
        common.first_line("/*"),
        *comment("qdgo_gen.h: the Go binding's wrappers of every qd function that returns "
                 "qd_status, one each, written by abi/generators/go.py from the parameter roles "
                 "of abi/qd-api.json. qdgo.h includes it after the result types and gq_finish*; "
                 "the wrappers that do more than one qd call are written by hand there."),
        *comment("gq_<name> makes the qd call and, on failure, copies the thread-local message "
                 "inside the same C call (gq_finish). Its parameters are the function's, but for "
                 "a single trailing output of a handle, integer or float, returned in a gq_u64 "
                 "(signed integers and enums as their bits zero-extended from their width, "
                 "floats as their bits), and a trailing void ** output, returned in a gq_ptr. "
                 "Each comment lists the statuses qd.h gives the function (QD_ prefixes "
                 "dropped)."),
        "#ifndef QD_GO_QDGO_GEN_H",
        "#define QD_GO_QDGO_GEN_H",
        "",
        "#ifndef QD_GO_QDGO_H",
        '#error "qdgo_gen.h is included by qdgo.h, after the types it uses"',
        "#endif",
    ]
    group = None
    experimental = False
    for fn in api["functions"]:
        if fn.get("return") != "qd_status":
            continue
        if fn.get("experimental", False) != experimental:
            lines += ["", "#endif /* QD_EXPERIMENTAL */"] if experimental else \
                ["", "#ifdef QD_EXPERIMENTAL"]
            experimental = not experimental
        if fn.get("group") != group:
            group = fn.get("group")
            lines += ["", f"/* ---- {group} */"]
        lines.append("")
        lines += wrapper(api, fn)
    if experimental:
        lines += ["", "#endif /* QD_EXPERIMENTAL */"]
    lines += ["", "#endif /* QD_GO_QDGO_GEN_H */"]
    return common.lines(lines)


# ---- status_gen.go ------------------------------------------------------------------------------

def go_name(c_name: str) -> str:
    """QD_ERROR_INVALID_HANDLE -> InvalidHandle, QD_NOT_READY -> NotReady."""
    return common.camel(common.status_short(c_name))


def go_quote(s: str) -> str:
    """A Go interpreted string literal of s, as strconv.Quote writes it."""
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def aligned_pairs(pairs: List[Tuple[str, str]]) -> List[str]:
    """The `key: value,` lines of a composite literal with gofmt's alignment: the values of
    consecutive lines line up, except where gofmt's key size heuristic starts a new section
    (go/printer exprList: a key over 40 bytes, or after one, whose size is 2.5 times off the
    geometric mean of the keys before it in its section)."""
    sections: List[List[Tuple[str, str]]] = []
    prev_size = 0
    lnsum = 0.0
    count = 0
    for key, value in pairs:
        size = len(key)
        new_section = True
        if prev_size > 0 and size > 0:
            if count == 0 or (prev_size <= 40 and size <= 40):
                new_section = False
            else:
                ratio = size / math.exp(lnsum / count)
                new_section = 2.5 * ratio <= 1 or 2.5 <= ratio
        if new_section or not sections:
            sections.append([])
            lnsum, count = 0.0, 0  # gofmt starts its mean again with each section
        sections[-1].append((key, value))
        prev_size = size
        lnsum += math.log(size)
        count += 1
    out = []
    for section in sections:
        width = max(len(k) for k, _ in section) + 1
        out += [f"\t{(k + ':').ljust(width)} {v}," for k, v in section]
    return out


def status_go(api: Dict[str, Any]) -> str:
    statuses = api["statuses"]
    if not statuses:
        raise SystemExit("abi/gen go: abi/qd-api.json lists no statuses")
    lines = [
        common.go_first_line(),
        "",
        "package qd",
        "",
        "// The statuses of qd.h (QD_STATUS_LIST), by value.",
        "const (",
    ]
    for s in statuses:
        g = go_name(s["name"])
        lines.append(f"\t// Status{g} is {s['name']} ({s['value']}): {s['description']}.")
        lines.append(f"\tStatus{g} Status = {s['value']}")
    lines += [
        ")",
        "",
        "// Sentinel errors, one per status other than success: "
        "errors.Is(err, qd.ErrInvalidHandle)",
        "// holds for every *Error whose Status is StatusInvalidHandle.",
        "var (",
    ]
    for s in statuses:
        if s["value"] == 0:
            continue
        g = go_name(s["name"])
        lines.append(f"\t// Err{g}: {s['description']}.")
        lines.append(f"\tErr{g} = &Error{{Status: Status{g}}}")
    lines += [
        ")",
        "",
        "// statusInfo holds each status's C name, description and sentinel (nil for success).",
        "var statusInfo = map[Status]struct {",
        "\tname, description string",
        "\tsentinel          *Error",
        "}{",
    ]
    pairs = []
    for s in statuses:
        g = go_name(s["name"])
        sentinel = "nil" if s["value"] == 0 else "Err" + g
        pairs.append((f"Status{g}",
                      f"{{{go_quote(s['name'])}, {go_quote(s['description'])}, {sentinel}}}"))
    lines += aligned_pairs(pairs)
    lines.append("}")
    return common.lines(lines)
