"""Exceptions: one class per qd status, each carrying the status, its name and the message.

Errors the binding detects before calling C (a closed object, ``stream=None``, an int that does
not fit its C type) raise the class of the status the C API gives for the same mistake, so a
caller sees one status family whichever side caught it (docs/reliability.md, category 15). Where Python has
an idiomatic exception for the mistake (``TypeError``, ``ValueError``, ``OverflowError``,
``MemoryError``, ``LookupError``), the class also derives from it.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Type

from . import _lib

__all__ = [
    "ArgumentRangeError",
    "ArgumentTypeError",
    "BackendUnavailableError",
    "CallbackError",
    "DeviceLostError",
    "ForkedError",
    "HandleTypeError",
    "InternalError",
    "InvalidAddressError",
    "InvalidArgumentError",
    "InvalidHandleError",
    "InvalidImageError",
    "InvalidOperationError",
    "LaunchFailedError",
    "HazardError",
    "HazardWarning",
    "NotFoundError",
    "NotReadyError",
    "NotRecordedError",
    "NotSupportedError",
    "ObjectClosedError",
    "OutOfMemoryError",
    "PoolExhaustedError",
    "QdError",
    "QdOverflowError",
    "TimingDisabledError",
    "WrongContextError",
    "Status",
    "error_for_status",
]


class Status:
    """The qd_status values of qd.h (QD_STATUS_LIST)."""

    SUCCESS = 0
    NOT_READY = 1
    ERROR_INVALID_ARGUMENT = -1
    ERROR_INVALID_HANDLE = -2
    ERROR_WRONG_CONTEXT = -3
    ERROR_INVALID_OPERATION = -4
    ERROR_OUT_OF_MEMORY = -5
    ERROR_OVERFLOW = -6
    ERROR_INVALID_ADDRESS = -7
    ERROR_POOL_EXHAUSTED = -8
    ERROR_NOT_FOUND = -9
    ERROR_INVALID_IMAGE = -10
    ERROR_TIMING_DISABLED = -11
    ERROR_NOT_RECORDED = -12
    ERROR_NOT_SUPPORTED = -13
    ERROR_BACKEND_UNAVAILABLE = -14
    ERROR_DEVICE_LOST = -15
    ERROR_FORKED = -16
    ERROR_LAUNCH_FAILED = -17
    ERROR_INTERNAL = -18
    ERROR_HAZARD = -19  # since 0.2


class QdError(Exception):
    """Base of every error qd reports.

    Attributes:
        status: the qd_status (an int; negative for errors, ``1`` for :class:`NotReadyError`).
        status_name: its name from ``qd_status_name``, e.g. ``"QD_ERROR_INVALID_HANDLE"``.
        message: the cause: ``qd_last_error_message()`` for errors from the C library, or the
            binding's own sentence for mistakes it caught before calling C.
    """

    #: The status this class stands for (subclasses set it).
    default_status: int = Status.ERROR_INTERNAL

    def __init__(self, message: str = "", status: Optional[int] = None) -> None:
        self.status: int = self.default_status if status is None else status
        try:
            self.status_name: str = _lib.status_name(self.status)
        except Exception:  # library gone at interpreter shutdown: keep the number
            self.status_name = f"qd_status {self.status}"
        self.message: str = message
        super().__init__(f"{self.status_name}: {message}" if message else self.status_name)

    def __reduce__(self):  # picklable across processes (multiprocessing)
        return (_rebuild, (type(self), self.message, self.status))


def _rebuild(cls: Type["QdError"], message: str, status: int) -> "QdError":
    return cls(message, status)


class NotReadyError(QdError):
    """QD_NOT_READY where a result needs completed work (e.g. Event.elapsed_ms too early)."""

    default_status = Status.NOT_READY


class InvalidArgumentError(QdError, ValueError):
    """QD_ERROR_INVALID_ARGUMENT: an argument is out of its documented range."""

    default_status = Status.ERROR_INVALID_ARGUMENT


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """QD_ERROR_INVALID_ARGUMENT, caught by the binding: a value of the wrong Python type
    (``None``, a str, a float where an int is needed, a read-only buffer as a copy target)."""


class ArgumentRangeError(InvalidArgumentError, OverflowError):
    """QD_ERROR_INVALID_ARGUMENT, caught by the binding: an int that does not fit the C type
    of its parameter (negative for an unsigned one, or too large). It never wraps."""


class InvalidHandleError(QdError):
    """QD_ERROR_INVALID_HANDLE: a handle is 0, forged, of the wrong type, or destroyed."""

    default_status = Status.ERROR_INVALID_HANDLE


class ObjectClosedError(InvalidHandleError):
    """QD_ERROR_INVALID_HANDLE, caught by the binding: the object was closed (or released,
    joined, unloaded) before this call, so no C call was made."""


class HandleTypeError(InvalidHandleError, TypeError):
    """QD_ERROR_INVALID_HANDLE, caught by the binding: ``None`` or an object of the wrong kind
    where a qd object is required (e.g. ``stream=None``, an Event passed as ``stream=``)."""


class WrongContextError(QdError, ValueError):
    """QD_ERROR_WRONG_CONTEXT: objects of different contexts were mixed in one call."""

    default_status = Status.ERROR_WRONG_CONTEXT


class InvalidOperationError(QdError):
    """QD_ERROR_INVALID_OPERATION: the object does not allow this operation."""

    default_status = Status.ERROR_INVALID_OPERATION


class OutOfMemoryError(QdError, MemoryError):
    """QD_ERROR_OUT_OF_MEMORY: host or device memory is exhausted."""

    default_status = Status.ERROR_OUT_OF_MEMORY


class QdOverflowError(QdError, OverflowError):
    """QD_ERROR_OVERFLOW: a size or count overflows its arithmetic."""

    default_status = Status.ERROR_OVERFLOW


class InvalidAddressError(QdError, ValueError):
    """QD_ERROR_INVALID_ADDRESS: an address is not a live allocation, or a range runs past
    the end of its allocation (or of a Python buffer, which the binding checks itself)."""

    default_status = Status.ERROR_INVALID_ADDRESS


class PoolExhaustedError(QdError):
    """QD_ERROR_POOL_EXHAUSTED: every stream of the context's pool is leased."""

    default_status = Status.ERROR_POOL_EXHAUSTED


