//! [`Error`]: one variant per `qd_status`, with the message of `qd_last_error_message()`.

use std::ffi::CStr;
use std::fmt;

/// The result of every fallible qd call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! statuses {
    ($($variant:ident = $code:ident, $doc:literal;)*) => {
        /// An error status of a qd call, with the sentence that names its cause.
        ///
        /// One variant per `qd_status` of `include/qd/qd.h` other than `QD_SUCCESS` (the header
        /// lists, per function, which of them it returns). The message is read from
        /// `qd_last_error_message()` on the calling thread right after the failing call, or
        /// written by this crate for the few checks it makes itself (those use the status C
        /// gives for the same mistake).
        ///
        /// `Send + Sync`: it holds only a `String`.
        ///
        /// ```
        /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
        /// let err = qd::Event::new(&ctx)?.elapsed_ms_since(&qd::Event::new(&ctx)?).unwrap_err();
        /// assert!(matches!(err, qd::Error::TimingDisabled(_)));
        /// assert_eq!(err.status(), qd_sys::QD_ERROR_TIMING_DISABLED);
        /// assert!(err.to_string().starts_with("QD_ERROR_TIMING_DISABLED: "));
        /// # Ok::<(), qd::Error>(())
        /// ```
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Error {
            $(#[doc = $doc] $variant(String),)*
            /// A status this crate does not know (a newer libqd); see [`Error::status`].
            Unknown(i32, String),
        }

        impl Error {
            /// The error for `status`, with `message`.
            pub fn with_message(status: i32, message: impl Into<String>) -> Error {
                let message = message.into();
                match status {
                    $(qd_sys::$code => Error::$variant(message),)*
                    other => Error::Unknown(other, message),
                }
            }

            /// The `qd_status` value, e.g. `qd_sys::QD_ERROR_INVALID_HANDLE`.
            pub fn status(&self) -> i32 {
                match self {
                    $(Error::$variant(_) => qd_sys::$code,)*
                    Error::Unknown(status, _) => *status,
                }
            }

            /// The message: the library's sentence naming the cause.
            pub fn message(&self) -> &str {
                match self {
                    $(Error::$variant(m))|* => m,
                    Error::Unknown(_, m) => m,
                }
            }

            /// The status's name, e.g. `"QD_ERROR_INVALID_HANDLE"`.
            pub fn status_name(&self) -> &'static str {
                match self {
                    $(Error::$variant(_) => stringify!($code),)*
                    Error::Unknown(..) => "QD_STATUS_UNKNOWN",
                }
            }
        }
    };
}

statuses! {
    NotReady = QD_NOT_READY, "`QD_NOT_READY`: the work or event has not completed yet (from [`crate::Event::elapsed_ms_since`]).";
    InvalidArgument = QD_ERROR_INVALID_ARGUMENT, "`QD_ERROR_INVALID_ARGUMENT`: an argument is out of its documented range.";
    InvalidHandle = QD_ERROR_INVALID_HANDLE, "`QD_ERROR_INVALID_HANDLE`: a handle is 0, forged, of the wrong type, or destroyed.";
    WrongContext = QD_ERROR_WRONG_CONTEXT, "`QD_ERROR_WRONG_CONTEXT`: objects of different contexts were mixed in one call.";
    InvalidOperation = QD_ERROR_INVALID_OPERATION, "`QD_ERROR_INVALID_OPERATION`: the object does not allow this operation.";
    OutOfMemory = QD_ERROR_OUT_OF_MEMORY, "`QD_ERROR_OUT_OF_MEMORY`: host or device memory is exhausted.";
    Overflow = QD_ERROR_OVERFLOW, "`QD_ERROR_OVERFLOW`: a size or count overflows its arithmetic.";
    InvalidAddress = QD_ERROR_INVALID_ADDRESS, "`QD_ERROR_INVALID_ADDRESS`: an address is not a live allocation of this context.";
    PoolExhausted = QD_ERROR_POOL_EXHAUSTED, "`QD_ERROR_POOL_EXHAUSTED`: every stream of the context's pool is leased.";
    NotFound = QD_ERROR_NOT_FOUND, "`QD_ERROR_NOT_FOUND`: a named kernel or file does not exist.";
    InvalidImage = QD_ERROR_INVALID_IMAGE, "`QD_ERROR_INVALID_IMAGE`: a module image cannot be loaded.";
    TimingDisabled = QD_ERROR_TIMING_DISABLED, "`QD_ERROR_TIMING_DISABLED`: an event was created without timing.";
    NotRecorded = QD_ERROR_NOT_RECORDED, "`QD_ERROR_NOT_RECORDED`: an event was never recorded.";
    NotSupported = QD_ERROR_NOT_SUPPORTED, "`QD_ERROR_NOT_SUPPORTED`: the backend does not support this operation.";
    BackendUnavailable = QD_ERROR_BACKEND_UNAVAILABLE, "`QD_ERROR_BACKEND_UNAVAILABLE`: the backend or device is not available.";
    DeviceLost = QD_ERROR_DEVICE_LOST, "`QD_ERROR_DEVICE_LOST`: a device fault made the context unusable.";
    Forked = QD_ERROR_FORKED, "`QD_ERROR_FORKED`: the context was inherited across fork().";
    LaunchFailed = QD_ERROR_LAUNCH_FAILED, "`QD_ERROR_LAUNCH_FAILED`: the backend rejected the launch.";
    Internal = QD_ERROR_INTERNAL, "`QD_ERROR_INTERNAL`: an internal error of qd; please report it.";
    Hazard = QD_ERROR_HAZARD, "`QD_ERROR_HAZARD`: the validation mode refused a call that would be a hazard (since 0.2).";
}

impl Error {
    /// The error for a status a qd call just returned on this thread, with the library's
    /// message (`qd_last_error_message()`, read at once so no later call can overwrite it).
    #[cold]
    #[inline(never)]
    pub(crate) fn from_last(status: i32) -> Error {
        // SAFETY: qd_last_error_message never returns NULL; the string lives until the next
        // failing call on this thread, and it is copied here before any other qd call.
        let msg = unsafe { CStr::from_ptr(qd_sys::qd_last_error_message()) };
        Error::with_message(status, msg.to_string_lossy().into_owned())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message())
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for `QD_SUCCESS`, else the error of `status` (positive statuses too: callers that
/// expect `QD_NOT_READY` test for it before calling this).
#[inline(always)]
pub(crate) fn check(status: i32) -> Result<()> {
    if status == qd_sys::QD_SUCCESS {
        Ok(())
    } else {
        Err(Error::from_last(status))
    }
}

/// `Ok(true)` for `QD_SUCCESS`, `Ok(false)` for `QD_NOT_READY`, else the error.
#[inline(always)]
pub(crate) fn check_ready(status: i32) -> Result<bool> {
    match status {
        qd_sys::QD_SUCCESS => Ok(true),
        qd_sys::QD_NOT_READY => Ok(false),
        other => Err(Error::from_last(other)),
    }
}
