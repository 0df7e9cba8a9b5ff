#![doc = include_str!("../../README.md")]
//!
//! # Modules of this crate
//!
//! - [`Context`], [`ContextBuilder`], [`device_count`], [`device_info`], [`version`];
//! - [`Stream`], [`Lease`], [`ActiveGuard`]: owned, leased, borrowed and default streams, and
//!   the thread-local active stream as a scope;
//! - [`Event`]: ordering across streams and timing;
//! - [`Module`], [`Kernel`], [`HostKernel`]: kernels from images and from Rust closures;
//! - [`Stream::launch`], [`Stream::launch_host`], [`LaunchPack`], [`Task`], [`HostTask`],
//!   [`Stream::launch_parallel`], [`Stream::launch_host_parallel`], [`Stream::host_fn`]:
//!   scheduling work;
//! - [`DeviceBuffer`], [`HostBuffer`], [`Transfer`]: stream-ordered memory and copies;
//! - [`Stream::begin_capture`], [`Capture`], [`Graph`]: work captured once and replayed;
//! - [`Context::set_hazard_handler`], [`Hazard`]: the validation mode's reports;
//! - [`Context::take_drop_errors`]: what a `Drop` could not report;
//! - [`Error`], [`Result`].
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod active;
mod args;
mod callback;
mod conditional;
mod context;
mod error;
mod event;
mod graph;
mod hazard;
mod host_kernel;
mod launch;
mod launch_attrs;
mod memory;
mod module;
mod stream;
mod timeline;
mod trace;
mod transfer;

pub use active::ActiveGuard;
pub use conditional::Conditional;
pub use args::{DevicePtr, KernelArg, KernelArgs, LaunchConfig, Pod};
pub use context::{device_count, device_info, version, Backend, Context, ContextBuilder, DeviceInfo, Stats};
pub use error::{Error, Result};
pub use event::Event;
pub use graph::{Capture, ConditionalKind, Graph};
pub use host_kernel::{Block, HostArgs, HostKernel, KernelFault, KernelResult};
pub use hazard::{Hazard, HazardKind};
pub use launch::{HostTask, LaunchPack, Task};
pub use launch_attrs::LaunchAttrs;
pub use memory::DeviceBuffer;
pub use module::{Kernel, Module, ParamAccess};
pub use stream::{Lease, Stream, StreamOptions};
pub use timeline::Timeline;
pub use trace::Trace;
pub use transfer::{HostBuffer, HostData, Transfer};

/// The raw FFI crate, re-exported for calls the safe API does not cover.
pub use qd_sys as sys;
