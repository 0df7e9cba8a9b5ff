"""abi/gen target fuzz: the fuzzers' tables, tests/fuzz/api_table_gen.h.

What it writes, from the description alone (tests/README.md, "Fuzzing"):

- qd_fuzz::HandleKind: one enumerator per handle type of qd.h (kContext, kStream, ...);
- qd_fuzz::listed(function, status): whether qd.h lists the status for the function (every
  function that returns qd_status; QD_SUCCESS and QD_ERROR_INTERNAL included);
- qd_fuzz::kHandleEntries: one entry per handle position of every stable function: a by-value
  handle parameter, the element of an in_array of handles (qd_stream_join's children[0]), or a
  handle-typed field of an in_struct or of an in_array's element (qd_launch_parallel's
  tasks[0].kernel). Its invoker calls the function with a given uint64 in that position and
  valid values everywhere else;
- qd_fuzz::kNullEntries: one entry per pointer parameter the call needs (a non-optional out,
  out_array, inout_struct, in_struct, in_array, string, bytes, callback or host_pointer): its
  invoker passes NULL there and a given bad value in every by-value handle position, so that
  "Which error wins" (class 1 before class 2) makes it QD_ERROR_INVALID_ARGUMENT.

The valid values come from each parameter's role through the hand-written provider
tests/fuzz/fuzz_values.h (qd_fuzz::Values), one expression per role:

    handle          v.handle(kKind)           a live handle of that kind, all of one context
    value           v.value<T>()              1 (passes every class-1 check of qd.h)
    string          v.string("param")         a kernel name; the trace path for "path"
    bytes / size    v.bytes(), v.bytes_size() a module image and its size
    address         v.address("param")        inside a live allocation ("src": another one)
    host_pointer    v.host_pointer()          a qd_host_alloc block of the context
    user_data       v.user_data()             a pointer the callbacks never read
    callback        &noop_<type>              generated here: returns 0, counts its calls
                                              (qd_fuzz::callback_calls)
    out, out_array  a local slot (an array of one)
    in_array, count an array of one element, count 1
    in_struct, inout_struct
                    make_<struct>(v): the INIT macro (or zero and struct_size), every
                    handle-typed field valid, then v.complete(x) for what INIT leaves invalid
                    (a qd_arg's data and size)

A new function needs nothing but abi/describe and abi/gen; a new role is the only reason to
edit the provider (this module fails on a role it does not know).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import common

PATH = "tests/fuzz/api_table_gen.h"

#: Roles whose NULL is a class-1 QD_ERROR_INVALID_ARGUMENT unless the parameter is optional.
NULL_ROLES = ("out", "out_array", "inout_struct", "in_struct", "in_array", "string", "bytes",
              "callback", "host_pointer")
KNOWN_ROLES = {"handle", "out", "in_array", "out_array", "count", "in_struct", "inout_struct",
               "string", "bytes", "size", "callback", "user_data", "host_pointer", "address",
               "value"}


class Gen:
    def __init__(self, api: Dict[str, Any]):
        self.api = api
        self.kinds = common.kinds(api)
        self.handles = [h["name"] for h in api["handles"]]
        self.structs = {s["name"]: s for s in api["structs"]}
        self.fptrs = {f["name"]: f for f in api["function_pointers"]}
        self.used_structs: List[str] = []

    # -- names --------------------------------------------------------------------------------

    @staticmethod
    def kind(handle_type: str) -> str:
        return "k" + common.camel(handle_type)

    @staticmethod
    def base(ctype: str) -> str:
        """'const qd_task *' -> 'qd_task'; 'void *' -> 'void *' (a pointer to void)."""
        t = ctype.replace("const ", "").strip()
        return t[:-1].strip() if t.endswith("*") and t != "void *" else t

    def handle_fields(self, struct: str, prefix: str = "") -> List[Tuple[str, str]]:
        """(path, handle type) of every handle inside a struct, nested structs included."""
        out: List[Tuple[str, str]] = []
        for f in self.structs[struct]["fields"]:
            kind = self.kinds.get(f["type"])
            path = prefix + f["name"] + ("[0]" if f.get("array_length") else "")
            if kind == "handle":
                out.append((path, f["type"]))
            elif kind == "struct":
                out += self.handle_fields(f["type"], path + ".")
        return out

    def use_struct(self, name: str) -> str:
        if name not in self.used_structs:
            for f in self.structs[name]["fields"]:
                if self.kinds.get(f["type"]) == "struct" and not f.get("array_length"):
                    self.use_struct(f["type"])
            self.used_structs.append(name)
        return f"make_{name}(v)"

    # -- one call -----------------------------------------------------------------------------

    def positions(self, fn: Dict[str, Any]) -> List[Tuple[int, str, str]]:
        """Every handle position of fn: (parameter index, label, handle type)."""
        out = []
        for i, p in enumerate(fn["params"]):
            role = p.get("role")
            if role not in KNOWN_ROLES:
                raise SystemExit(f"abi/gen fuzz: {fn['name']}({p['name']}) has role {role!r}, "
                                 "which generators/fuzz.py and tests/fuzz/fuzz_values.h do not "
                                 "know: teach both")
            if role == "handle":
                out.append((i, p["name"], p["of"]))
            elif role == "in_array" and p.get("handle"):
                out.append((i, p["name"] + "[0]", p["of"]))
            elif role == "in_array" and self.kinds.get(p["of"]) == "struct":
                out += [(i, f"{p['name']}[0].{path}", t)
                        for path, t in self.handle_fields(p["of"])]
            elif role == "in_struct":
                out += [(i, f"{p['name']}.{path}", t) for path, t in self.handle_fields(p["of"])]
        return out

    def call(self, fn: Dict[str, Any], forged: Optional[Tuple[int, str]] = None,
             null: Optional[int] = None) -> List[str]:
        """The body of an invoker: h in the forged position (parameter index, label), or NULL in
        parameter `null` with h in every by-value handle parameter."""
        body: List[str] = []
        args: List[str] = []
        for i, p in enumerate(fn["params"]):
            role, name = p["role"], p["name"]
            local = name + "_"
            here = forged is not None and forged[0] == i
            if null == i:
                args.append("nullptr")  # an array's count stays 1: a NULL it needs
                continue
            if role == "handle":
                args.append("h" if here or null is not None else f"v.handle({self.kind(p['of'])})")
            elif role == "value":
                args.append(f"v.value<{p['of']}>()")
            elif role == "count":
                args.append("1")
            elif role == "out":
                body.append(f"{p['of']} {local}{{}};")
                args.append("&" + local)
            elif role == "out_array":
                body.append(f"{p['of']} {local}[1]{{}};")
                args.append(local)
            elif role == "in_array":
                of = p["of"]
                if p.get("handle"):
                    body.append(f"{of} {local}[1] = {{v.handle({self.kind(of)})}};")
                elif self.kinds.get(of) == "struct":
                    body.append(f"{of} {local}[1] = {{{self.use_struct(of)}}};")
                else:
                    body.append(f"{of} {local}[1] = {{v.value<{of}>()}};")
                if here:
                    body.append(f"{local}{forged[1][len(name):]} = h;")
                args.append(local)
            elif role in ("in_struct", "inout_struct"):
                body.append(f"{p['of']} {local} = {self.use_struct(p['of'])};")
                if here:
                    body.append(f"{local}{forged[1][len(name):]} = h;")
                args.append("&" + local)
            elif role == "string":
                args.append(f'v.string("{name}")')
            elif role == "bytes":
                args.append("v.bytes()")
            elif role == "size":
                args.append("v.bytes_size()")
            elif role == "callback":
                args.append(f"&noop_{p['of']}")
            elif role == "user_data":
                args.append("v.user_data()")
            elif role == "host_pointer":
                args.append("v.host_pointer()")
            elif role == "address":
                args.append(f'v.address("{name}")')
            else:
                raise SystemExit(f"abi/gen fuzz: role {role!r} of {fn['name']}({name})")
        body.append(f"return {fn['name']}({', '.join(args)});")
        return body

    # -- the file -----------------------------------------------------------------------------

    def render(self) -> str:
        fns = [f for f in self.api["functions"] if f["return"] == "qd_status"]
        stable = [f for f in common.stable_functions(self.api) if f["return"] == "qd_status"]
        out: List[str] = [common.first_line("//"), "// clang-format off"]
        out += [
            "// The fuzzers' view of qd.h (tests/README.md, \"Fuzzing\"), written by",
            "// abi/generators/fuzz.py: the statuses qd.h lists for each function, and an entry per",
            "// handle position and per required pointer of every function, whose invoker takes its",
            "// other values from qd_fuzz::Values (fuzz_values.h).",
            "#pragma once",
            "",
            "#include <qd/qd.h>",
            "",
            "#include <cstddef>",
            "#include <cstdint>",
            "#include <string_view>",
            "",
            '#include "fuzz_values.h"',
            "",
            "namespace qd_fuzz {",
            "",
            "// The handle types of qd.h, in its order.",
            "enum HandleKind : int {",
        ]
        out += [f"    {self.kind(h)}," for h in self.handles]
        out += ["    kHandleKinds", "};", "inline constexpr const char *kHandleKindNames[] = {"]
        out += [f'    "{h}",' for h in self.handles]
        out += ["};",
                "static_assert(kHandleKinds <= kMaxHandleKinds, \"raise kMaxHandleKinds in "
                "fuzz_values.h\");", ""]

        # Statuses.
        out += ["// The statuses qd.h lists for each function that returns qd_status, by name.",
                "struct Listed {",
                "    std::string_view function;",
                "    const qd_status *statuses;",
                "    std::size_t count;",
                "};"]
        for f in fns:
            out.append(f"inline constexpr qd_status kListed_{f['name']}[] = {{")
            out += [f"    {s}," for s in f["statuses"]]
            out.append("};")
        out.append("inline constexpr Listed kListed[] = {  // sorted by name")
        for f in sorted(fns, key=lambda f: f["name"]):
            out.append(f'    {{"{f["name"]}", kListed_{f["name"]}, '
                       f'sizeof kListed_{f["name"]} / sizeof(qd_status)}},')
        out += [
            "};",
            "",
            "// The function's entry, or nullptr when qd.h has no such function returning qd_status.",
            "inline const Listed *find_listed(std::string_view function) {",
            "    std::size_t lo = 0, hi = sizeof kListed / sizeof kListed[0];",
            "    while (lo < hi) {",
            "        const std::size_t mid = (lo + hi) / 2;",
            "        if (kListed[mid].function < function) lo = mid + 1;",
            "        else hi = mid;",
            "    }",
            "    const std::size_t n = sizeof kListed / sizeof kListed[0];",
            "    return lo < n && kListed[lo].function == function ? &kListed[lo] : nullptr;",
            "}",
            "",
            "// Whether qd.h lists st for the function (false for a function it does not have).",
            "inline bool listed(std::string_view function, qd_status st) {",
            "    const Listed *l = find_listed(function);",
            "    if (!l) return false;",
            "    for (std::size_t i = 0; i < l->count; ++i)",
            "        if (l->statuses[i] == st) return true;",
            "    return false;",
            "}",
            "",
        ]

        # Callbacks.
        out.append("// No-op callbacks of every function pointer type: a call that failed must "
                   "never run one.")
        for fp in self.api["function_pointers"]:
            params = ", ".join(p["type"] for p in fp["params"])
            ret = fp["return"]
            out.append(f"inline {ret} noop_{fp['name']}({params}) {{")
            out.append("    callback_calls.fetch_add(1);")
            if ret != "void":
                out.append(f"    return {ret}(0);")
            out.append("}")
        out.append("")

        # Invokers (they register the structs they build, written before them below).
        entries: List[str] = []
        nulls: List[str] = []
        invokers: List[str] = []
        for f in stable:
            positions = self.positions(f)
            for idx, label, htype in positions:
                ident = f"{f['name']}__{sanitize(label)}"
                invokers.append(f"inline qd_status {ident}([[maybe_unused]] const Values &v, "
                                "uint64_t h) {")
                invokers += ["    " + line for line in self.call(f, forged=(idx, label))]
                invokers.append("}")
                entries.append(f'    {{"{f["name"]}", "{label}", {self.kind(htype)}, '
                               f"{len(positions)}, &gen::{ident}}},")
            for idx, p in enumerate(f["params"]):
                if p["role"] in NULL_ROLES and not p.get("optional", False):
                    ident = f"{f['name']}__null_{p['name']}"
                    has_h = any(q["role"] == "handle" for q in f["params"])
                    h_param = "h" if has_h else "/*h*/"
                    invokers.append(f"inline qd_status {ident}([[maybe_unused]] const Values &v, "
                                    f"uint64_t {h_param}) {{")
                    invokers += ["    " + line for line in self.call(f, null=idx)]
                    invokers.append("}")
                    nulls.append(f'    {{"{f["name"]}", "{p["name"]}", &gen::{ident}}},')

        out.append("// Valid structs: the INIT macro, every handle field a live handle of "
                   "Values.")
        for s in self.used_structs:
            st = self.structs[s]
            out.append(f"inline {s} make_{s}(const Values &v) {{")
            if st.get("init_macro"):
                out.append(f"    {s} x = {st['init_macro']};")
            else:
                out.append(f"    {s} x{{}};")
                if st.get("has_struct_size"):
                    out.append("    x.struct_size = (uint32_t)sizeof x;")
                for fl in st["fields"]:
                    if self.kinds.get(fl["type"]) == "struct" and not fl.get("array_length"):
                        out.append(f"    x.{fl['name']} = make_{fl['type']}(v);")
            for path, htype in self.handle_fields(s):
                out.append(f"    x.{path} = v.handle({self.kind(htype)});")
            out += ["    v.complete(x);", "    return x;", "}"]
        out.append("")
        out += ["namespace gen {", ""] + invokers + ["", "}  // namespace gen", ""]
        out += [
            "// A handle position: invoke(v, h) calls function with h there and v's values",
            "// elsewhere. handle_positions: how many the function has (its other entries).",
            "struct HandleEntry {",
            "    const char *function;",
            "    const char *position;",
            "    HandleKind kind;",
            "    int handle_positions;",
            "    qd_status (*invoke)(const Values &v, uint64_t h);",
            "};",
            "inline constexpr HandleEntry kHandleEntries[] = {",
        ] + entries + [
            "};",
            "",
            "// A pointer the call needs: invoke(v, bad) passes NULL there and bad in every",
            "// by-value handle parameter (qd.h, \"Which error wins\": QD_ERROR_INVALID_ARGUMENT).",
            "struct NullEntry {",
            "    const char *function;",
            "    const char *position;",
            "    qd_status (*invoke)(const Values &v, uint64_t bad);",
            "};",
            "inline constexpr NullEntry kNullEntries[] = {",
        ] + nulls + [
            "};",
            "",
            "}  // namespace qd_fuzz",
            "// clang-format on",
        ]
        return common.lines(out)


def sanitize(label: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in label).strip("_")


def generate(api: Dict[str, Any]) -> Dict[str, str]:
    return {PATH: Gen(api).render()}
