"""abi/gen target: rust, the raw layer of the Rust binding and the `qd` crate's status table.

Writes, from abi/qd-api.json alone (never from qd.h):

    bindings/rust/qd-sys/src/functions.rs   every stable function, in header order, grouped by
                                            the section of qd.h it is declared in
    bindings/rust/qd-sys/src/types.rs       typedefs, handles, enum types, function pointer
                                            types, #[repr(C)] structs and their INIT constants
    bindings/rust/qd-sys/src/constants.rs   version and other constants, statuses, enum values,
                                            QD_STATUS_LIST and QD_STRUCT_FIRST_SIZES
    bindings/rust/qd-sys/tests/layout.rs    the test of the above: sizes, alignments, offsets
                                            and field sizes against the description, every
                                            function's exact type, the INIT constants against
                                            the C macros (through cc), the status names
                                            against the loaded library
    bindings/rust/qd/src/status_gen.rs      the `statuses! { ... }` table of the `qd` crate's
                                            Error (error.rs keeps the macro and the rest)

How C maps to Rust:

- `<stdint.h>` types and C scalars to the Rust primitive of the same size (`char` is
  `c_char`); `T *` to `*mut T`, `const T *` to `*const T` (the constness of each level is that
  of what it points to: `void *const *` is `*const *mut c_void`); `void *` to `c_void`.
- Handles and typedefs (`qd_status`) are type aliases of their integer type. An enum declared
  with a typedef (`typedef enum {...} qd_backend;`) is a type alias too, `u32` when no value
  is negative, else `i32`, and its values are constants of that alias; a tag-only enum
  (`enum qd_stream_flags`, bit flags for `uint32_t` fields) gives constants of its integer
  type. The enum whose values are the statuses gives no second copy of them: the statuses are
  constants of `qd_status`. Values marked internal (`QD_BACKEND_FORCE_32_`) are left out.
- Integer constants (`#define QD_MAX_ARGS 64u`, the version) are `u32` (they are counts, sizes
  and the version number that `qd_version()` returns as `uint32_t`); a negative one is `i32`.
- A function pointer type is `Option<unsafe extern "C" fn(..)>`, so that NULL is `None`.
- Parameters named with a Rust keyword (`fn`, `type`) get a trailing underscore.
- Structs derive Debug, Clone and Copy, and PartialEq and Eq unless a field is a C string
  (`const char *`: equal pointers say nothing of equal text), a function pointer (its address
  is not unique) or a float.
- Items marked experimental (behind `QD_EXPERIMENTAL`) are left out: qd-sys is the stable ABI.

INIT constants, from the description (each struct's INIT macro and its `init_values`, which
abi/describe parses from the macro and checks with the compiler): `struct_size` is `size_of`
the struct; a field whose type is a struct with an INIT macro is that INIT; a field in
`init_values` has the value given there (every element of an array); every other field is zero
(0, a null pointer, None). The generated test checks them against the C macros with cc. A
struct-typed field whose struct has no INIT macro stops abi/gen with a message.

Everything here uses what common.py offers (GENERATED_MARK, first_line, camel,
stable_functions) and nothing it lacks.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any, Dict, List, Tuple

from . import common

SYS = "bindings/rust/qd-sys"
QD = "bindings/rust/qd"

#: The width rustfmt gives lines; generated lines and doc paragraphs stay within it.
WIDTH = 100

#: The start of tests/layout.rs, after its doc: imports and the field helpers.
LAYOUT_PRELUDE = """\
use qd_sys::*;
use std::mem::{align_of, offset_of, size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;

/// The size of the field a raw pointer points to (no value needed).
fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// A pointer to field $f of a struct of type $s (no value needed, nothing read).
macro_rules! field {
    ($s:ty, $f:ident) => {{
        let u = MaybeUninit::<$s>::uninit();
        // SAFETY: addr_of! on a field of an uninitialised value reads nothing.
        unsafe { std::ptr::addr_of!((*u.as_ptr()).$f) }
    }};
}
"""

#: The helper rust_init_values() uses.
LAYOUT_PUT = """\
fn put(out: &mut Vec<(String, String)>, path: &str, value: impl std::fmt::Display) {
    out.push((path.to_string(), value.to_string()));
}
"""

#: The end of tests/layout.rs: the INIT program run through cc, the tests that use it and the
#: status names of the loaded library.
LAYOUT_TAIL = r"""
/// What the C compiler makes of the INIT macros; None when there is no cc.
fn c_init_values() -> Option<Vec<(String, String)>> {
    let include = match std::env::var_os("QD_INCLUDE_DIR") {
        Some(d) => PathBuf::from(d),
        // bindings/rust/qd-sys -> the repository root
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).ancestors().nth(3)?.join("include"),
    };
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("qd-sys-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("init.c"), dir.join("init"));
    std::fs::write(&src, INIT_PROGRAM).unwrap();
    let built = Command::new(&cc)
        .arg("-std=c11")
        .arg("-I")
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(built.status.success(), "cc: {}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(&exe).output().unwrap();
    assert!(ran.status.success(), "the INIT program failed");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(ran.stdout).unwrap();
    let lines = text.lines().map(|l| l.split_once(' ').unwrap());
    Some(lines.map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

#[test]
fn every_init_constant_is_its_c_macro() {
    let Some(c) = c_init_values() else {
        println!("SKIP: no C compiler (cc): the INIT constants are not compared with C");
        return;
    };
    let rust = rust_init_values();
    for (r, c) in rust.iter().zip(&c) {
        assert_eq!(r, c, "qd-sys's INIT constant (left) against the C macro (right)");
    }
    assert_eq!(rust.len(), c.len(), "scalars of the INIT constants against C");
}

#[test]
fn the_loaded_library_names_every_status_as_the_description_does() {
    for (name, value, _) in QD_STATUS_LIST {
        // SAFETY: qd_status_name returns a static NUL-terminated string.
        let got = unsafe { std::ffi::CStr::from_ptr(qd_status_name(*value)) };
        assert_eq!(got.to_str().unwrap(), *name);
    }
    // SAFETY: no arguments.
    let v = unsafe { qd_version() };
    assert_eq!(v >> 8, QD_VERSION >> 8, "libqd {v:#x} against qd-sys {QD_VERSION:#x}");
}"""


RUST_KEYWORDS = {
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
    "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
    "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do",
    "final", "macro", "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
}

PRIMITIVES = {
    "int8_t": "i8", "int16_t": "i16", "int32_t": "i32", "int64_t": "i64",
    "uint8_t": "u8", "uint16_t": "u16", "uint32_t": "u32", "uint64_t": "u64",
    "signed char": "i8", "unsigned char": "u8", "short": "i16", "unsigned short": "u16",
    "int": "i32", "unsigned int": "u32", "unsigned": "u32", "long": "i64",
    "unsigned long": "u64", "long long": "i64", "unsigned long long": "u64",
    "size_t": "usize", "uintptr_t": "usize", "intptr_t": "isize", "ptrdiff_t": "isize",
    "float": "f32", "double": "f64", "char": "c_char", "void": "c_void",
}


class GenError(SystemExit):
    def __init__(self, msg: str) -> None:
        super().__init__(f"abi/gen (rust): {msg}")


# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------

class Types:
    """C type text of the description -> Rust type text."""

    def __init__(self, api: Dict[str, Any]) -> None:
        self.kinds = common.kinds(api)
        self.enums = {e["name"]: e for e in api["enums"]}
        self.structs = {s["name"]: s for s in api["structs"]}
        self.aliases = {t["name"]: t["type"] for t in api["handles"] + api["typedefs"]}

    def enum_int(self, enum: Dict[str, Any]) -> str:
        values = [v["value"] for v in enum["values"] if not v.get("internal")]
        return "i32" if any(v < 0 for v in values) else "u32"

    def named(self, name: str) -> str:
        if name.startswith("enum "):
            enum = self.enums.get(name[5:])
            if enum is None:
                raise GenError(f"unknown enum type {name!r}")
            if enum["c_name"] == name:
                return self.enum_int(enum)
            return enum["name"]
        if name in self.kinds:
            return name
        if name in PRIMITIVES:
            return PRIMITIVES[name]
        raise GenError(f"no Rust type for the C type {name!r}")

    def rust(self, ctype: str) -> str:
        """'const qd_arg *' -> '*const qd_arg'; 'void *const *' -> '*const *mut c_void'."""
        toks = re.findall(r"\*|[A-Za-z_]\w*", ctype)
        base: List[str] = []
        base_const = False
        i = 0
        while i < len(toks) and toks[i] != "*":
            if toks[i] == "const":
                base_const = True
            elif toks[i] not in ("volatile", "struct"):
                base.append(toks[i])
            i += 1
        if not base:
            raise GenError(f"cannot read the C type {ctype!r}")
        out = self.named(" ".join(base))
        const = base_const
        while i < len(toks):
            if toks[i] != "*":
                raise GenError(f"cannot read the C type {ctype!r}")
            out = ("*const " if const else "*mut ") + out
            const = False
            i += 1
            while i < len(toks) and toks[i] in ("const", "volatile", "restrict"):
                const = const or toks[i] == "const"
                i += 1
        if out == "c_void":
            raise GenError(f"void is no value type ({ctype!r})")
        return out

    def scalar(self, ctype: str) -> str:
        """The Rust primitive behind a C type (an alias resolved: qd_status -> i32)."""
        name = ctype.replace("enum ", "").strip()
        if name in self.aliases:
            return self.rust(self.aliases[name])
        if name in self.enums:
            return self.enum_int(self.enums[name])
        return self.rust(ctype)

    def field(self, f: Dict[str, Any]) -> str:
        t = self.rust(f["type"])
        return f"[{t}; {f['array_length']}]" if f.get("array_length") else t

    def ret(self, ctype: str) -> str:
        return "" if ctype.strip() == "void" else f" -> {self.rust(ctype)}"


def param_name(name: str) -> str:
    return name + "_" if name in RUST_KEYWORDS else name


def params(types: Types, ps: List[Dict[str, Any]], names: bool = True) -> List[str]:
    if names:
        return [f"{param_name(p['name'])}: {types.rust(p['type'])}" for p in ps]
    return [types.rust(p["type"]) for p in ps]


def fn_pointer(types: Types, fp: Dict[str, Any], names: bool = True) -> str:
    return (f"unsafe extern \"C\" fn({', '.join(params(types, fp['params'], names))})"
            f"{types.ret(fp['return'])}")


# ---------------------------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------------------------

def doc(text: str, indent: str = "", mark: str = "///") -> List[str]:
    """A doc comment, wrapped to WIDTH (words are never split)."""
    width = WIDTH - len(indent) - len(mark) - 1
    return [f"{indent}{mark} {line}" for line in
            textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)]


def sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


def uses(body: str, names: List[str]) -> List[str]:
    """The names of `names` that the Rust code `body` uses (comments and strings aside)."""
    code = re.sub(r'"(?:[^"\\]|\\.)*"|//[^\n]*', "", body)
    return [n for n in names if re.search(rf"(?<![\w:]){re.escape(n)}\b", code)]


def use_line(path: str, items: List[str]) -> List[str]:
    """`use path::{a, b};` as rustfmt writes it (one item without braces, long lists wrapped)."""
    if not items:
        return []
    if len(items) == 1:
        return [f"use {path}::{items[0]};"]
    one = f"use {path}::{{{', '.join(items)}}};"
    if len(one) <= WIDTH:
        return [one]
    return [f"use {path}::{{"] + textwrap.wrap(
        ", ".join(items) + ",", WIDTH - 4, initial_indent="    ", subsequent_indent="    ",
        break_long_words=False) + ["};"]


def call_like(head: str, items: List[str], tail: str, indent: str) -> List[str]:
    """`head(a, b)tail` on one line when it fits, else one item a line (rustfmt's layout)."""
    one = f"{indent}{head}({', '.join(items)}){tail}"
    if len(one) <= WIDTH or not items:
        return [one]
    return ([f"{indent}{head}("] + [f"{indent}    {it}," for it in items]
            + [f"{indent}){tail}"])


def header(title: str, comment: str = "//!") -> List[str]:
    return [common.first_line("//")] + doc(title, mark=comment)


def stable(items: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [i for i in items if not i.get("experimental")]


def status_names(api: Dict[str, Any]) -> set:
    return {s["name"] for s in api["statuses"]}


def is_status_enum(api: Dict[str, Any], enum: Dict[str, Any]) -> bool:
    names = [v["name"] for v in enum["values"] if not v.get("internal")]
    return bool(names) and set(names) <= status_names(api)


# ---------------------------------------------------------------------------------------------
# qd-sys/src/functions.rs
# ---------------------------------------------------------------------------------------------

def functions_rs(api: Dict[str, Any], types: Types) -> str:
    body: List[str] = []
    group = None
    for fn in common.stable_functions(api):
        if fn["group"] != group:
            if group is not None:
                body.append("")
            group = fn["group"]
            body.append(f"    // {group}.")
        text = f"`{fn['name']}`, since {fn['since']} (`{fn['version_node']}`)"
        if "statuses" in fn:
            text += ": returns " + ", ".join(f"`{s}`" for s in fn["statuses"])
        body += doc(sentence(text), "    ")
        body += call_like(f"pub fn {fn['name']}", params(types, fn["params"]),
                          f"{types.ret(fn['return'])};", "    ")
    text = "\n".join(body)
    out = header("Every function of qd.h, in header order and grouped by its section. Read the "
                 "statuses' triggers and the threading rules in the header.")
    out.append("")
    out += use_line("crate::types", sorted(uses(text, list(types.kinds))))
    out += use_line("core::ffi", uses(text, ["c_char", "c_void"]))
    out += ["", 'extern "C" {', text, "}"]
    return common.lines(out)


# ---------------------------------------------------------------------------------------------
# qd-sys/src/types.rs
# ---------------------------------------------------------------------------------------------

def derives(types: Types, s: Dict[str, Any]) -> str:
    names = ["Debug", "Clone", "Copy"]
    plain = all("char *" not in f["type"] and types.rust(f["type"]) not in ("f32", "f64")
                and types.kinds.get(f["type"]) != "function_pointer" for f in s["fields"])
    if plain:
        names += ["PartialEq", "Eq"]
    return f"#[derive({', '.join(names)})]"


def zero(types: Types, ctype: str) -> str:
    """The zero of a scalar C type, as a Rust expression."""
    t = types.rust(ctype)
    if t.startswith("*const"):
        return "ptr::null()"
    if t.startswith("*mut"):
        return "ptr::null_mut()"
    if types.kinds.get(ctype) == "function_pointer":
        return "None"
    if t in ("f32", "f64"):
        return "0.0"
    return "0"


def init_value(types: Types, s: Dict[str, Any], f: Dict[str, Any]) -> str:
    name, ctype = f["name"], f["type"]
    if name == "struct_size" and s.get("has_struct_size"):
        return f"size_of::<{s['name']}>() as {types.rust(ctype)}"
    if types.kinds.get(ctype) == "struct":
        inner = types.structs[ctype]
        if not inner.get("init_macro"):
            raise GenError(f"{s['init_macro']}: field {name} is a {ctype}, which has no INIT "
                           "macro (extend the INIT rule in abi/generators/rust.py)")
        value = inner["init_macro"]
    elif name in s.get("init_values", {}):
        value = str(s["init_values"][name])
    else:
        value = zero(types, ctype)
    return f"[{value}; {f['array_length']}]" if f.get("array_length") else value


def struct_literal(name: str, fields: List[Tuple[str, str]], head: str) -> List[str]:
    """`head name { a: x, b: y };` on one line when it fits, else one field a line."""
    inner = ", ".join(f"{k}: {v}" for k, v in fields)
    one = f"{head}{name} {{ {inner} }};"
    if len(one) <= WIDTH:
        return [one]
    return [f"{head}{name} {{"] + [f"    {k}: {v}," for k, v in fields] + ["};"]


def types_rs(api: Dict[str, Any], types: Types) -> str:
    out: List[str] = []
    for t in stable(api["typedefs"]):
        out += doc(f"`{t['name']}` (since {t['since']}): `{t['type']}`.")
        out.append(f"pub type {t['name']} = {types.rust(t['type'])};")
    for h in stable(api["handles"]):
        out += doc(f"`{h['name']}`: a handle (since {h['since']}); 0 is never a valid one.")
        out.append(f"pub type {h['name']} = {types.rust(h['type'])};")
    for e in stable(api["enums"]):
        if e["c_name"].startswith("enum "):
            continue
        out += doc(f"`{e['name']}` (since {e['since']}): a C enum of {e['size'] * 8} bits; its "
                   "values are the constants of this type.")
        out.append(f"pub type {e['name']} = {types.enum_int(e)};")
    for fp in stable(api["function_pointers"]):
        out += doc(f"`{fp['name']}` (since {fp['since']}): a C function pointer; `None` is "
                   "NULL.")
        inner = fn_pointer(types, fp)
        one = f"pub type {fp['name']} = Option<{inner}>;"
        if len(one) <= WIDTH:
            out.append(one)
        else:
            out.append(f"pub type {fp['name']} =")
            out += call_like("    Option<unsafe extern \"C\" fn",
                             params(types, fp["params"]),
                             f"{types.ret(fp['return'])}>;", "")
    for s in stable(api["structs"]):
        out.append("")
        text = f"`{s['name']}` (since {s['since']}): {s['size']} bytes, aligned to {s['align']}"
        if s.get("first_size") is not None:
            text += f"; first released with {s['first_size']} bytes in {s['first_version']}"
        out += doc(sentence(text))
        out += ["#[repr(C)]", derives(types, s), f"pub struct {s['name']} {{"]
        out += [f"    pub {f['name']}: {types.field(f)}," for f in s["fields"]]
        out.append("}")
        if s.get("init_macro"):
            out += doc(f"`{s['init_macro']}`: the value to start a `{s['name']}` from.")
            fields = [(f["name"], init_value(types, s, f)) for f in s["fields"]]
            out += struct_literal(s["name"], fields,
                                  f"pub const {s['init_macro']}: {s['name']} = ")
    text = "\n".join(out)
    top = header("Typedefs, handles, enum types, function pointer types and structs of qd.h, "
                 "with the structs' INIT macros as constants.")
    top.append("")
    top += use_line("core::ffi", uses(text, ["c_char", "c_void"]))
    top += use_line("core::mem", uses(text, ["size_of"]))
    top += use_line("core", uses(text, ["ptr"]))
    top.append("")
    return common.lines(top + [text.lstrip("\n")])


# ---------------------------------------------------------------------------------------------
# qd-sys/src/constants.rs
# ---------------------------------------------------------------------------------------------

def rust_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def table(name: str, row: str, rows: List[str], what: str) -> List[str]:
    out = doc(what)
    out.append(f"pub const {name}: &[{row}] = &[")
    out += [f"    {r}," for r in rows]
    out.append("];")
    return out


def constants_rs(api: Dict[str, Any], types: Types) -> str:
    out: List[str] = []
    v = api["version"]
    for c in stable(api["constants"]):
        rtype = "i32" if c["value"] < 0 else "u32"
        text = f"`{c['name']}` (a C `{c['type']}`)"
        if c["name"] == "QD_VERSION":
            text += f": `(major << 16) | (minor << 8) | patch`, {v['major']}.{v['minor']}." \
                    f"{v['patch']}"
        out += doc(sentence(text))
        out.append(f"pub const {c['name']}: {rtype} = {c['value']};")
    out += ["", "// Statuses (QD_STATUS_LIST)."]
    for s in api["statuses"]:
        out += doc(sentence(f"`{s['name']}`: {s['description']}"))
        out.append(f"pub const {s['name']}: qd_status = {s['value']};")
    for e in stable(api["enums"]):
        if is_status_enum(api, e):
            continue
        c_name = e["c_name"]
        etype = types.enum_int(e) if c_name.startswith("enum ") else e["name"]
        out += ["", f"// {c_name if c_name.startswith('enum ') else 'enum ' + c_name} "
                f"(since {e['since']})."]
        for val in e["values"]:
            if val.get("internal"):
                continue
            out += doc(f"`{val['name']}`: a value of `{c_name}`.")
            out.append(f"pub const {val['name']}: {etype} = {val['value']};")
    out.append("")
    out += table("QD_STATUS_LIST", "(&str, qd_status, &str)",
                 [f"({rust_str(s['name'])}, {s['value']}, {rust_str(s['description'])})"
                  for s in api["statuses"]],
                 "Every status of `QD_STATUS_LIST`: (name, value, description), in header "
                 "order.")
    out.append("")
    out += table("QD_STRUCT_FIRST_SIZES", "(&str, u32, &str)",
                 [f"({rust_str(s['name'])}, {s['first_size']}, {rust_str(s['first_version'])})"
                  for s in stable(api["structs"]) if s.get("first_size") is not None],
                 "`QD_STRUCT_FIRST_SIZES`: (struct, first released size in bytes, release), "
                 "in header order.")
    text = "\n".join(out)
    top = header("Constants, statuses and enum values of qd.h, and its tables of statuses and "
                 "first struct sizes.")
    top.append("")
    top += use_line("crate::types", sorted(uses(text, list(types.kinds))))
    top.append("")
    return common.lines(top + [text])


# ---------------------------------------------------------------------------------------------
# qd-sys/tests/layout.rs
# ---------------------------------------------------------------------------------------------

def c_print(path: str, idx: List[str], cexpr: str, rexpr: str, types: Types,
            ctype: str) -> Tuple[str, str]:
    """(C statement, Rust statement) that list one scalar of an INIT constant as
    `MACRO.field[i] value`: cexpr reads it in C, rexpr in Rust; idx are the loop indices of the
    `[%d]` in path."""
    t = types.scalar(ctype)
    if t.startswith("*"):
        fmt, cval, rval = "%llu", f"(unsigned long long)(uintptr_t){cexpr}", \
            f"{rexpr} as usize"
    elif types.kinds.get(ctype) == "function_pointer":
        fmt, cval, rval = "%d", f"{cexpr} != NULL", f"u8::from({rexpr}.is_some())"
    elif t in ("f32", "f64"):
        bits = "uint32_t" if t == "f32" else "uint64_t"
        fmt, cval, rval = "%llu", f"(unsigned long long)*({bits} *)&{cexpr}", \
            f"{rexpr}.to_bits()"
    elif t.startswith("i") or t == "c_char":
        fmt, cval, rval = "%lld", f"(long long){cexpr}", rexpr
    else:
        fmt, cval, rval = "%llu", f"(unsigned long long){cexpr}", rexpr
    cargs = ", ".join(idx + [cval])
    rpath = path
    for i in idx:
        rpath = rpath.replace("[%d]", f"[{{{i}}}]", 1)
    rkey = f"&format!(\"{rpath}\")" if idx else f"\"{rpath}\""
    return (f'printf("{path} {fmt}\\n", {cargs});', f"put(&mut out, {rkey}, {rval});")


def init_checks(types: Types, s: Dict[str, Any], path: str, cexpr: str, rexpr: str,
                idx: List[str], c: List[str], r: List[str]) -> None:
    """The C and Rust statements listing every scalar of an INIT constant (c_print)."""
    for f in s["fields"]:
        fpath, fc, fr = f"{path}.{f['name']}", f"{cexpr}.{f['name']}", f"{rexpr}.{f['name']}"
        inner_c: List[str] = []
        inner_r: List[str] = []
        sub = idx
        if f.get("array_length"):
            i = f"i{len(idx)}"
            sub = idx + [i]
            fpath, fc, fr = f"{fpath}[%d]", f"{fc}[{i}]", f"e{len(idx)}"
        if types.kinds.get(f["type"]) == "struct":
            init_checks(types, types.structs[f["type"]], fpath, fc, fr, sub, inner_c, inner_r)
        else:
            cs, rs = c_print(fpath, sub, fc, fr, types, f["type"])
            inner_c.append(cs)
            inner_r.append(rs)
        if f.get("array_length"):
            i = sub[-1]
            c.append(f"for (int {i} = 0; {i} < {f['array_length']}; {i}++) {{")
            c += ["    " + x for x in inner_c] + ["}"]
            r.append(f"for ({i}, &{fr}) in {rexpr}.{f['name']}.iter().enumerate() {{")
            r += ["    " + x for x in inner_r] + ["}"]
        else:
            c += inner_c
            r += inner_r


def layout_rs(api: Dict[str, Any], types: Types) -> str:
    out = header("The test of qd-sys against abi/qd-api.json: every struct's size, alignment, "
                 "field offsets and field sizes, every function's exact type, every INIT "
                 "constant against its C macro (compiled with cc; a SKIP line without one), "
                 "and the status names against the loaded library. The description itself "
                 "is checked against qd.h with the C compiler by abi/describe.")
    out += ["", LAYOUT_PRELUDE]

    # Layouts.
    out += ["#[test]", "fn every_struct_has_the_layout_of_the_description() {",
            "    // The `let _: *const T` lines compile only if the field has exactly type T."]
    for s in stable(api["structs"]):
        n = s["name"]
        out.append(f"    assert_eq!(size_of::<{n}>(), {s['size']}, \"size of {n}\");")
        out.append(f"    assert_eq!(align_of::<{n}>(), {s['align']}, \"align of {n}\");")
        for f in s["fields"]:
            out += call_like("assert_eq!", [f"offset_of!({n}, {f['name']})", str(f["offset"]),
                                            f"\"offset of {n}.{f['name']}\""], ";", "    ")
            out += call_like("assert_eq!", [f"size_of_pointee(field!({n}, {f['name']}))",
                                            str(f["size"]), f"\"size of {n}.{f['name']}\""],
                             ";", "    ")
            out.append(f"    let _: *const {types.field(f)} = field!({n}, {f['name']});")
    out += ["}", ""]

    # Function types.
    out += ["#[test]", "fn every_function_has_the_type_of_the_description() {",
            "    // Each line compiles only if the declaration has exactly this C type."]
    for fn in common.stable_functions(api):
        ty = fn_pointer(types, fn, names=False)
        one = f"    let _: {ty} = {fn['name']};"
        if len(one) <= WIDTH:
            out.append(one)
        else:
            head = f"    let _: {ty}"
            if len(head + " =") <= WIDTH:
                out += [head + " =", f"        {fn['name']};"]
            else:
                out += call_like("let _: unsafe extern \"C\" fn",
                                 params(types, fn["params"], names=False),
                                 f"{types.ret(fn['return'])} = {fn['name']};", "    ")
    out += ["}", ""]

    # INIT constants against C.
    c_lines = ["#include <qd/qd.h>", "#include <stdint.h>", "#include <stdio.h>",
               "int main(void) {"]
    r_lines: List[str] = []
    for s in stable(api["structs"]):
        if not s.get("init_macro"):
            continue
        m = s["init_macro"]
        body_c: List[str] = []
        body_r: List[str] = []
        init_checks(types, s, m, "v", m, [], body_c, body_r)
        c_lines += ["    {", f"        {s['name']} v = {m};"]
        c_lines += ["        " + x for x in body_c] + ["    }"]
        r_lines += ["    " + x for x in body_r]
    c_lines += ["    return 0;", "}"]
    out += ["/// A C program printing every scalar of every INIT macro as `MACRO.field value`.",
            "const INIT_PROGRAM: &str = r#\""]
    out += c_lines
    out += ["\"#;", "",
            LAYOUT_PUT, "/// The same scalars of the INIT constants of qd-sys.",
            "fn rust_init_values() -> Vec<(String, String)> {",
            "    let mut out = Vec::new();"]
    out += r_lines
    out += ["    out", "}", LAYOUT_TAIL]
    return common.lines(out)


# ---------------------------------------------------------------------------------------------
# qd/src/status_gen.rs
# ---------------------------------------------------------------------------------------------

def status_gen_rs(api: Dict[str, Any]) -> str:
    out = [common.first_line("//"),
           "// The `qd` crate's Error variants, one per status but QD_SUCCESS (included by",
           "// error.rs, whose `statuses!` macro makes Error and its methods from this table).",
           "", "statuses! {"]
    for s in api["statuses"]:
        if s["value"] == 0:
            continue
        variant = common.camel(s["name"], "QD_ERROR_")
        text = rust_str(f"`{s['name']}`: {sentence(s['description'])}")
        out.append(f"    {variant} = {s['name']}, {text};")
    out.append("}")
    return common.lines(out)


def generate(api: Dict[str, Any]) -> Dict[str, str]:
    types = Types(api)
    return {
        f"{SYS}/src/functions.rs": functions_rs(api, types),
        f"{SYS}/src/types.rs": types_rs(api, types),
        f"{SYS}/src/constants.rs": constants_rs(api, types),
        f"{SYS}/tests/layout.rs": layout_rs(api, types),
        f"{QD}/src/status_gen.rs": status_gen_rs(api),
    }
