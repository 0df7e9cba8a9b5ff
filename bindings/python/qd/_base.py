"""What every part of the binding shares: limits, the hot-path C functions, argument
conversion to C types, error construction, and the Backend enum.

The binding's rule: one binding call is one C call, plus error translation, plus ownership
(docs/design.md, principle 8). The few exceptions are written next to the code:
``Context.get_active_stream`` answers from a per-thread record of what this binding set (see its
docstring), and copies that involve a Python buffer queue a second, internal host callback that
keeps the buffer alive until the copy ran.

The rule for arguments (README, "Argument validation"): an int is passed to C only if it fits the
C type of its parameter; otherwise ArgumentRangeError is raised before any C call.
"""

from __future__ import annotations

import enum
import operator
from ctypes import (
    c_uint32,
    c_uint64,
)
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Optional,
    Union,
)

from . import _api, _lib
from ._errors import (
    ArgumentRangeError,
    ArgumentTypeError,
    HandleTypeError,
    InvalidArgumentError,
    ObjectClosedError,
    QdError,
    Status,
    error_for_status,
)

if TYPE_CHECKING:
    from ._context import Context


_U8_MAX = 0xFF
_U32_MAX = 0xFFFF_FFFF
_U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
#: QD_MAX_ARGS; more arguments are passed on to C, which rejects them.
MAX_ARGS = _api.QD_MAX_ARGS
#: The largest stream pool qd_context_desc allows ("at most 4096").
_MAX_POOL = 4096


class _NoCopy:
    """Refuses copy.copy, copy.deepcopy and pickle with a TypeError that says why: the object
    owns (or stands for) a qd object, and a second Python owner would destroy it under the
    first. Share the object itself instead."""

    __slots__ = ()

    def _no_copy(self, what: str) -> TypeError:
        name = type(self).__name__
        return TypeError(
            f"a qd.{name} cannot be {what}: it stands for a qd object that only this Python "
            f"object owns (pass the qd.{name} itself around instead)")

    def __copy__(self) -> Any:
        raise self._no_copy("copied")

    def __deepcopy__(self, memo: Any) -> Any:
        raise self._no_copy("copied")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise self._no_copy("pickled")

    def __reduce__(self) -> Any:
        raise self._no_copy("pickled")


# Hot-path copies of the C functions, without argtypes (see _lib.raw).
_f_ctx_destroy = _lib.raw("qd_context_destroy")
_f_ctx_sync = _lib.raw("qd_context_synchronize")
_f_stream_destroy = _lib.raw("qd_stream_destroy")
_f_stream_sync = _lib.raw("qd_stream_synchronize")
_f_stream_query = _lib.raw("qd_stream_query")
_f_stream_wait = _lib.raw("qd_stream_wait_event")
# Bookkeeping calls that never wait: with ctypes they keep the GIL (see _lib.raw_gil).
_f_acquire = _lib.raw_gil("qd_stream_acquire")
_f_release = _lib.raw_gil("qd_stream_release")
_f_set_active = _lib.raw_gil("qd_stream_set_active")
_f_get_active = _lib.raw_gil("qd_stream_get_active")
_f_event_destroy = _lib.raw("qd_event_destroy")
_f_event_record = _lib.raw("qd_event_record")
_f_event_query = _lib.raw("qd_event_query")
_f_event_sync = _lib.raw("qd_event_synchronize")
_f_module_unload = _lib.raw("qd_module_unload")
_f_kernel_destroy = _lib.raw("qd_kernel_destroy")
_f_launch = _lib.raw("qd_launch")
_f_launch_parallel = _lib.raw("qd_launch_parallel")
_f_launch_ex = _lib.raw("qd_launch_ex")
_f_launch_host_fn = _lib.raw("qd_launch_host_fn")
_f_launch_host_status_fn = _lib.raw("qd_launch_host_status_fn")
_f_alloc = _lib.raw("qd_mem_alloc_async")
_f_free = _lib.raw("qd_mem_free_async")
_f_memcpy = _lib.raw("qd_memcpy_async")
_f_memset = _lib.raw("qd_memset_async")
_f_memcpy_peer = _lib.raw("qd_memcpy_peer_async")

_C_U32 = [_lib.U32(i) for i in range(MAX_ARGS + 1)]  # shared, never mutated


