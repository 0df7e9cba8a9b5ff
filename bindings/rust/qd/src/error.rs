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

// The table of statuses, one `Variant = QD_STATUS, "doc";` line each, generated from
// abi/qd-api.json by abi/gen.
include!("status_gen.rs");

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
