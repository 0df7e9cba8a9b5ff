//! Compares what qd-sys declares (its source files) with what include/qd/qd.h declares.
//!
//! Three sources meet here:
//! - the header, parsed as text: functions, function pointer typedefs, scalar typedefs, struct
//!   fields, enum values, the status X-list, constants, INIT macros, first struct sizes;
//! - qd-sys's source files, parsed as text: the same items as Rust declarations;
//! - a C program generated from the parsed header and built with `cc`, which prints the value
//!   of every constant and enum value and the size, alignment and field offsets of every struct,
//!   as the C compiler sees them. The test compares those numbers with Rust's `size_of`,
//!   `align_of` and `offset_of!` (`rust_layouts`, `rust_values` in tests/header.rs).
//!
//! Every check returns a list of mismatches (empty = mirrored), so the tests can also show that
//! a changed header is caught.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One C or Rust function (or function pointer type): parameters (name, Rust type) and return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sig {
    pub params: Vec<(String, String)>,
    pub ret: String,
}

/// What one side declares. Types are spelled as Rust types with whitespace removed.
#[derive(Debug, Default)]
pub struct Api {
    pub functions: BTreeMap<String, Sig>,
    pub fn_types: BTreeMap<String, Sig>,
    pub typedefs: BTreeMap<String, String>,
    pub structs: BTreeMap<String, Vec<(String, String)>>,
    /// Constants and enum values by name (the header's internal FORCE_32_ entries excluded).
    pub constants: Vec<String>,
    pub init_macros: Vec<String>,
    pub statuses: Vec<(String, i64, String)>,
    pub first_sizes: Vec<(String, u32, String)>,
}

// ------------------------------------------------------------------------------------------
// The header
// ------------------------------------------------------------------------------------------

