"""Python host callbacks (one C trampoline for the process), callback errors, and context
destruction at collection or exit."""

from __future__ import annotations

import atexit
import builtins
import ctypes
import itertools
import sys
import threading
import warnings
import weakref
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
    HazardWarning,
    Status,
)
from ._base import _f_ctx_destroy, _f_launch_host_fn, _f_launch_host_status_fn, _f_stream_query

if TYPE_CHECKING:
    from ._context import Context


def _check_callback_errors(ctx: "Context") -> None:
    """Raise what the context's Python callbacks and host kernels raised since the last report
    (once): a CallbackError whose ``exceptions`` holds every one, in order, with the first as
    ``__cause__``, or, on Python 3.11+ with several, an ExceptionGroup of them. A HazardWarning
    that a warnings filter made an error (see _context._hazard_trampoline) is raised as itself."""
    errors = ctx._cb_errors
    if not errors:
        return
    caught = list(errors)
    errors.clear()
    first = caught[0]
    if isinstance(first, HazardWarning):
        rest = caught[1:]
        errors.extend(rest)  # reported by the next synchronize()
        raise first
    more = len(caught) - 1
    exc = CallbackError(
        f"a Python host callback or host kernel on this context raised "
        f"{type(first).__name__}: {first}" + (f" (and {more} more)" if more else ""))
    exc.exceptions = tuple(caught)
    cause: BaseException = first
    if more and _ExceptionGroup is not None:
        try:
            cause = _ExceptionGroup("the exceptions of this context's Python callbacks", caught)
        except TypeError:  # a BaseException among them (a BaseExceptionGroup then)
            cause = _BaseExceptionGroup("the exceptions of this context's Python callbacks",
                                        caught)
    raise exc from cause


_ExceptionGroup = getattr(builtins, "ExceptionGroup", None)
_BaseExceptionGroup = getattr(builtins, "BaseExceptionGroup", None)


# ----------------------------------------------------------------------------------------------
# Host callbacks: one C trampoline for the whole process. Each queued callable waits in
# _pending under an integer key (the user_data) until the trampoline pops and runs it, so it
# stays alive exactly as long as needed. A failed qd_launch_host_fn never calls it (qd.h), so
# the entry is dropped at once.
#
# A callback queued on a capturing stream is captured (qd.h, "Graphs"): every replay calls the
# same user_data again, so it is not popped. It is held by the capture's _Keep (and so by the
# graph, and by every graph updated from it) and looked up through _persistent, which holds it
# weakly: it goes away when the last graph that may still replay it lets go (_graph.py).
# ----------------------------------------------------------------------------------------------

_pending: dict = {}
_keys = itertools.count(1)
_persistent: "weakref.WeakValueDictionary[int, _Captured]" = weakref.WeakValueDictionary()


class _Captured:
    """A captured host callback: what the trampoline calls on every replay."""

    __slots__ = ("fn", "errors", "__weakref__")

    def __init__(self, fn: Callable[[], Any], errors: list) -> None:
        self.fn = fn
        self.errors = errors


class _Keep:
    """What one capture's graph keeps alive for its replays: captured callbacks and the Python
    buffers of captured copies. Shared by every graph that may replay them (update() makes the
    target share its source's); freed when the last of them lets go."""

    __slots__ = ("items", "__weakref__")

    def __init__(self) -> None:
        self.items: List[Any] = []


class _Held:
    """Per context, what the binding holds for graphs until the context is destroyed at the
    latest: the open captures (origin stream handle, _Keep), the keeps of graphs closed while
    their replays may still run (released by the next Context.synchronize), and the graphs
    themselves (weakly)."""

    __slots__ = ("captures", "retired", "graphs", "on_destroy")

    def __init__(self) -> None:
        self.captures: List[Any] = []
        self.retired: List[_Keep] = []
        self.graphs: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.on_destroy: Optional[Callable[[], Any]] = None

    def clear(self) -> None:
        """The context is destroyed: nothing of it runs any more."""
        if self.on_destroy is not None:
            self.on_destroy()
            self.on_destroy = None
        self.captures.clear()
        self.retired.clear()
        for g in list(self.graphs):
            g._keep = None
            g._launched = set()


def _trampoline(key: Optional[int]) -> None:
    try:
        entry = _pending.pop(key, None)
        if entry is None:
            captured = _persistent[key]
            entry = (captured.fn, captured.errors)
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


def _capture_keeps(stream: Any) -> Optional[List[_Keep]]:
    """The keeps of the captures ``stream`` may be queuing into, or None when it is not
    capturing. Costs one attribute read while the context has no open capture; otherwise the
    origin of a capture is known, and a stream that joined one answers qd_stream_query with
    QD_ERROR_INVALID_OPERATION (its capture is not known: every open capture keeps it)."""
    captures = stream._ctx._held.captures
    if not captures:
        return None
    captures = list(captures)
    h = stream._h
    for origin, keep in captures:
        if origin == h:
            return [keep]
    if _f_stream_query(stream._c) == Status.ERROR_INVALID_OPERATION:
        return [keep for _, keep in captures]
    return None


def _enqueue(stream: Any, fn: Callable[[], Any], errors: list) -> int:
    """qd_launch_host_fn of ``fn`` on ``stream`` (a Stream): run once, or, captured, kept by
    the capture for every replay."""
    key = next(_keys)
    keeps = _capture_keeps(stream)
    if keeps is None:
        _pending[key] = (fn, errors)
        status = _f_launch_host_fn(stream._c, _TRAMPOLINE_C, _ptr(key))
        if status:
            _pending.pop(key, None)
        return status
    captured = _Captured(fn, errors)
    _persistent[key] = captured
    status = _f_launch_host_fn(stream._c, _TRAMPOLINE_C, _ptr(key))
    if status:
        _persistent.pop(key, None)
    else:
        for keep in keeps:
            keep.items.append(captured)
    return status


