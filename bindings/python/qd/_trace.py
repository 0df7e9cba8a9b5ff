"""``qd.trace(path)``: the timeline trace as a context manager (qd.h, "Timeline trace")."""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, List, Optional, Union

from ._errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from ._context import Context

# Every open Context of this process (the binding's), and the qd.trace blocks that cover every
# context: a Context made inside such a block is traced from its creation.
_live: "weakref.WeakSet[Context]" = weakref.WeakSet()
_all_blocks: List["trace"] = []
_lock = threading.Lock()


def _new_context(ctx: "Context") -> None:
    with _lock:
        _live.add(ctx)
        blocks = list(_all_blocks)
    for block in blocks:
        block._cover(ctx)


def _check_writable(path: str) -> None:
    """What qd_trace_start checks of ``path``, so that a block over no open context fails on
    entry rather than in the first ``qd.Context()`` made inside it: not a directory, and its
    ``.tmp`` (through which the file is written) can be created."""
    if os.path.isdir(path):
        raise InvalidArgumentError(f"trace path '{path}' is a directory")
    tmp = path + ".tmp"
    try:
        with open(tmp, "w"):
            pass
    except OSError as exc:
        raise InvalidArgumentError(
            f"trace path '{tmp}' cannot be written: {exc.strerror or exc}") from None
    try:
        os.remove(tmp)
    except OSError:
        pass


class trace:
    """Trace qd's work into a Chrome trace JSON file that Perfetto (ui.perfetto.dev) and
    chrome://tracing open; ``qd trace view FILE.json -o FILE.html`` draws it as a page.

    ``with qd.trace("x.json"):`` traces every context this process has open when the block
    starts and every context created inside it, as ``torch.profiler.profile()`` covers all
    the work in its block. ``with qd.trace("x.json", ctx, ...):`` traces only the contexts
    named. Each traced context is a process in the file, each stream a track.

    The file is written when the block ends (``Context.stop_trace`` on every covered context
    still open; one closed inside the block wrote its part when it closed). ``flush()`` writes
    the trace so far without ending it. A context can be in one trace at a time: starting a
    second trace on it raises InvalidOperationError (and so does a block when ``QD_TRACE`` is
    set, which already traces every context).

    Raises (on entry):
        InvalidArgumentError: ``path`` cannot be written (also with no context open yet);
            every context the block had started is stopped again.
        InvalidOperationError: a covered context is already being traced.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], *contexts: "Context") -> None:
        self.path = os.fspath(path)
        self._named = list(contexts)
        self._covered: List["Context"] = []
        self._cover_lock = threading.Lock()
        self._active = False

    def __enter__(self) -> "trace":
        _check_writable(self.path)  # also when no context is open yet
        try:
            if self._named:
                for ctx in self._named:
                    self._start(ctx)
            else:
                with _lock:
                    present = [c for c in list(_live) if not c.closed]
                    _all_blocks.append(self)
                self._active = True
                for ctx in present:
                    self._start(ctx)
            self._active = True
        except BaseException:
            self._end(quiet=True)
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._end(quiet=exc_info[0] is not None)

    @property
    def contexts(self) -> List["Context"]:
        """The contexts this block traces (so far)."""
        with self._cover_lock:
            return list(self._covered)

    def flush(self) -> None:
        """Write the trace so far (``Context.flush_trace`` on every covered open context)."""
        for ctx in self.contexts:
            if not ctx.closed:
                ctx.flush_trace()

    def _start(self, ctx: "Context") -> None:
        ctx.start_trace(self.path)
        with self._cover_lock:
            self._covered.append(ctx)

    def _cover(self, ctx: "Context") -> None:
        # A context created inside an all-contexts block; a failure (the path became
        # unwritable) is raised from its constructor, which closes it.
        if self._active:
            self._start(ctx)

    def _end(self, quiet: bool) -> None:
        with _lock:
            if self in _all_blocks:
                _all_blocks.remove(self)
        self._active = False
        first: Optional[BaseException] = None
        for ctx in self.contexts:
            if ctx.closed:
                continue  # its close stopped the trace and wrote its part
            try:
                ctx.stop_trace()
            except BaseException as exc:  # stop every context before raising
                if first is None:
                    first = exc
        with self._cover_lock:
            self._covered.clear()
        if first is not None and not quiet:
            raise first