pub fn strip_c_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            match text[i + 2..].find("*/") {
                Some(end) => i = i + 2 + end + 2,
                None => break,
            }
            out.push(' ');
        } else if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'"' {
            // Keep string literals (status descriptions) intact.
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str(&text[start..i.min(b.len())]);
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The logical lines of the preprocessor (backslash continuations joined).
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if let Some(stripped) = line.strip_suffix('\\') {
            cur.push_str(stripped);
            cur.push(' ');
        } else {
            cur.push_str(line);
            lines.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A C type (as written before or around a declarator) as a Rust type without spaces.
pub fn c_type_to_rust(c: &str) -> String {
    let spaced = c.replace('*', " * ");
    let mut base_const = false;
    let mut base = String::new();
    let mut stars: Vec<bool> = Vec::new(); // per pointer level: is the pointer itself const
    for tok in spaced.split_whitespace() {
        match tok {
            "*" => stars.push(false),
            "const" if !stars.is_empty() => *stars.last_mut().unwrap() = true,
            "const" => base_const = true,
            "struct" | "enum" => {}
            t => base = t.to_string(),
        }
    }
    let mut cur = match base.as_str() {
        "void" => "c_void".to_string(),
        "char" => "c_char".to_string(),
        "uint8_t" => "u8".to_string(),
        "uint32_t" => "u32".to_string(),
        "int32_t" => "i32".to_string(),
        "uint64_t" => "u64".to_string(),
        "int64_t" => "i64".to_string(),
        "float" => "f32".to_string(),
        "double" => "f64".to_string(),
        "size_t" => "usize".to_string(),
        other => other.to_string(),
    };
    let mut pointee_const = base_const;
    for is_const in stars {
        cur = format!("*{}{}", if pointee_const { "const" } else { "mut" }, cur);
        pointee_const = is_const;
    }
    cur
}

/// Split "const qd_context_desc *desc" into ("desc", "*constqd_context_desc").
fn c_param(decl: &str) -> (String, String) {
    let decl = decl.trim();
    let split = decl.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map(|i| i + 1).unwrap_or(0);
    let name = decl[split..].to_string();
    let ty = &decl[..split];
    (rust_param_name(&name), c_type_to_rust(ty))
}

fn rust_param_name(c: &str) -> String {
    match c {
        "fn" | "type" | "ref" | "mod" | "self" | "match" | "loop" | "move" => format!("{c}_"),
        other => other.to_string(),
    }
}

fn c_params(list: &str) -> Vec<(String, String)> {
    let list = list.trim();
    if list.is_empty() || list == "void" {
        return Vec::new();
    }
    list.split(',').map(c_param).collect()
}

fn c_ret(ret: &str) -> String {
    let r = c_type_to_rust(ret);
    if r == "c_void" {
        String::new()
    } else {
        r
    }
}

pub fn parse_header(text: &str) -> Api {
    let code = strip_c_comments(text);
    let mut api = Api::default();

    // Statements outside the preprocessor, split at ';' (typedefs, structs, enums).
    let lines = logical_lines(&code);
    // Code outside the preprocessor, without the C++-only `extern "C" {` ... `}` lines.
    let mut body = String::new();
    let mut in_cplusplus = false;
    for l in &lines {
        let t = l.trim();
        if t.starts_with("#ifdef __cplusplus") {
            in_cplusplus = true;
        } else if in_cplusplus && t.starts_with("#endif") {
            in_cplusplus = false;
        } else if !in_cplusplus && !t.starts_with('#') {
            body.push_str(l);
            body.push('\n');
        }
    }
    // Functions: QD_API <ret> name(params);
    let mut rest = body.as_str();
    while let Some(pos) = rest.find("QD_API ") {
        let after = &rest[pos + 7..];
        let end = after.find(';').unwrap_or(after.len());
        let decl = collapse(&after[..end]);
        rest = &after[end..];
        let (Some(open), Some(close)) = (decl.find('('), decl.rfind(')')) else { continue };
        let head = &decl[..open];
        let (name, ret) = {
            let (n, t) = c_param(head);
            (n, t)
        };
        let sig = Sig { params: c_params(&decl[open + 1..close]), ret: if ret == "c_void" { String::new() } else { ret } };
        let _ = c_ret;
        api.functions.insert(name, sig);
    }

    for stmt in split_top_level(&body) {
        let s = collapse(&stmt);
        let s = s.trim_start_matches('}').trim();
        if let Some(t) = s.strip_prefix("typedef ") {
            if t.starts_with("struct ") {
                parse_struct(t, &mut api);
            } else if t.starts_with("enum ") {
                parse_enum(t.strip_prefix("enum ").unwrap(), &mut api);
            } else if let Some(open) = t.find("(*") {
                // typedef RET (*NAME)(PARAMS)
                let ret = c_ret(&t[..open]);
                let name_end = t[open..].find(')').map(|i| open + i).unwrap_or(t.len());
                let name = t[open + 2..name_end].trim().to_string();
                let params = &t[name_end + 1..];
                let params = params.trim().trim_start_matches('(').trim_end_matches(')');
                api.fn_types.insert(name, Sig { params: c_params(params), ret });
            } else {
                let (name, ty) = c_param(t);
                api.typedefs.insert(name, ty);
            }
        } else if let Some(t) = s.strip_prefix("enum ") {
            parse_enum(t, &mut api);
        }
    }

    // The preprocessor: constants, INIT macros, the status list and the first sizes.
    for line in &lines {
        let l = collapse(line);
        let Some(def) = l.strip_prefix("#define ") else { continue };
        let name_end = def.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(def.len());
        let name = &def[..name_end];
        let function_like = def[name_end..].starts_with('(');
        let value = def[name_end..].trim();
        if name == "QD_STATUS_LIST" {
            for x in def.split("X(").skip(1) {
                let inner = &x[..x.rfind(')').unwrap_or(x.len())];
                let mut parts = inner.splitn(3, ',');
                let n = parts.next().unwrap_or("").trim().to_string();
                let v: i64 = parts.next().unwrap_or("").trim().parse().unwrap_or(i64::MIN);
                let d = parts.next().unwrap_or("").trim().trim_matches('"').to_string();
                api.constants.push(n.clone());
                api.statuses.push((n, v, d));
            }
        } else if name == "QD_STRUCT_FIRST_SIZES" {
            for x in def.split("X(").skip(1) {
                let inner = &x[..x.find(')').unwrap_or(x.len())];
                let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
                if parts.len() == 3 {
                    let size = parts[1].trim_end_matches('u').parse().unwrap_or(0);
                    api.first_sizes.push((parts[0].to_string(), size, parts[2].to_string()));
                }
            }
        } else if name.ends_with("_INIT") {
            api.init_macros.push(name.to_string());
        } else if function_like || value.is_empty() || name == "QD_API" || name.ends_with('_') {
            // Include guard, visibility and helper macros are not part of the API.
        } else {
            api.constants.push(name.to_string());
        }
    }
    api
}

/// Split at ';' outside braces (a struct's fields stay with their struct).
fn split_top_level(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    for ch in body.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ';' && depth <= 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    out.push(cur);
    out
}

fn parse_struct(t: &str, api: &mut Api) {
    // struct NAME { fields } NAME
    let (Some(open), Some(close)) = (t.find('{'), t.rfind('}')) else { return };
    let name = t[close + 1..].trim().to_string();
    let mut fields = Vec::new();
    for f in t[open + 1..close].split(';') {
        let f = f.trim();
        if f.is_empty() {
            continue;
        }
        let (decl, array) = match (f.find('['), f.find(']')) {
            (Some(a), Some(b)) => (&f[..a], Some(f[a + 1..b].trim().to_string())),
            _ => (f, None),
        };
        let (fname, ty) = c_param(decl);
        let ty = match array {
            Some(n) => format!("[{ty};{n}]"),
            None => ty,
        };
        fields.push((fname, ty));
    }
    api.structs.insert(name, fields);
}

fn parse_enum(t: &str, api: &mut Api) {
    let (Some(open), Some(close)) = (t.find('{'), t.rfind('}')) else { return };
    let name = t[..open].trim();
    let typedef_name = t[close + 1..].trim();
    if !typedef_name.is_empty() && typedef_name == name {
        // typedef enum qd_backend {...} qd_backend: a type of 32 bits.
        api.typedefs.insert(name.to_string(), "u32".to_string());
    }
    for entry in t[open + 1..close].split(',') {
        let n = entry.split('=').next().unwrap_or("").trim();
        if n.is_empty() || n.ends_with("FORCE_32_") || n.contains('(') {
            continue;
        }
        api.constants.push(n.to_string());
    }
}

// ------------------------------------------------------------------------------------------
// qd-sys's sources
// ------------------------------------------------------------------------------------------

fn strip_rust_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn nospace(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

fn rust_params(list: &str) -> Vec<(String, String)> {
    let list = list.trim().trim_end_matches(',');
    if list.trim().is_empty() {
        return Vec::new();
    }
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (n, t) = p.split_once(':').unwrap_or((p, ""));
            (n.trim().to_string(), nospace(t))
        })
        .collect()
}

pub fn parse_rust(text: &str) -> Api {
    let code = strip_rust_comments(text);
    let mut api = Api::default();
    for stmt in code.split(';') {
        let s = collapse(stmt);
        // Take the item from its last keyword: a statement may begin with attributes, braces
        // of a previous item or `extern "C" {`.
        if let Some(pos) = s.rfind("pub fn ") {
            let d = &s[pos + 7..];
            let (Some(open), Some(close)) = (d.find('('), d.rfind(')')) else { continue };
            let name = d[..open].trim().to_string();
            let ret = d[close + 1..].trim().strip_prefix("->").map(nospace).unwrap_or_default();
            api.functions.insert(name, Sig { params: rust_params(&d[open + 1..close]), ret });
        } else if let Some(pos) = s.rfind("pub type ") {
            let d = &s[pos + 9..];
            let (name, ty) = d.split_once('=').unwrap_or((d, ""));
            let name = name.trim().to_string();
            let ty = ty.trim();
            if let Some(inner) = ty.strip_prefix("Option<unsafe extern \"C\" fn(") {
                let close = inner.rfind(')').unwrap_or(inner.len());
                let ret = inner[close + 1..].trim().trim_end_matches('>').trim();
                let ret = ret.strip_prefix("->").map(nospace).unwrap_or_default();
                api.fn_types.insert(name, Sig { params: rust_params(&inner[..close]), ret });
            } else {
                api.typedefs.insert(name, nospace(ty));
            }
        } else if let Some(pos) = s.rfind("pub const ") {
            let d = &s[pos + 10..];
            let name = d.split(':').next().unwrap_or("").trim().to_string();
            if name.ends_with("_INIT") {
                api.init_macros.push(name);
            } else if name != "QD_STATUS_LIST" && name != "QD_STRUCT_FIRST_SIZES" {
                api.constants.push(name);
            }
        }
    }
    // Structs are brace-delimited: pub struct NAME { pub field: Type, ... }
    let mut rest = code.as_str();
    while let Some(pos) = rest.find("pub struct ") {
        let d = &rest[pos + 11..];
        let open = d.find('{').unwrap_or(d.len());
        let close = d.find('}').unwrap_or(d.len());
        let name = d[..open].trim().to_string();
        let fields = d[open + 1..close]
            .split(',')
            .filter(|f| !f.trim().is_empty())
            .map(|f| {
                let f = f.trim().trim_start_matches("pub ");
                let (n, t) = f.split_once(':').unwrap_or((f, ""));
                (n.trim().to_string(), nospace(t))
            })
            .collect();
        api.structs.insert(name, fields);
        rest = &d[close.min(d.len())..];
    }
    api
}

pub fn rust_sources(crate_dir: &Path) -> String {
    let mut text = String::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(crate_dir.join("src"))
        .expect("qd-sys/src")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    for f in files {
        text.push_str(&std::fs::read_to_string(&f).unwrap());
        text.push('\n');
    }
    text
}

// ------------------------------------------------------------------------------------------
// The comparison
// ------------------------------------------------------------------------------------------

fn compare_maps<V: PartialEq + std::fmt::Debug>(
    what: &str,
    header: &BTreeMap<String, V>,
    rust: &BTreeMap<String, V>,
    out: &mut Vec<String>,
) {
    for (name, h) in header {
        match rust.get(name) {
            None => out.push(format!("{what} {name}: in qd.h, not in qd-sys")),
            Some(r) if r != h => out.push(format!("{what} {name}: qd.h has {h:?}, qd-sys has {r:?}")),
            _ => {}
        }
    }
    for name in rust.keys() {
        if !header.contains_key(name) {
            out.push(format!("{what} {name}: in qd-sys, not in qd.h"));
        }
    }
}

fn compare_names(what: &str, header: &[String], rust: &[String], out: &mut Vec<String>) {
    for n in header {
        if !rust.contains(n) {
            out.push(format!("{what} {n}: in qd.h, not in qd-sys"));
        }
    }
    for n in rust {
        if !header.contains(n) {
            out.push(format!("{what} {n}: in qd-sys, not in qd.h"));
        }
    }
}

/// Declarations: every item by name and spelled type. Numbers are compared by `compare_numbers`.
pub fn compare_declarations(header: &Api, rust: &Api) -> Vec<String> {
    let mut out = Vec::new();
    compare_maps("function", &header.functions, &rust.functions, &mut out);
    compare_maps("function pointer type", &header.fn_types, &rust.fn_types, &mut out);
    compare_maps("typedef", &header.typedefs, &rust.typedefs, &mut out);
    compare_maps("struct", &header.structs, &rust.structs, &mut out);
    compare_names("constant", &header.constants, &rust.constants, &mut out);
    compare_names("INIT macro", &header.init_macros, &rust.init_macros, &mut out);
    out
}

/// struct -> (size, align, [(field, offset, size)]).
pub type Layouts = BTreeMap<String, (usize, usize, Vec<(String, usize, usize)>)>;

/// What the C compiler makes of the header.
#[derive(Debug, Default)]
pub struct CFacts {
    pub values: BTreeMap<String, i64>,
    /// struct -> (size, align, [(field, offset, size)])
    pub layouts: Layouts,
}

/// Build and run a C program that prints every constant, enum value and struct layout of the
/// header in `include_dir`. None when no C compiler is available.
pub fn c_facts(include_dir: &Path, api: &Api, work: &Path) -> Result<Option<CFacts>, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        return Ok(None);
    }
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <qd/qd.h>\n\
         #define ALIGNOF(t) offsetof(struct { char c; t x; }, x)\nint main(void) {\n",
    );
    for c in &api.constants {
        src.push_str(&format!("    printf(\"C {c} %lld\\n\", (long long)({c}));\n"));
    }
    for (s, fields) in &api.structs {
        src.push_str(&format!(
            "    printf(\"S {s} %zu %zu\\n\", sizeof({s}), (size_t)ALIGNOF({s}));\n"
        ));
        for (f, _) in fields {
            let cf = f.trim_end_matches('_');
            src.push_str(&format!(
                "    printf(\"F {s} {f} %zu %zu\\n\", offsetof({s}, {cf}), sizeof((({s} *)0)->{cf}));\n"
            ));
        }
    }
    src.push_str("    return 0;\n}\n");
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let c_file = work.join("layout.c");
    let exe = work.join("layout");
    std::fs::write(&c_file, src).map_err(|e| e.to_string())?;
    let built = Command::new(&cc)
        .arg("-std=c99")
        .arg(format!("-I{}", include_dir.display()))
        .arg(&c_file)
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| e.to_string())?;
    if !built.status.success() {
        return Err(format!("cc failed: {}", String::from_utf8_lossy(&built.stderr)));
    }
    let run = Command::new(&exe).output().map_err(|e| e.to_string())?;
    let mut facts = CFacts::default();
    for line in String::from_utf8_lossy(&run.stdout).lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["C", n, v] => {
                facts.values.insert(n.to_string(), v.parse().unwrap());
            }
            ["S", s, size, align] => {
                facts.layouts.insert(s.to_string(), (size.parse().unwrap(), align.parse().unwrap(), Vec::new()));
            }
            ["F", s, f, off, size] => {
                facts.layouts.get_mut(*s).unwrap().2.push((f.to_string(), off.parse().unwrap(), size.parse().unwrap()));
            }
            _ => return Err(format!("unexpected line from the layout program: {line}")),
        }
    }
    Ok(Some(facts))
}

/// Rust's numbers (from the test's tables) against the C compiler's and the header's.
pub fn compare_numbers(
    header: &Api,
    facts: &CFacts,
    rust_values: &BTreeMap<String, i64>,
    rust_layouts: &Layouts,
    rust_statuses: &[(String, i64, String)],
    rust_first_sizes: &[(String, u32, String)],
) -> Vec<String> {
    let mut out = Vec::new();
    compare_maps("value of", &facts.values, rust_values, &mut out);
    compare_maps("layout of", &facts.layouts, rust_layouts, &mut out);
    if header.statuses != rust_statuses {
        out.push(format!("QD_STATUS_LIST: qd.h has {:?}, qd-sys has {:?}", header.statuses, rust_statuses));
    }
    if header.first_sizes != rust_first_sizes {
        out.push(format!(
            "QD_STRUCT_FIRST_SIZES: qd.h has {:?}, qd-sys has {:?}",
            header.first_sizes, rust_first_sizes
        ));
    }
    out
}
