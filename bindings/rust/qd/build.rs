//! Sets an rpath to the libqd that qd-sys linked (DEP_QD_LIB_DIR), so that this package's
//! tests, examples and doctests run without LD_LIBRARY_PATH. A program of another package sets
//! its own rpath or uses LD_LIBRARY_PATH (README.md, "Building and linking"). The directory is
//! also given to the tests (QD_RUST_LIB_DIR), which look for the CPU test kernels module next
//! to it (`<dir>/../tests/qd_test_kernels.so`).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_QD_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_QD_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        println!("cargo:rustc-env=QD_RUST_LIB_DIR={dir}");
    }
}
