//! Raw FFI declarations of libqd: every function, struct, enum value and constant of
//! `include/qd/qd.h`, as `#[repr(C)]` items with no logic.
//!
//! The header is the documentation: each item below names the header declaration it mirrors;
//! read the statuses and threading rules there. The safe API is the `qd` crate.
//!
//! The declarations are generated: `functions.rs`, `types.rs` and `constants.rs` are written by
//! `abi/gen` from the API description `abi/qd-api.json` (which `abi/describe` makes from the
//! header and checks against it with the C compiler), and are never edited by hand. A function
//! added to the header reaches this crate by running `abi/describe --with-layout --out
//! abi/qd-api.json` and `abi/gen`; `abi/gen --check` fails while the committed files differ.
//! Each function's documentation names its release, its version node and the statuses the
//! header lists for it. The generated test `tests/layout.rs` checks every struct's size,
//! alignment and field offsets against the description, every function's exact type, and
//! every `*_INIT` constant against its C macro (compiled with `cc`).
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
