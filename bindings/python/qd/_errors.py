"""Exceptions: one class per qd status, each carrying the status, its name and the message.

The class of each status, with ``Status`` and the status -> class map, is generated
(qd/_api.py, from qd.h's status list). Here is what is written by hand: ``QdError``, the base of
them all (the message, the status name, pickling); the exceptions the binding raises itself,
which derive from the class of the status C gives for the same mistake, so a caller sees one
status family whichever side caught it (docs/reliability.md, category 15); and
:func:`error_for_status`. Where Python has an idiomatic exception for the mistake
(``TypeError``, ``ValueError``, ``OverflowError``, ``MemoryError``, ``LookupError``), the class
also derives from it.

Import order: this module defines ``QdError`` before it imports qd._api, whose classes derive
from it (qd._lib imports this module first).
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Type

from . import _lib

class QdError(Exception):
    """Base of every error qd reports.

    Attributes:
        status: the qd_status (an int; negative for errors, ``1`` for :class:`NotReadyError`).
        status_name: its name from ``qd_status_name``, e.g. ``"QD_ERROR_INVALID_HANDLE"``.
        message: the cause: ``qd_last_error_message()`` for errors from the C library, or the
            binding's own sentence for mistakes it caught before calling C.
    """

    #: The status this class stands for (subclasses set it; QD_ERROR_INTERNAL here, set below).
    default_status: int

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


# The generated classes: one per status (qd/_api.py), after QdError, which they derive from.
from ._api import (  # noqa: E402
    BY_STATUS,
    EXCEPTIONS,
    BackendUnavailableError,
    DeviceLostError,
    ForkedError,
    HazardError,
    InternalError,
    InvalidAddressError,
    InvalidArgumentError,
    InvalidHandleError,
    InvalidImageError,
    InvalidOperationError,
    LaunchFailedError,
    NotFoundError,
    NotReadyError,
    NotRecordedError,
    NotSupportedError,
    OutOfMemoryError,
    PoolExhaustedError,
    QdOverflowError,
    Status,
    TimingDisabledError,
    WrongContextError,
)

QdError.default_status = Status.ERROR_INTERNAL

#: The names this module exports: the generated classes and the hand-written ones.
__all__ = sorted([cls.__name__ for cls in EXCEPTIONS] + [
    "ArgumentRangeError",
    "ArgumentTypeError",
    "CallbackError",
    "HandleTypeError",
    "HazardWarning",
    "ObjectClosedError",
    "QdError",
    "Status",
    "error_for_status",
])


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """QD_ERROR_INVALID_ARGUMENT, caught by the binding: a value of the wrong Python type
    (``None``, a str, a float where an int is needed, a read-only buffer as a copy target)."""


class ArgumentRangeError(InvalidArgumentError, OverflowError):
    """QD_ERROR_INVALID_ARGUMENT, caught by the binding: an int that does not fit the C type
    of its parameter (negative for an unsigned one, or too large). It never wraps."""


class ObjectClosedError(InvalidHandleError):
    """QD_ERROR_INVALID_HANDLE, caught by the binding: the object was closed (or released,
    joined, unloaded) before this call, so no C call was made."""


class HandleTypeError(InvalidHandleError, TypeError):
    """QD_ERROR_INVALID_HANDLE, caught by the binding: ``None`` or an object of the wrong kind
    where a qd object is required (e.g. ``stream=None``, an Event passed as ``stream=``)."""


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


#: status -> its exception class (every status of qd.h but QD_SUCCESS; generated).
_BY_STATUS: Dict[int, Type[QdError]] = BY_STATUS


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
