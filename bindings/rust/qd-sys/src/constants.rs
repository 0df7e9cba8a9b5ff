//! Constants, status codes and enum values of qd.h.

use crate::types::{qd_backend, qd_hazard_kind, qd_param_access, qd_status};

/// `QD_VERSION_MAJOR`.
pub const QD_VERSION_MAJOR: u32 = 0;
/// `QD_VERSION_MINOR`.
pub const QD_VERSION_MINOR: u32 = 3;
/// `QD_VERSION_PATCH`.
pub const QD_VERSION_PATCH: u32 = 0;
/// `QD_VERSION`: `(major << 16) | (minor << 8) | patch`.
pub const QD_VERSION: u32 = (QD_VERSION_MAJOR << 16) | (QD_VERSION_MINOR << 8) | QD_VERSION_PATCH;

/// `QD_MAX_ARGS`: the most arguments of one launch.
pub const QD_MAX_ARGS: u32 = 64;
/// `QD_MAX_ARG_BYTES`: the largest total argument size of one launch.
pub const QD_MAX_ARG_BYTES: u32 = 4096;

// Status codes (QD_STATUS_LIST).
/// `QD_SUCCESS`: success.
pub const QD_SUCCESS: qd_status = 0;
/// `QD_NOT_READY`: the work or event has not completed yet.
pub const QD_NOT_READY: qd_status = 1;
/// `QD_ERROR_INVALID_ARGUMENT`: an argument is out of its documented range.
pub const QD_ERROR_INVALID_ARGUMENT: qd_status = -1;
/// `QD_ERROR_INVALID_HANDLE`: a handle is 0, forged, of the wrong type, or destroyed.
pub const QD_ERROR_INVALID_HANDLE: qd_status = -2;
/// `QD_ERROR_WRONG_CONTEXT`: handles of different contexts were mixed in one call.
pub const QD_ERROR_WRONG_CONTEXT: qd_status = -3;
/// `QD_ERROR_INVALID_OPERATION`: the object does not allow this operation.
pub const QD_ERROR_INVALID_OPERATION: qd_status = -4;
/// `QD_ERROR_OUT_OF_MEMORY`: host or device memory is exhausted.
pub const QD_ERROR_OUT_OF_MEMORY: qd_status = -5;
/// `QD_ERROR_OVERFLOW`: a size or count overflows its arithmetic.
pub const QD_ERROR_OVERFLOW: qd_status = -6;
/// `QD_ERROR_INVALID_ADDRESS`: an address is not a live allocation of this context.
pub const QD_ERROR_INVALID_ADDRESS: qd_status = -7;
/// `QD_ERROR_POOL_EXHAUSTED`: every stream of the context's pool is leased.
pub const QD_ERROR_POOL_EXHAUSTED: qd_status = -8;
/// `QD_ERROR_NOT_FOUND`: a named kernel or file does not exist.
pub const QD_ERROR_NOT_FOUND: qd_status = -9;
/// `QD_ERROR_INVALID_IMAGE`: a module image cannot be loaded.
pub const QD_ERROR_INVALID_IMAGE: qd_status = -10;
/// `QD_ERROR_TIMING_DISABLED`: an event was created without `QD_EVENT_TIMING`.
pub const QD_ERROR_TIMING_DISABLED: qd_status = -11;
/// `QD_ERROR_NOT_RECORDED`: an event was never recorded.
pub const QD_ERROR_NOT_RECORDED: qd_status = -12;
/// `QD_ERROR_NOT_SUPPORTED`: the backend does not support this operation.
pub const QD_ERROR_NOT_SUPPORTED: qd_status = -13;
/// `QD_ERROR_BACKEND_UNAVAILABLE`: the backend or device is not available.
pub const QD_ERROR_BACKEND_UNAVAILABLE: qd_status = -14;
/// `QD_ERROR_DEVICE_LOST`: a device fault made the context unusable.
pub const QD_ERROR_DEVICE_LOST: qd_status = -15;
/// `QD_ERROR_FORKED`: the context was inherited across fork().
pub const QD_ERROR_FORKED: qd_status = -16;
/// `QD_ERROR_LAUNCH_FAILED`: the backend rejected the launch.
pub const QD_ERROR_LAUNCH_FAILED: qd_status = -17;
/// `QD_ERROR_INTERNAL`: an internal error; please report it.
pub const QD_ERROR_INTERNAL: qd_status = -18;
/// `QD_ERROR_HAZARD` (since 0.2): validation found a hazard in this call.
pub const QD_ERROR_HAZARD: qd_status = -19;

