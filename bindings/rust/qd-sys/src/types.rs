//! Handles, typedefs, function pointer types and structs of qd.h, with their INIT macros.

use core::ffi::{c_char, c_void};
use core::mem::size_of;
use core::ptr;

/// `qd_status`: returned by every qd function.
pub type qd_status = i32;
/// `qd_context` handle.
pub type qd_context = u64;
/// `qd_stream` handle.
pub type qd_stream = u64;
/// `qd_event` handle.
pub type qd_event = u64;
/// `qd_module` handle.
pub type qd_module = u64;
/// `qd_kernel` handle.
pub type qd_kernel = u64;
/// `qd_graph` handle (since 0.2).
pub type qd_graph = u64;
/// `qd_backend` (a C enum of 32 bits, stored as `uint32_t` in descriptors).
pub type qd_backend = u32;

/// `qd_host_kernel_fn`: a CPU kernel. Returns 0 on success; any other value faults the context.
pub type qd_host_kernel_fn =
    Option<unsafe extern "C" fn(info: *const qd_host_kernel_info, args: *const *mut c_void) -> i32>;
/// `qd_host_fn`: a host callback run in stream order.
pub type qd_host_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
/// `qd_hazard_kind` (since 0.2; a C enum of 32 bits).
pub type qd_hazard_kind = u32;
/// `qd_param_access` (since 0.2; a C enum of 32 bits).
pub type qd_param_access = u32;
/// `qd_hazard_fn` (since 0.2): receives one hazard the validation mode found.
pub type qd_hazard_fn = Option<unsafe extern "C" fn(hazard: *const qd_hazard, user_data: *mut c_void)>;

/// `qd_context_desc`: parameters of `qd_context_create`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_context_desc {
    pub struct_size: u32,
    pub backend: u32,
    pub device: u32,
    pub stream_pool_size: u32,
    pub event_pool_size: u32,
    pub cpu_worker_threads: u32,
    pub flags: u32,
    pub reserved: u32,
}
/// `QD_CONTEXT_DESC_INIT`.
pub const QD_CONTEXT_DESC_INIT: qd_context_desc = qd_context_desc {
    struct_size: size_of::<qd_context_desc>() as u32,
    backend: crate::QD_BACKEND_DEFAULT,
    device: 0,
    stream_pool_size: 0,
    event_pool_size: 0,
    cpu_worker_threads: 0,
    flags: 0,
    reserved: 0,
};

/// `qd_stream_desc`: parameters of `qd_stream_create`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_stream_desc {
    pub struct_size: u32,
    pub flags: u32,
    pub priority: i32,
    pub reserved: u32,
}
/// `QD_STREAM_DESC_INIT`.
pub const QD_STREAM_DESC_INIT: qd_stream_desc =
    qd_stream_desc { struct_size: size_of::<qd_stream_desc>() as u32, flags: 0, priority: 0, reserved: 0 };

/// `qd_launch_config`: grid and block of a launch.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_launch_config {
    pub struct_size: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
}
/// `QD_LAUNCH_CONFIG_INIT`.
pub const QD_LAUNCH_CONFIG_INIT: qd_launch_config = qd_launch_config {
    struct_size: size_of::<qd_launch_config>() as u32,
    grid: [1, 1, 1],
    block: [1, 1, 1],
    shared_mem_bytes: 0,
};

/// `qd_arg`: one kernel argument, `size` bytes read from `data`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_arg {
    pub data: *const c_void,
    pub size: u64,
}

/// `qd_task`: one task of `qd_launch_parallel`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_task {
    pub struct_size: u32,
    pub group: u32,
    pub kernel: qd_kernel,
    pub config: qd_launch_config,
    pub args: *const qd_arg,
    pub num_args: u32,
    pub reserved: u32,
}
/// `QD_TASK_INIT`.
pub const QD_TASK_INIT: qd_task = qd_task {
    struct_size: size_of::<qd_task>() as u32,
    group: 0,
    kernel: 0,
    config: QD_LAUNCH_CONFIG_INIT,
    args: ptr::null(),
    num_args: 0,
    reserved: 0,
};

/// `qd_host_kernel_info`: what a CPU host kernel receives for one block.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_host_kernel_info {
    pub struct_size: u32,
    pub block_idx: [u32; 3],
    pub grid_dim: [u32; 3],
    pub block_dim: [u32; 3],
    pub shared_mem_bytes: u32,
    pub shared_mem: *mut c_void,
}

/// `qd_context_stats`: statistics of one context.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_context_stats {
    pub struct_size: u32,
    pub reserved: u32,
    pub live_streams: u64,
    pub live_events: u64,
    pub live_modules: u64,
    pub live_kernels: u64,
    pub stream_pool_capacity: u64,
    pub stream_pool_created: u64,
    pub stream_pool_leased: u64,
    pub stream_pool_hits: u64,
    pub stream_pool_misses: u64,
    pub event_pool_created: u64,
    pub event_pool_hits: u64,
    pub event_pool_misses: u64,
    pub live_allocations: u64,
    pub bytes_allocated: u64,
    pub host_bytes_allocated: u64,
    /// Since 0.2.
    pub live_graphs: u64,
    /// Since 0.2: hazards the validation mode reported.
    pub hazards_reported: u64,
}
/// `QD_CONTEXT_STATS_INIT`.
pub const QD_CONTEXT_STATS_INIT: qd_context_stats = qd_context_stats {
    struct_size: size_of::<qd_context_stats>() as u32,
    reserved: 0,
    live_streams: 0,
    live_events: 0,
    live_modules: 0,
    live_kernels: 0,
    stream_pool_capacity: 0,
    stream_pool_created: 0,
    stream_pool_leased: 0,
    stream_pool_hits: 0,
    stream_pool_misses: 0,
    event_pool_created: 0,
    event_pool_hits: 0,
    event_pool_misses: 0,
    live_allocations: 0,
    bytes_allocated: 0,
    host_bytes_allocated: 0,
    live_graphs: 0,
    hazards_reported: 0,
};

/// `qd_hazard` (since 0.2): one hazard, as the hazard handler receives it; its pointers are
/// valid only during the handler's call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct qd_hazard {
    pub struct_size: u32,
    pub kind: u32,
    pub context: qd_context,
    pub stream: qd_stream,
    pub other_stream: qd_stream,
    pub allocation: u64,
    pub allocation_bytes: u64,
    pub offset: u64,
    pub operation: *const c_char,
    pub other_operation: *const c_char,
    pub message: *const c_char,
}

/// `qd_device_info`: what `qd_device_get_info` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct qd_device_info {
    pub struct_size: u32,
    pub backend: u32,
    pub device: u32,
    pub driver_version: u32,
    pub compute_major: u32,
    pub compute_minor: u32,
    pub multiprocessors: u32,
    pub reserved: u32,
    pub total_memory: u64,
    pub name: [c_char; 128],
}
/// `QD_DEVICE_INFO_INIT`.
pub const QD_DEVICE_INFO_INIT: qd_device_info = qd_device_info {
    struct_size: size_of::<qd_device_info>() as u32,
    backend: 0,
    device: 0,
    driver_version: 0,
    compute_major: 0,
    compute_minor: 0,
    multiprocessors: 0,
    reserved: 0,
    total_memory: 0,
    name: [0; 128],
};
