//! Raw FFI declarations of libqd: every function, struct, enum value and constant of
//! `include/qd/qd.h`, as `#[repr(C)]` items with no logic.
//!
//! The header is the documentation: each item below names the header declaration it mirrors;
//! read the statuses and threading rules there. The safe API is the `qd` crate.
//!
//! This crate is checked against the header by its tests (`tests/header.rs`): a function,
//! struct field, enum value or constant that the header gains or changes and this crate does not
//! mirror fails the test, and every struct's `sizeof`/`offsetof` is compared with what the C
//! compiler makes of the header.
//!
//! ```
//! let mut n = 0u32;
//! // SAFETY: `n` is a valid output location.
//! let status = unsafe { qd_sys::qd_device_count(qd_sys::QD_BACKEND_CPU, &mut n) };
//! assert_eq!(status, qd_sys::QD_SUCCESS);
//! assert_eq!(n, 1);
//! ```
#![no_std]
#![allow(non_camel_case_types)]

pub use core::ffi::{c_char, c_void};

mod constants;
mod functions;
mod types;

pub use constants::*;
pub use functions::*;
pub use types::*;