# ----------------------------------------------------------------------------------------------
# Argument conversion. The rule (README, "Argument validation"): an int is passed to C only if
# it fits the C type of its parameter; otherwise ArgumentRangeError (QD_ERROR_INVALID_ARGUMENT,
# also an OverflowError) is raised before any C call. Nothing ever wraps. A value that fits is
# passed unchanged and the C library decides (2**64-1 bytes -> QD_ERROR_OVERFLOW, ...).
# ----------------------------------------------------------------------------------------------


def _int(value: Any, lo: int, hi: int, ctype: str, what: str) -> int:
    if type(value) is not int:
        if value is None or isinstance(value, (float, complex, str, bytes, bytearray)):
            raise ArgumentTypeError(f"{what} must be an int, not {type(value).__name__}")
        try:
            value = operator.index(value)
        except TypeError:
            raise ArgumentTypeError(
                f"{what} must be an int, not {type(value).__name__}") from None
    if value < lo or value > hi:
        raise ArgumentRangeError(
            f"{what} = {value} does not fit the C type {ctype} (range {lo}..{hi}); "
            "qd never wraps out-of-range values")
    return value


def _index(value: Any, what: str) -> int:
    """An int, or an int-like value (``__index__``: a NumPy integer), as an int; any other
    Python type is ArgumentTypeError (the range is the caller's to check)."""
    if type(value) is int:
        return value
    if value is None or isinstance(value, (float, complex, str, bytes, bytearray)):
        raise ArgumentTypeError(f"{what} must be an int, not {type(value).__name__}")
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{what} must be an int, not {type(value).__name__}") from None


def _u64(value: Any, what: str) -> int:
    if type(value) is int and 0 <= value <= _U64_MAX:
        return value
    return _int(value, 0, _U64_MAX, "uint64_t", what)


def _u32(value: Any, what: str) -> int:
    if type(value) is int and 0 <= value <= _U32_MAX:
        return value
    return _int(value, 0, _U32_MAX, "uint32_t", what)


def _err(status: int, ctx: Optional["Context"] = None) -> QdError:
    """The exception for a failed C call (read the message before anything else runs)."""
    exc = error_for_status(status)
    if ctx is not None:
        try:
            if status == Status.ERROR_INVALID_HANDLE and not ctx._h:
                # The call passed its closed check and the context closed before C resolved
                # the handle (another thread): the same exception as a call made after it.
                exc = ObjectClosedError(exc.message + " (its qd.Context was closed)", status)
            elif status == Status.ERROR_DEVICE_LOST and ctx._cb_errors:
                exc.__cause__ = ctx._cb_errors[0]  # reported here: not again, nor warned about
                ctx._cb_errors.clear()
        except Exception:
            pass
    return exc


def _stream_type_error(stream: Any) -> QdError:
    if stream is None:
        return HandleTypeError(
            "stream is required: pass stream=<qd.Stream> (e.g. ctx.default_stream); qd never "
            "falls back to a default stream")
    return HandleTypeError(f"stream= must be a qd.Stream, not {type(stream).__name__} "
                           "(import foreign streams with qd.Stream.from_external)")


# ----------------------------------------------------------------------------------------------
# Devices, version
# ----------------------------------------------------------------------------------------------


class Backend(enum.IntEnum):
    """``qd_backend``. ``Context(backend=...)`` also accepts the names of :attr:`label`."""

    DEFAULT = 0  #: the embedded default: the CPU backend
    CPU = 1
    CUDA = 2
    HIP = 3

    @property
    def label(self) -> str:
        """libqd's name of the backend (``qd_backend_name``): ``"cpu"``, ``"cuda"``, ``"hip"``,
        ``"default"``."""
        return _lib.backend_name(self.value)


def _library_backends() -> Dict[str, int]:
    """Every backend libqd knows, by its name (qd_backend_name numbers them from 1 up)."""
    names = {_lib.backend_name(Backend.DEFAULT): int(Backend.DEFAULT)}
    number = int(Backend.CPU)
    while (name := _lib.backend_name(number)) != "unknown":
        names[name] = number
        number += 1
    return names


_BACKENDS_BY_NAME = _library_backends()


def _backend(value: Union[Backend, str, int]) -> int:
    if isinstance(value, str):
        number = _BACKENDS_BY_NAME.get(value.lower())
        if number is None:
            names = ", ".join(repr(name) for name in _BACKENDS_BY_NAME)
            raise InvalidArgumentError(f"unknown backend {value!r}: use one of {names}")
        return number
    return _int(value, _I32_MIN, _I32_MAX, "qd_backend", "backend")


_C_ZERO = _lib.H(0)  # the _c of every closed object (C rejects handle 0)