# Host callbacks with status (qd_launch_host_status_fn): a second trampoline. qd calls it exactly
# once for every call that succeeded, with the status (QD_ERROR_DEVICE_LOST after a loss, by the
# context's destroy at the latest), so its entry is always popped by the call; a failed call
# never calls it, and the entry is dropped at once. qd refuses it on a capturing stream.


def _status_trampoline(stream_handle: int, status: int, key: Optional[int]) -> None:
    try:
        fn, errors, stream = _pending.pop(key)
    except BaseException:  # interpreter shutdown, or an unknown key: nothing to run
        return
    try:
        fn(stream, status)  # an int: a qd.Status value
    except BaseException as exc:  # reported by the next synchronize(); never printed here
        try:
            errors.append(exc)
        except BaseException:
            pass


_STATUS_TRAMPOLINE = _lib.HostStatusFn(_status_trampoline)
# Never freed, as _TRAMPOLINE: C may call it until every context is gone.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_STATUS_TRAMPOLINE))
_STATUS_TRAMPOLINE_C = _lib.fnptr(_STATUS_TRAMPOLINE, "qd_host_status_fn")


def _enqueue_status(stream: Any, fn: Callable[[Any, int], Any], errors: list) -> int:
    """qd_launch_host_status_fn of ``fn`` on ``stream`` (a Stream): ``fn(stream, status)`` is
    called once, whatever happens to the context."""
    key = next(_keys)
    _pending[key] = (fn, errors, stream)
    status = _f_launch_host_status_fn(stream._c, _STATUS_TRAMPOLINE_C, _ptr(key))
    if status:
        _pending.pop(key, None)
    return status


def _drop_unrun(errors: list) -> None:
    """After a context's destroy (which drained it): callbacks of that context still waiting
    never run (the context was lost, or forked, before they could); let go of them and of what
    they hold (a copy's Python buffers)."""
    for key in [k for k, v in list(_pending.items()) if v[1] is errors]:
        _pending.pop(key, None)


# ----------------------------------------------------------------------------------------------
# Context destruction: explicit (close), by garbage collection, or at interpreter exit.
# weakref.finalize runs at exit (atexit) for every context still alive, while other threads can
# still take the GIL, so host callbacks still queued run to completion before the interpreter
# goes away and no qd thread ever calls into a finalizing interpreter.
#
# A context whose last reference dies inside one of its own host callbacks is finalized on that
# qd worker, which then hands the destroy to a helper thread. Exit waits for every destroy under
# way on any thread, not only for the helpers already started: between qd_context_destroy's
# refusal (the GIL released) and the helper's start, the worker must still take the GIL back,
# and a worker that finds the interpreter finalized is ended by Python under libqd's feet
# (std::terminate).
# ----------------------------------------------------------------------------------------------

_deferred = threading.Condition()  # guards _destroying and _deferred_threads
_destroying = [0]  # destroys under way on any thread
_deferred_threads: List[threading.Thread] = []


def _destroy_context(handle: int, keepalive: list, errors: list, held: _Held) -> None:
    try:
        with _deferred:
            _destroying[0] += 1
    except BaseException:  # module teardown: nothing left to count with
        return
    try:
        status = _f_ctx_destroy(_lib.H(handle))
        if status == Status.ERROR_INVALID_OPERATION:
            # The last reference died inside a host callback or host kernel of this very
            # context (qd refuses to drain from its own worker): destroy it from a helper thread.
            thread = threading.Thread(target=_destroy_context, args=(handle, keepalive, errors, held),
                                      name=f"qd-destroy-{handle:#x}", daemon=True)
            with _deferred:
                _deferred_threads.append(thread)
            thread.start()
            return
        held.clear()
        _drop_unrun(errors)
        _warn_unreported(errors, raise_errors=False)
    except BaseException:
        pass
    finally:
        try:
            with _deferred:
                _destroying[0] -= 1
                _deferred.notify_all()
        except BaseException:
            pass


def _warn_unreported(errors: list, raise_errors: bool = True) -> None:
    """A context is gone with callback exceptions (or hazards) no synchronize() reported: say
    so (a RuntimeWarning) rather than drop them silently. Where a filter makes the warning an
    error and nothing can raise it (a finalizer: ``raise_errors`` False), it goes to stderr."""
    if not errors:
        return
    first, more = errors[0], len(errors) - 1
    errors.clear()
    what = ("qd: the validation mode reported a hazard" if isinstance(first, HazardWarning)
            else f"qd: a Python host callback or host kernel raised {type(first).__name__}")
    message = (f"{what}: {first}" + (f" (and {more} more)" if more else "")
               + "; no synchronize() reported it before its context was destroyed")
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    except Warning:
        if raise_errors:
            raise
        sys.stderr.write(f"RuntimeWarning: {message}\n")


def _join_deferred() -> None:
    """At exit: wait until no context destroy is under way on any thread and every helper
    thread has finished."""
    try:
        while True:
            with _deferred:
                while _destroying[0] and not _deferred_threads:
                    _deferred.wait()
                if not _deferred_threads:
                    return
                thread = _deferred_threads.pop()
            thread.join()
    except BaseException:
        pass


atexit.register(_join_deferred)  # runs after weakref.finalize's exit hook (LIFO)