/// Every status of `QD_STATUS_LIST`: (name, value, description), in header order.
pub const QD_STATUS_LIST: &[(&str, qd_status, &str)] = &[
    ("QD_SUCCESS", 0, "success"),
    ("QD_NOT_READY", 1, "the work or event has not completed yet"),
    ("QD_ERROR_INVALID_ARGUMENT", -1, "an argument is out of its documented range"),
    ("QD_ERROR_INVALID_HANDLE", -2, "a handle is 0, forged, of the wrong type, or destroyed"),
    ("QD_ERROR_WRONG_CONTEXT", -3, "handles of different contexts were mixed in one call"),
    ("QD_ERROR_INVALID_OPERATION", -4, "the object does not allow this operation"),
    ("QD_ERROR_OUT_OF_MEMORY", -5, "host or device memory is exhausted"),
    ("QD_ERROR_OVERFLOW", -6, "a size or count overflows its arithmetic"),
    ("QD_ERROR_INVALID_ADDRESS", -7, "an address is not a live allocation of this context"),
    ("QD_ERROR_POOL_EXHAUSTED", -8, "every stream of the context's pool is leased"),
    ("QD_ERROR_NOT_FOUND", -9, "a named kernel or file does not exist"),
    ("QD_ERROR_INVALID_IMAGE", -10, "a module image cannot be loaded"),
    ("QD_ERROR_TIMING_DISABLED", -11, "an event was created without QD_EVENT_TIMING"),
    ("QD_ERROR_NOT_RECORDED", -12, "an event was never recorded"),
    ("QD_ERROR_NOT_SUPPORTED", -13, "the backend does not support this operation"),
    ("QD_ERROR_BACKEND_UNAVAILABLE", -14, "the backend or device is not available"),
    ("QD_ERROR_DEVICE_LOST", -15, "a device fault made the context unusable"),
    ("QD_ERROR_FORKED", -16, "the context was inherited across fork()"),
    ("QD_ERROR_LAUNCH_FAILED", -17, "the backend rejected the launch"),
    ("QD_ERROR_INTERNAL", -18, "an internal error; please report it"),
    ("QD_ERROR_HAZARD", -19, "validation found a hazard in this call (since 0.2)"),
];

// enum qd_backend.
/// `QD_BACKEND_DEFAULT`: the embedded default (the CPU backend).
pub const QD_BACKEND_DEFAULT: qd_backend = 0;
/// `QD_BACKEND_CPU`: asynchronous streams on host threads; always available.
pub const QD_BACKEND_CPU: qd_backend = 1;
/// `QD_BACKEND_CUDA`: NVIDIA driver, loaded at run time.
pub const QD_BACKEND_CUDA: qd_backend = 2;
/// `QD_BACKEND_HIP`: AMD HIP, loaded at run time.
pub const QD_BACKEND_HIP: qd_backend = 3;

// enum qd_stream_flags.
/// `QD_STREAM_NON_BLOCKING` (`qd_stream_desc.flags`).
pub const QD_STREAM_NON_BLOCKING: u32 = 1 << 0;

// enum qd_context_flags (since 0.2).
/// `QD_CONTEXT_VALIDATE` (`qd_context_desc.flags`): the validation mode.
pub const QD_CONTEXT_VALIDATE: u32 = 1 << 0;
/// `QD_CONTEXT_VALIDATE_FAIL`: a hazard also refuses its call with `QD_ERROR_HAZARD`.
pub const QD_CONTEXT_VALIDATE_FAIL: u32 = 1 << 1;

// enum qd_hazard_kind (since 0.2).
/// `QD_HAZARD_RACE`: a write and another access, unordered, on two streams.
pub const QD_HAZARD_RACE: qd_hazard_kind = 1;
/// `QD_HAZARD_FREE_IN_USE`: a free not ordered after an access of the block.
pub const QD_HAZARD_FREE_IN_USE: qd_hazard_kind = 2;
/// `QD_HAZARD_USE_AFTER_FREE`: an access to a block after its free was queued.
pub const QD_HAZARD_USE_AFTER_FREE: qd_hazard_kind = 3;

// enum qd_param_access (since 0.2).
/// `QD_PARAM_READ_WRITE`: the default.
pub const QD_PARAM_READ_WRITE: qd_param_access = 0;
/// `QD_PARAM_READ`: the kernel only reads the memory the parameter points to.
pub const QD_PARAM_READ: qd_param_access = 1;
/// `QD_PARAM_WRITE`: the kernel only writes it.
pub const QD_PARAM_WRITE: qd_param_access = 2;
/// `QD_PARAM_IGNORE`: not memory; not checked.
pub const QD_PARAM_IGNORE: qd_param_access = 3;
/// `QD_PARAM_PARTITIONED`: each launch touches only its own part (a data-parallel split).
pub const QD_PARAM_PARTITIONED: qd_param_access = 4;

// enum qd_event_flags.
/// `QD_EVENT_TIMING`: the event records a timestamp.
pub const QD_EVENT_TIMING: u32 = 1 << 0;

/// `QD_STRUCT_FIRST_SIZES`: (struct, first released size in bytes, version), in header order.
pub const QD_STRUCT_FIRST_SIZES: &[(&str, u32, &str)] = &[
    ("qd_context_desc", 32, "0.1"),
    ("qd_stream_desc", 16, "0.1"),
    ("qd_launch_config", 32, "0.1"),
    ("qd_task", 64, "0.1"),
    ("qd_host_kernel_info", 56, "0.1"),
    ("qd_context_stats", 128, "0.1"),
    ("qd_device_info", 168, "0.1"),
    ("qd_hazard", 80, "0.2"),
];
