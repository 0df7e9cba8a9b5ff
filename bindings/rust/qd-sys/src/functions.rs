//! Every function of qd.h, in header order. Statuses and threading rules: see the header.

use crate::types::*;
use core::ffi::{c_char, c_void};

extern "C" {
    // Status, errors and version.
    pub fn qd_status_name(status: qd_status) -> *const c_char;
    pub fn qd_last_error_message() -> *const c_char;
    pub fn qd_version() -> u32;

    // Devices.
    pub fn qd_backend_name(backend: qd_backend) -> *const c_char;
    pub fn qd_device_count(backend: qd_backend, count: *mut u32) -> qd_status;
    pub fn qd_device_get_info(backend: qd_backend, device: u32, out: *mut qd_device_info) -> qd_status;

    // Contexts.
    pub fn qd_context_create(desc: *const qd_context_desc, out: *mut qd_context) -> qd_status;
    pub fn qd_context_destroy(ctx: qd_context) -> qd_status;
    pub fn qd_context_synchronize(ctx: qd_context) -> qd_status;
    pub fn qd_context_default_stream(ctx: qd_context, out: *mut qd_stream) -> qd_status;
    pub fn qd_context_get_stats(ctx: qd_context, out: *mut qd_context_stats) -> qd_status;

    // Streams.
    pub fn qd_stream_create(ctx: qd_context, desc: *const qd_stream_desc, out: *mut qd_stream) -> qd_status;
    pub fn qd_stream_destroy(stream: qd_stream) -> qd_status;
    pub fn qd_stream_synchronize(stream: qd_stream) -> qd_status;
    pub fn qd_stream_query(stream: qd_stream) -> qd_status;
    pub fn qd_stream_wait_event(stream: qd_stream, event: qd_event) -> qd_status;
    pub fn qd_stream_acquire(ctx: qd_context, out: *mut qd_stream) -> qd_status;
    pub fn qd_stream_release(stream: qd_stream) -> qd_status;
    pub fn qd_stream_fork(parent: qd_stream, n: u32, children: *mut qd_stream) -> qd_status;
    pub fn qd_stream_join(parent: qd_stream, children: *const qd_stream, n: u32) -> qd_status;
    pub fn qd_stream_set_active(ctx: qd_context, stream: qd_stream, previous: *mut qd_stream) -> qd_status;
    pub fn qd_stream_get_active(ctx: qd_context, out: *mut qd_stream) -> qd_status;
    pub fn qd_stream_get_context(stream: qd_stream, out: *mut qd_context) -> qd_status;
    pub fn qd_stream_get_priority(stream: qd_stream, priority: *mut i32) -> qd_status;
    pub fn qd_stream_priority_range(ctx: qd_context, least: *mut i32, greatest: *mut i32) -> qd_status;
    pub fn qd_stream_native_handle(stream: qd_stream, native: *mut u64) -> qd_status;
    pub fn qd_stream_import(ctx: qd_context, native: u64, out: *mut qd_stream) -> qd_status;

    // Events.
    pub fn qd_event_create(ctx: qd_context, flags: u32, out: *mut qd_event) -> qd_status;
    pub fn qd_event_destroy(event: qd_event) -> qd_status;
    pub fn qd_event_record(stream: qd_stream, event: qd_event) -> qd_status;
    pub fn qd_event_query(event: qd_event) -> qd_status;
    pub fn qd_event_synchronize(event: qd_event) -> qd_status;
    pub fn qd_event_elapsed_ms(start: qd_event, end: qd_event, ms: *mut f32) -> qd_status;

    // Modules and kernels.
    pub fn qd_module_load(ctx: qd_context, image: *const c_void, size: u64, out: *mut qd_module) -> qd_status;
    pub fn qd_module_unload(module: qd_module) -> qd_status;
    pub fn qd_kernel_get(module: qd_module, name: *const c_char, out: *mut qd_kernel) -> qd_status;
    pub fn qd_kernel_from_host_fn(
        ctx: qd_context,
        fn_: qd_host_kernel_fn,
        name: *const c_char,
        out: *mut qd_kernel,
    ) -> qd_status;
    pub fn qd_kernel_destroy(kernel: qd_kernel) -> qd_status;

    // Launch.
    pub fn qd_launch(
        stream: qd_stream,
        kernel: qd_kernel,
        config: *const qd_launch_config,
        args: *const qd_arg,
        num_args: u32,
    ) -> qd_status;
    pub fn qd_launch_parallel(stream: qd_stream, tasks: *const qd_task, num_tasks: u32) -> qd_status;
    pub fn qd_launch_host_fn(stream: qd_stream, fn_: qd_host_fn, user_data: *mut c_void) -> qd_status;

    // Memory.
    pub fn qd_mem_alloc_async(stream: qd_stream, bytes: u64, address: *mut u64) -> qd_status;
    pub fn qd_mem_free_async(stream: qd_stream, address: u64) -> qd_status;
    pub fn qd_memcpy_async(stream: qd_stream, dst: u64, src: u64, bytes: u64) -> qd_status;
    pub fn qd_memset_async(stream: qd_stream, dst: u64, value: u8, bytes: u64) -> qd_status;
    pub fn qd_host_alloc(ctx: qd_context, bytes: u64, out: *mut *mut c_void) -> qd_status;
    pub fn qd_host_free(ctx: qd_context, ptr: *mut c_void) -> qd_status;

    // Graphs (since 0.2).
    pub fn qd_stream_begin_capture(stream: qd_stream) -> qd_status;
    pub fn qd_stream_end_capture(stream: qd_stream, graph: *mut qd_graph) -> qd_status;
    pub fn qd_graph_launch(graph: qd_graph, stream: qd_stream) -> qd_status;
    pub fn qd_graph_update(graph: qd_graph, from: qd_graph) -> qd_status;
    pub fn qd_graph_destroy(graph: qd_graph) -> qd_status;

    // Timeline trace (since 0.2).
    pub fn qd_trace_start(ctx: qd_context, path: *const c_char) -> qd_status;
    pub fn qd_trace_stop(ctx: qd_context) -> qd_status;
    pub fn qd_trace_flush(ctx: qd_context) -> qd_status;
    // Several devices (since 0.2).
    pub fn qd_context_can_access_peer(ctx: qd_context, peer: qd_context, can_access: *mut u32) -> qd_status;
    pub fn qd_context_enable_peer_access(ctx: qd_context, peer: qd_context) -> qd_status;
    pub fn qd_memcpy_peer_async(
        stream: qd_stream,
        dst: u64,
        dst_ctx: qd_context,
        src: u64,
        src_ctx: qd_context,
        bytes: u64,
    ) -> qd_status;

    // Validation (since 0.2).
    pub fn qd_context_set_hazard_handler(ctx: qd_context, fn_: qd_hazard_fn, user_data: *mut c_void) -> qd_status;
    pub fn qd_kernel_set_param_access(kernel: qd_kernel, index: u32, access: u32) -> qd_status;
}
