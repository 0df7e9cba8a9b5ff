//! Shared helpers of the integration tests: contexts, the CPU test kernels module
//! (tests/cpu_module/qd_test_kernels.cpp, built by meson), and conditions to wait on.
#![allow(dead_code)]

use qd::{Context, DevicePtr, Kernel, Module};
use std::path::PathBuf;

/// A CPU context with a small pool.
pub fn cpu() -> Context {
    Context::builder().backend(qd::Backend::Cpu).stream_pool_size(16).build().expect("CPU context")
}

/// The CPU test kernels module: $QD_TEST_CPU_MODULE, else $QD_BUILD_DIR/tests, else next to the
/// libqd that was linked, else <repo>/build/tests.
pub fn cpu_module_path() -> PathBuf {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("QD_TEST_CPU_MODULE") {
        candidates.push(PathBuf::from(p));
    }
    if let Some(b) = std::env::var_os("QD_BUILD_DIR") {
        candidates.push(PathBuf::from(b).join("tests/qd_test_kernels.so"));
    }
    if let Some(lib) = option_env!("QD_RUST_LIB_DIR") {
        candidates.push(PathBuf::from(lib).join("../tests/qd_test_kernels.so"));
    }
    candidates.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../build/tests/qd_test_kernels.so"));
    for c in &candidates {
        if c.exists() {
            return c.canonicalize().unwrap();
        }
    }
    panic!(
        "no CPU test kernels module (qd_test_kernels.so); looked at {candidates:?}. Build it with \
         meson (ninja -C build tests/qd_test_kernels.so) or set QD_TEST_CPU_MODULE"
    );
}

pub fn load(ctx: &Context) -> Module<'_> {
    // SAFETY: the project's own test module, launched with the argument layouts of
    // tests/support/test_kernels.h.
    unsafe { Module::load_library(ctx, cpu_module_path()) }.expect("load the CPU test module")
}

/// The kernels of tests/support/test_kernels.h.
pub struct Kernels<'m> {
    pub noop: Kernel<'m>,
    pub write_value: Kernel<'m>,
    pub spin: Kernel<'m>,
    pub spin_write: Kernel<'m>,
    pub add_value: Kernel<'m>,
    pub append_log: Kernel<'m>,
    pub check_blob: Kernel<'m>,
    pub fault: Kernel<'m>,
    pub wait_flag: Kernel<'m>,
    pub add_one: Kernel<'m>,
}

impl<'m> Kernels<'m> {
    pub fn new(m: &'m Module<'_>) -> Kernels<'m> {
        let k = |n: &str| m.kernel(&format!("qd_test_{n}")).unwrap();
        Kernels {
            noop: k("noop"),
            write_value: k("write_value"),
            spin: k("spin"),
            spin_write: k("spin_write"),
            add_value: k("add_value"),
            append_log: k("append_log"),
            check_blob: k("check_blob"),
            fault: k("fault"),
            wait_flag: k("wait_flag"),
            add_one: k("add_one"),
        }
    }
}

/// Read a u32 the kernels wrote (on the CPU backend a device address is a host pointer),
/// atomically, since a kernel may be writing it.
pub fn peek(p: DevicePtr) -> u32 {
    // SAFETY: tests pass addresses of live u32 allocations.
    unsafe { (*(p.0 as *const std::sync::atomic::AtomicU32)).load(std::sync::atomic::Ordering::Acquire) }
}

/// Write a u32 that a kernel reads (the wait_flag kernel's "open" word).
pub fn poke(p: DevicePtr, v: u32) {
    // SAFETY: as for peek.
    unsafe { (*(p.0 as *const std::sync::atomic::AtomicU32)).store(v, std::sync::atomic::Ordering::Release) }
}

/// FNV-1a 64 of a blob xor its index: what qd_test_check_blob stores.
pub fn blob_checksum(blob: &[u8; 256], index: u32) -> u64 {
    let mut h: u64 = 1469598103934665603;
    for &b in blob {
        h ^= b as u64;
        h = h.wrapping_mul(1099511628211);
    }
    h ^ index as u64
}