class NotFoundError(QdError, LookupError):
    """QD_ERROR_NOT_FOUND: a named kernel or file does not exist."""

    default_status = Status.ERROR_NOT_FOUND


class InvalidImageError(QdError):
    """QD_ERROR_INVALID_IMAGE: a module image cannot be loaded."""

    default_status = Status.ERROR_INVALID_IMAGE


class TimingDisabledError(QdError):
    """QD_ERROR_TIMING_DISABLED: an event was created without timing."""

    default_status = Status.ERROR_TIMING_DISABLED


class NotRecordedError(QdError):
    """QD_ERROR_NOT_RECORDED: an event was never recorded."""

    default_status = Status.ERROR_NOT_RECORDED


class NotSupportedError(QdError):
    """QD_ERROR_NOT_SUPPORTED: the backend does not support this operation."""

    default_status = Status.ERROR_NOT_SUPPORTED


class BackendUnavailableError(QdError):
    """QD_ERROR_BACKEND_UNAVAILABLE: the backend or device is not available."""

    default_status = Status.ERROR_BACKEND_UNAVAILABLE


class DeviceLostError(QdError):
    """QD_ERROR_DEVICE_LOST: a device fault made the context unusable."""

    default_status = Status.ERROR_DEVICE_LOST


class ForkedError(QdError):
    """QD_ERROR_FORKED: the context was inherited across fork()."""

    default_status = Status.ERROR_FORKED


class LaunchFailedError(QdError):
    """QD_ERROR_LAUNCH_FAILED: the backend rejected the launch."""

    default_status = Status.ERROR_LAUNCH_FAILED


class InternalError(QdError):
    """QD_ERROR_INTERNAL: an internal error of qd; please report it."""

    default_status = Status.ERROR_INTERNAL


class HazardError(QdError):
    """QD_ERROR_HAZARD: the validation mode found a hazard in this call and refused it
    (``Context(validate="raise")``); the message is the report."""

    default_status = Status.ERROR_HAZARD


class HazardWarning(UserWarning):
    """A hazard the validation mode reported (``Context(validate=True)``): an unsynchronised
    cross-stream access, a free while in use, or a use after free. The message is qd's report,
    naming both operations, their streams and the allocation."""


class CallbackError(QdError, RuntimeError):
    """A Python host callback or host kernel raised. Reported by the next ``synchronize()`` of
    any stream, event or the context it ran on, once. ``exceptions`` holds every exception
    raised since the last report, in order; ``__cause__`` is the exception when there was one,
    and, when there were several, an ``ExceptionGroup`` of them on Python 3.11+ (the first on
    older Pythons).

    Not a qd status: the C library never saw the exception, so ``status`` is 0 (``QD_SUCCESS``,
    what the C call returned) and ``status_name`` is ``"CallbackError"``. It is a ``QdError``
    (``except qd.QdError`` catches it) and a ``RuntimeError``.
    """

    default_status = Status.SUCCESS

    def __init__(self, message: str = "", status: Optional[int] = None) -> None:
        Exception.__init__(self, message)
        self.status = Status.SUCCESS
        self.status_name = "CallbackError"
        self.message = message
        #: Every exception reported by this error, in the order they were raised.
        self.exceptions: Tuple[BaseException, ...] = ()


_BY_STATUS: Dict[int, Type[QdError]] = {
    cls.default_status: cls
    for cls in (
        NotReadyError, InvalidArgumentError, InvalidHandleError, WrongContextError,
        InvalidOperationError, OutOfMemoryError, QdOverflowError, InvalidAddressError,
        PoolExhaustedError, NotFoundError, InvalidImageError, TimingDisabledError,
        NotRecordedError, NotSupportedError, BackendUnavailableError, DeviceLostError,
        ForkedError, LaunchFailedError, InternalError, HazardError,
    )
}


def error_for_status(status: int, message: Optional[str] = None) -> QdError:
    """The exception for a status returned by a C call made on this thread just now.

    ``message`` defaults to ``qd_last_error_message()``, which is only meaningful right after
    the failing call, on the same thread.
    """
    if message is None:
        if status >= 0:
            # Not an error (QD_NOT_READY): the C library wrote no message, and the one it has
            # is some earlier call's.
            message = _NOT_AN_ERROR.get(status, "")
        else:
            try:
                message = _lib.last_error_message()
            except Exception:
                message = ""
            if status == Status.ERROR_POOL_EXHAUSTED:
                message = message.replace("qd_context_desc.stream_pool_size",
                                          "qd.Context(stream_pool_size=...)")
    return _BY_STATUS.get(status, QdError)(message, status)


#: The binding's own words for the statuses that are not errors.
_NOT_AN_ERROR: Dict[int, str] = {
    Status.NOT_READY: "the work this result needs has not completed yet (query again, or "
                      "synchronize first)",
}
