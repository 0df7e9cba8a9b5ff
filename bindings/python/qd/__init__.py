"""qd: GPU streams and events, from Python.

A thin binding of libqd's C API (through cffi when it is importable, else ctypes) (``include/qd/qd.h``). Every call that schedules work
takes a keyword-only, required ``stream=``; omitting it or passing ``None`` raises TypeError.

Quick start (CPU backend)::

    import qd
    with qd.Context("cpu") as ctx:
        with ctx.create_stream() as s:
            buf = qd.alloc(16, stream=s)
            qd.memset(buf, 7, stream=s)
            out = bytearray(16)
            qd.memcpy(out, buf, stream=s)
        # the stream was synchronized and destroyed here; out == b"\\x07" * 16

libqd is found through $QD_LIBRARY (the full path of libqd.so), else next to this package,
else the system loader.
"""

from __future__ import annotations

from typing import Union

from . import _lib
from ._base import Backend, _backend
from ._context import (
    Context,
    ContextStatistics,
    DeviceProperties,
    device_count,
    device_properties,
    version,
)
from ._kernel import Kernel, Launcher, Module, Task, kernel_arg, launch_host_fn, launch_parallel
from ._memory import (
    DeviceArray,
    DeviceBuffer,
    HostBuffer,
    alloc,
    free,
    memcpy,
    memcpy_peer,
    memset,
)
from ._stream import Event, Stream, StreamKind
from ._graph import Graph
from ._timeline import Timeline
from ._trace import trace

trace.__module__ = __name__  # shown as qd.trace
from ._errors import (
    ArgumentRangeError,
    ArgumentTypeError,
    BackendUnavailableError,
    CallbackError,
    DeviceLostError,
    ForkedError,
    HandleTypeError,
    HazardError,
    HazardWarning,
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
    ObjectClosedError,
    OutOfMemoryError,
    PoolExhaustedError,
    QdError,
    QdOverflowError,
    Status,
    TimingDisabledError,
    WrongContextError,
)
from ._lib import HostKernelFn, HostKernelInfo, LibraryNotFoundError
from ._api import EXCEPTIONS as _EXCEPTIONS
from ._api import QD_CONDITIONAL_IF as _api_QD_CONDITIONAL_IF
from ._api import QD_CONDITIONAL_IF_ELSE as _api_QD_CONDITIONAL_IF_ELSE
from ._api import QD_CONDITIONAL_SWITCH as _api_QD_CONDITIONAL_SWITCH
from ._api import QD_CONDITIONAL_WHILE as _api_QD_CONDITIONAL_WHILE

for _cls in _EXCEPTIONS:  # the class of a status qd.h adds later is exported with no edit here
    globals().setdefault(_cls.__name__, _cls)

#: The version of this binding.
__version__ = "0.3.0"

#: The ctypes library object, with every function of qd.h declared (argtypes and restype).
lib = _lib.lib
#: How the binding calls libqd: "cffi" (ABI mode, when cffi is importable) or "ctypes"
#: (QD_PYTHON_FFI=ctypes|cffi forces one).
FFI: str = _lib.FFI
#: The path libqd was loaded from.
library_path: str = _lib.library_path


#: The kinds of a conditional (``Stream.begin_conditional``; qd.h, "Conditionals").
CONDITIONAL_IF: int = _api_QD_CONDITIONAL_IF
CONDITIONAL_IF_ELSE: int = _api_QD_CONDITIONAL_IF_ELSE
CONDITIONAL_WHILE: int = _api_QD_CONDITIONAL_WHILE
CONDITIONAL_SWITCH: int = _api_QD_CONDITIONAL_SWITCH


def backend_name(backend: Union[Backend, str, int]) -> str:
    """``qd_backend_name``: e.g. ``backend_name(Backend.CUDA) == "cuda"``; ``"unknown"`` for an
    int that names no backend.

    Raises:
        InvalidArgumentError: a string that names no backend.
        ArgumentTypeError, ArgumentRangeError: not an int, or outside ``qd_backend``'s range.
    """
    return _lib.backend_name(_backend(backend))


def status_name(status: int) -> str:
    """``qd_status_name``: e.g. ``status_name(-2) == "QD_ERROR_INVALID_HANDLE"``."""
    return _lib.status_name(status)


for _name in ("Backend", "Context", "ContextStatistics", "DeviceArray", "DeviceBuffer", "DeviceProperties",
              "Event", "Graph", "HostBuffer", "Kernel", "Launcher", "Module", "Stream", "StreamKind",
              "Task", "Timeline", "QdError", "Status", "LibraryNotFoundError", "HostKernelInfo"):
    globals()[_name].__module__ = __name__  # shown (and pickled) as qd.X
for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, (QdError, CallbackError, HazardWarning)):
        _cls.__module__ = __name__
del _name, _cls

__all__ = [
    "CONDITIONAL_IF", "CONDITIONAL_IF_ELSE", "CONDITIONAL_SWITCH", "CONDITIONAL_WHILE",
    "FFI", "ArgumentRangeError", "ArgumentTypeError", "Backend", "BackendUnavailableError",
    "CallbackError", "Context", "ContextStatistics", "DeviceArray", "DeviceBuffer", "DeviceLostError",
    "DeviceProperties", "Event", "ForkedError", "Graph", "HandleTypeError", "HazardError",
    "HazardWarning", "HostBuffer",
    "HostKernelFn", "HostKernelInfo", "InternalError", "InvalidAddressError",
    "InvalidArgumentError", "InvalidHandleError", "InvalidImageError", "InvalidOperationError",
    "Kernel", "LaunchFailedError", "Launcher", "LibraryNotFoundError", "Module",
    "NotFoundError", "NotReadyError", "NotRecordedError", "NotSupportedError",
    "ObjectClosedError", "OutOfMemoryError", "PoolExhaustedError", "QdError",
    "QdOverflowError", "Status", "Stream", "StreamKind", "Task", "Timeline", "TimingDisabledError",
    "WrongContextError", "alloc", "backend_name", "device_count", "device_properties", "free", "kernel_arg",
    "launch_host_fn", "launch_parallel", "lib", "library_path", "memcpy", "memcpy_peer", "memset",
    "status_name", "trace", "version",
]
__all__ += sorted(cls.__name__ for cls in _EXCEPTIONS if cls.__name__ not in __all__)
