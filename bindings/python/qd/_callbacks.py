"""Python host callbacks (one C trampoline for the process), callback errors, and context
destruction at collection or exit."""

from __future__ import annotations

import atexit
import ctypes
import itertools
import threading
import warnings
from ctypes import (
    c_uint64,
    c_void_p,
)
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    List,
    Optional,
)

from . import _lib
from ._errors import (
    CallbackError,
    Status,
)
from ._base import _f_ctx_destroy, _f_launch_host_fn

if TYPE_CHECKING:
    from ._context import Context


def _check_callback_errors(ctx: "Context") -> None:
    errors = ctx._cb_errors
    if errors:
        first = errors.pop(0)
        more = len(errors)
        errors.clear()
        raise CallbackError(
            f"a Python host callback or host kernel on this context raised "
            f"{type(first).__name__}: {first}" + (f" (and {more} more)" if more else "")
        ) from first


# ----------------------------------------------------------------------------------------------
# Host callbacks: one C trampoline for the whole process. Each queued callable waits in
# _pending under an integer key (the user_data) until the trampoline pops and runs it, so it
# stays alive exactly as long as needed. A failed qd_launch_host_fn never calls it (qd.h), so
# the entry is dropped at once.
# ----------------------------------------------------------------------------------------------

_pending: dict = {}
_keys = itertools.count(1)
# Callbacks a graph captured (qd.h, "Graphs"): every replay calls the same user_data again, so
# they are not popped; they live until their context is destroyed (key -> (fn, errors, ctx)).
_persistent: dict = {}


def _trampoline(key: Optional[int]) -> None:
    try:
        entry = _pending.pop(key, None)
        if entry is None:
            entry = _persistent[key][:2]
        fn, errors = entry
    except BaseException:  # interpreter shutdown, or an unknown key: nothing to run
        return
    try:
        fn()
    except BaseException as exc:  # reported by the next synchronize(); never printed here
        try:
            errors.append(exc)
        except BaseException:
            pass


_TRAMPOLINE = _lib.HostFn(_trampoline)
# Never freed, not even by module teardown: C may hold this pointer until every context is gone.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_TRAMPOLINE))
_TRAMPOLINE_C = _lib.fnptr(_TRAMPOLINE, "qd_host_fn")  # as the FFI in use passes it
_ptr = _lib.ptr


def _capture_mark() -> int:
    """A key below every callback queued from now on (Stream.capture() on entry)."""
    return next(_keys)


def _capture_keep(start: int, ctx_handle: int) -> None:
    """At the end of a capture: the callbacks queued since ``start`` that have not run were
    captured (captured work never runs during its capture), so replays call them again. A
    callback queued meanwhile on another stream that simply has not run yet is kept too; it
    still runs exactly once, and is dropped with its context."""
    end = next(_keys)
    for key in [k for k in list(_pending) if start < k < end]:
        entry = _pending.pop(key, None)
        if entry is not None:
            _persistent[key] = (entry[0], entry[1], ctx_handle)


def _drop_persistent(ctx_handle: int) -> None:
    for key in [k for k, v in list(_persistent.items()) if v[2] == ctx_handle]:
        _persistent.pop(key, None)


def _enqueue(stream_c: c_uint64, fn: Callable[[], Any], errors: list) -> int:
    key = next(_keys)
    _pending[key] = (fn, errors)
    status = _f_launch_host_fn(stream_c, _TRAMPOLINE_C, _ptr(key))
    if status:
        _pending.pop(key, None)
    return status


# ----------------------------------------------------------------------------------------------
# Context destruction: explicit (close), by garbage collection, or at interpreter exit.
# weakref.finalize runs at exit (atexit) for every context still alive, while other threads can
# still take the GIL, so host callbacks still queued run to completion before the interpreter
# goes away and no qd thread ever calls into a finalizing interpreter.
# ----------------------------------------------------------------------------------------------

_deferred_lock = threading.Lock()
_deferred_threads: List[threading.Thread] = []


def _destroy_context(handle: int, keepalive: list, errors: list) -> None:
    try:
        status = _f_ctx_destroy(_lib.H(handle))
        if status == Status.ERROR_INVALID_OPERATION:
            # The last reference died inside a host callback or host kernel of this very
            # context (qd refuses to drain from its own worker): destroy it from a helper thread.
            thread = threading.Thread(target=_destroy_context, args=(handle, keepalive, errors),
                                      name=f"qd-destroy-{handle:#x}", daemon=True)
            with _deferred_lock:
                _deferred_threads.append(thread)
            thread.start()
            return
        _drop_persistent(handle)
        _warn_unreported(errors)
    except BaseException:
        pass


def _warn_unreported(errors: list) -> None:
    """A context is gone with callback exceptions no synchronize() reported: say so (a
    RuntimeWarning) rather than drop them silently."""
    if not errors:
        return
    first, more = errors[0], len(errors) - 1
    errors.clear()
    warnings.warn(
        f"qd: a Python host callback or host kernel raised {type(first).__name__}: {first}"
        + (f" (and {more} more)" if more else "")
        + "; no synchronize() reported it before its context was destroyed",
        RuntimeWarning, stacklevel=2)


def _join_deferred() -> None:
    try:
        while True:
            with _deferred_lock:
                if not _deferred_threads:
                    return
                thread = _deferred_threads.pop()
            thread.join()
    except BaseException:
        pass


atexit.register(_join_deferred)  # runs after weakref.finalize's exit hook (LIFO)
