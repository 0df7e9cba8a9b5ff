//! qd-sys mirrors include/qd/qd.h: every function, function pointer type, typedef, struct field,
//! constant, enum value, status and INIT macro, with the C compiler's sizes, offsets and values.
//!
//! The tables below (`rust_values`, `rust_layouts`) take Rust's own numbers (`offset_of!`,
//! `size_of`, the constants' values); they are compared both ways with the header, so an entry
//! missing from them fails as a missing declaration would. The `*_is_caught` tests feed a
//! changed header to the same checks and assert that they fail.

mod header_check;

use header_check::*;
use qd_sys::*;
use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn include_dir() -> PathBuf {
    match std::env::var_os("QD_INCLUDE_DIR") {
        Some(d) => PathBuf::from(d),
        None => crate_dir().join("../../../include"),
    }
}

fn header_text() -> String {
    let path = include_dir().join("qd/qd.h");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn work_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qd-sys-header-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

macro_rules! layout {
    ($map:ident, $s:ident { $($f:ident),* $(,)? }) => {{
        let fields = vec![$((
            stringify!($f).to_string(),
            offset_of!($s, $f),
            {
                // The size of one field, through a raw pointer (no value needed).
                fn field_size<T>(_: *const T) -> usize { size_of::<T>() }
                let u = std::mem::MaybeUninit::<$s>::uninit();
                // SAFETY: addr_of! on a field of an uninitialised value reads nothing.
                field_size(unsafe { std::ptr::addr_of!((*u.as_ptr()).$f) })
            }
        )),*];
        $map.insert(stringify!($s).to_string(), (size_of::<$s>(), align_of::<$s>(), fields));
    }};
}

/// Sizes, alignments and field offsets of qd-sys's structs, as Rust lays them out.
fn rust_layouts() -> Layouts {
    let mut m = BTreeMap::new();
    layout!(m, qd_context_desc {
        struct_size, backend, device, stream_pool_size, event_pool_size, cpu_worker_threads,
        flags, reserved
    });
    layout!(m, qd_stream_desc { struct_size, flags, priority, reserved });
    layout!(m, qd_launch_config { struct_size, grid, block, shared_mem_bytes });
    layout!(m, qd_arg { data, size });
    layout!(m, qd_task { struct_size, group, kernel, config, args, num_args, reserved });
    layout!(m, qd_host_kernel_info {
        struct_size, block_idx, grid_dim, block_dim, shared_mem_bytes, shared_mem
    });
    layout!(m, qd_context_stats {
        struct_size, reserved, live_streams, live_events, live_modules, live_kernels,
        stream_pool_capacity, stream_pool_created, stream_pool_leased, stream_pool_hits,
        stream_pool_misses, event_pool_created, event_pool_hits, event_pool_misses,
        live_allocations, bytes_allocated, host_bytes_allocated, live_graphs, hazards_reported
    });
    layout!(m, qd_hazard {
        struct_size, kind, context, stream, other_stream, allocation, allocation_bytes, offset,
        operation, other_operation, message
    });
    layout!(m, qd_device_info {
        struct_size, backend, device, driver_version, compute_major, compute_minor,
        multiprocessors, reserved, total_memory, name
    });
    m
}

macro_rules! values {
    ($($c:ident),* $(,)?) => {{
        let mut m = BTreeMap::new();
        $( m.insert(stringify!($c).to_string(), $c as i64); )*
        m
    }};
}

/// The value of every constant and enum value of qd-sys.
fn rust_values() -> BTreeMap<String, i64> {
    values!(
        QD_VERSION_MAJOR, QD_VERSION_MINOR, QD_VERSION_PATCH, QD_VERSION, QD_MAX_ARGS,
        QD_MAX_ARG_BYTES, QD_SUCCESS, QD_NOT_READY, QD_ERROR_INVALID_ARGUMENT,
        QD_ERROR_INVALID_HANDLE, QD_ERROR_WRONG_CONTEXT, QD_ERROR_INVALID_OPERATION,
        QD_ERROR_OUT_OF_MEMORY, QD_ERROR_OVERFLOW, QD_ERROR_INVALID_ADDRESS,
        QD_ERROR_POOL_EXHAUSTED, QD_ERROR_NOT_FOUND, QD_ERROR_INVALID_IMAGE,
        QD_ERROR_TIMING_DISABLED, QD_ERROR_NOT_RECORDED, QD_ERROR_NOT_SUPPORTED,
        QD_ERROR_BACKEND_UNAVAILABLE, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED,
        QD_ERROR_LAUNCH_FAILED, QD_ERROR_INTERNAL, QD_ERROR_HAZARD, QD_BACKEND_DEFAULT,
        QD_BACKEND_CPU, QD_BACKEND_CUDA, QD_BACKEND_HIP, QD_STREAM_NON_BLOCKING, QD_EVENT_TIMING,
        QD_CONTEXT_VALIDATE, QD_CONTEXT_VALIDATE_FAIL, QD_HAZARD_RACE, QD_HAZARD_FREE_IN_USE,
        QD_HAZARD_USE_AFTER_FREE, QD_PARAM_READ_WRITE, QD_PARAM_READ, QD_PARAM_WRITE,
        QD_PARAM_IGNORE, QD_PARAM_PARTITIONED,
    )
}

fn rust_statuses() -> Vec<(String, i64, String)> {
    QD_STATUS_LIST.iter().map(|(n, v, d)| (n.to_string(), *v as i64, d.to_string())).collect()
}

fn rust_first_sizes() -> Vec<(String, u32, String)> {
    QD_STRUCT_FIRST_SIZES.iter().map(|(n, s, v)| (n.to_string(), *s, v.to_string())).collect()
}

/// All mismatches between qd-sys and a header (its text, and the directory `qd/qd.h` is in
/// for the C compiler). Prints a SKIP line and checks declarations only when there is no cc.
fn mismatches(header: &str, include: &Path, tag: &str) -> Vec<String> {
    let h = parse_header(header);
    let r = parse_rust(&rust_sources(&crate_dir()));
    let mut out = compare_declarations(&h, &r);
    match c_facts(include, &h, &work_dir(tag)) {
        Ok(Some(facts)) => out.extend(compare_numbers(
            &h,
            &facts,
            &rust_values(),
            &rust_layouts(),
            &rust_statuses(),
            &rust_first_sizes(),
        )),
        Ok(None) => println!("SKIP: no C compiler (cc): sizes, offsets and values not compared"),
        Err(e) => out.push(format!("layout program: {e}")),
    }
    out
}

/// The same checks on a copy of qd.h changed by `edit`.
fn mismatches_after(tag: &str, edit: impl Fn(&str) -> String) -> Vec<String> {
    let original = header_text();
    let changed = edit(&original);
    assert_ne!(changed, original, "the edit must change the header");
    let dir = work_dir(tag);
    std::fs::create_dir_all(dir.join("inc/qd")).unwrap();
    std::fs::write(dir.join("inc/qd/qd.h"), &changed).unwrap();
    mismatches(&changed, &dir.join("inc"), tag)
}

#[test]
fn qd_sys_mirrors_every_declaration_and_layout_of_the_header() {
    let found = mismatches(&header_text(), &include_dir(), "current");
    assert!(found.is_empty(), "qd-sys differs from qd.h:\n  {}", found.join("\n  "));
}

#[test]
fn the_parse_finds_the_whole_header() {
    // Guards the parser itself: if it silently found nothing, every comparison would pass.
    let h = parse_header(&header_text());
    assert!(h.functions.len() >= 45, "functions: {:?}", h.functions.keys());
    assert_eq!(h.structs.len(), 9, "structs: {:?}", h.structs.keys());
    assert_eq!(h.statuses.len(), 21);
    assert_eq!(h.first_sizes.len(), 8);
    assert!(h.fn_types.contains_key("qd_host_kernel_fn") && h.fn_types.contains_key("qd_host_fn"));
    assert_eq!(h.functions["qd_launch"].params[2], ("config".into(), "*constqd_launch_config".into()));
}

#[test]
fn a_new_function_in_the_header_is_caught() {
    let found = mismatches_after("newfn", |h| {
        h.replace(
            "QD_API uint32_t qd_version(void);",
            "QD_API uint32_t qd_version(void);\nQD_API qd_status qd_context_reset(qd_context ctx);",
        )
    });
    assert!(found.iter().any(|m| m.contains("qd_context_reset")), "{found:?}");
}

#[test]
fn a_changed_parameter_type_is_caught() {
    let found = mismatches_after("paramtype", |h| {
        h.replace("qd_memset_async(qd_stream stream, uint64_t dst, uint8_t value", "qd_memset_async(qd_stream stream, uint64_t dst, uint32_t value")
    });
    assert!(found.iter().any(|m| m.contains("function qd_memset_async")), "{found:?}");
}

#[test]
fn a_new_struct_field_is_caught() {
    let found = mismatches_after("field", |h| {
        h.replace("    int32_t priority; /**<", "    uint32_t lanes;\n    int32_t priority; /**<")
    });
    assert!(found.iter().any(|m| m.contains("qd_stream_desc")), "{found:?}");
}

#[test]
fn a_changed_constant_is_caught() {
    let found = mismatches_after("constant", |h| h.replace("#define QD_MAX_ARGS 64u", "#define QD_MAX_ARGS 128u"));
    if found.is_empty() {
        panic!("a changed QD_MAX_ARGS went unnoticed");
    }
    assert!(found.iter().any(|m| m.contains("QD_MAX_ARGS")), "{found:?}");
}

#[test]
fn a_new_status_is_caught() {
    let found = mismatches_after("status", |h| {
        h.replace(
            "X(QD_ERROR_INTERNAL, -18, \"an internal error; please report it\")",
            "X(QD_ERROR_INTERNAL, -18, \"an internal error; please report it\") \\\n    X(QD_ERROR_BUSY, -19, \"busy\")",
        )
    });
    assert!(found.iter().any(|m| m.contains("QD_ERROR_BUSY")), "{found:?}");
}

#[test]
fn the_loaded_library_names_every_status_as_the_header_does() {
    for (name, value, _) in QD_STATUS_LIST {
        // SAFETY: qd_status_name returns a static NUL-terminated string.
        let got = unsafe { std::ffi::CStr::from_ptr(qd_status_name(*value)) };
        assert_eq!(got.to_str().unwrap(), *name);
    }
    // SAFETY: no arguments.
    let v = unsafe { qd_version() };
    assert_eq!(v >> 8, QD_VERSION >> 8, "libqd {v:#x} against header {QD_VERSION:#x}");
}
