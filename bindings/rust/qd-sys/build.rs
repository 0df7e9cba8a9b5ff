//! Finds libqd for linking, in this order:
//!
//! 1. `$QD_LIB_DIR` (a directory holding `libqd.so`);
//! 2. `pkg-config --libs qd` (run as a command; its `-L` directories are searched);
//! 3. the in-tree meson build, `<repo>/build/src`.
//!
//! The directory found is passed to dependents as `DEP_QD_LIB_DIR` (through `links = "qd"`), so
//! that their build scripts can set an rpath for their test and example binaries.
//! When nothing works, the build fails with a message that lists what was tried.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=QD_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    let mut tried: Vec<String> = Vec::new();
    let found = from_env(&mut tried)
        .or_else(|| from_pkg_config(&mut tried))
        .or_else(|| from_tree(&mut tried));

    let Some(dir) = found else {
        let mut msg = String::from("qd-sys: libqd.so not found. Tried, in order:\n");
        for t in &tried {
            msg.push_str("  - ");
            msg.push_str(t);
            msg.push('\n');
        }
        msg.push_str(
            "Fix: build libqd (meson setup build && ninja -C build, from the repository root), \
             or set QD_LIB_DIR to the directory holding libqd.so, or install qd so that \
             `pkg-config --libs qd` finds it.",
        );
        // Cargo shows a failed build script's stderr.
        eprintln!("{msg}");
        std::process::exit(1);
    };

    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=qd");
    // Exported to dependents as DEP_QD_LIB_DIR (see the `links` key).
    println!("cargo:lib_dir={}", dir.display());
    // Binaries of this package (its tests) find libqd at run time without LD_LIBRARY_PATH.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}

fn has_lib(dir: &Path) -> bool {
    dir.join("libqd.so").exists()
}

fn from_env(tried: &mut Vec<String>) -> Option<PathBuf> {
    match env::var_os("QD_LIB_DIR") {
        None => {
            tried.push("QD_LIB_DIR: not set".into());
            None
        }
        Some(v) => {
            let dir = PathBuf::from(v);
            if has_lib(&dir) {
                Some(dir)
            } else {
                tried.push(format!("QD_LIB_DIR={}: no libqd.so there", dir.display()));
                None
            }
        }
    }
}

fn from_pkg_config(tried: &mut Vec<String>) -> Option<PathBuf> {
    let out = match Command::new("pkg-config").args(["--libs", "qd"]).output() {
        Ok(out) => out,
        Err(e) => {
            tried.push(format!("`pkg-config --libs qd`: could not run pkg-config ({e})"));
            return None;
        }
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or("").trim().to_string();
        tried.push(format!("`pkg-config --libs qd`: failed ({first})"));
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let dirs: Vec<PathBuf> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("-L"))
        .map(PathBuf::from)
        .collect();
    if let Some(d) = dirs.iter().find(|d| has_lib(d)) {
        return Some(d.clone());
    }
    // pkg-config may name only -lqd when libqd sits in a default linker directory.
    for d in ["/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib64"] {
        let d = PathBuf::from(d);
        if text.contains("-lqd") && has_lib(&d) {
            return Some(d);
        }
    }
    tried.push(format!("`pkg-config --libs qd` gave `{}`: no libqd.so in its -L directories", text.trim()));
    None
}

fn from_tree(tried: &mut Vec<String>) -> Option<PathBuf> {
    // qd-sys lives in <repo>/bindings/rust/qd-sys.
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("../../../build/src");
    let dir = dir.canonicalize().unwrap_or(dir);
    if has_lib(&dir) {
        Some(dir)
    } else {
        tried.push(format!("in-tree meson build {}: no libqd.so there", dir.display()));
        None
    }
}
