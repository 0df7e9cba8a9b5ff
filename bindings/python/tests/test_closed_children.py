"""After ``ctx.close()``, every object the context owns refuses before any C call (README,
"Ownership"): ``closed`` is True, ``handle`` 0, and every public method and property of its
class raises ``ObjectClosedError`` without calling C; ``close()`` (and the finalizer) makes no
C call at all. The methods are read from the classes themselves, so a method added later is
covered with no edit here (a new required parameter needs its value in ``_ARGUMENTS``, and the
test says so).

"No C call" is checked on this thread's ``qd_last_error_message()``: every C call with a handle
of a closed context fails and writes it, so a message left as this test set it means no call
was made. The suite runs in both FFI modes and with and without ``qd._speedups``
(tools/test-all), so the compiled launch and record refuse here too. The walks run on the CPU
backend and, where a CUDA device and a PTX image of the test kernels are found (as in
test_gpu_interop.py), on CUDA too (with a borrowed stream); otherwise those skip, saying why."""

from __future__ import annotations

import gc
import inspect
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

import qd
from qd import _lib
from test_gpu_interop import CUDA_REASON, ptx  # noqa: F401 (the PTX image fixture)

_SENTINEL_MESSAGE = "count is NULL"  # what qd_device_count(999, NULL) writes


def _reset_message() -> None:
    _lib.C.qd_device_count(999, _lib.NULL)
    assert _lib.last_error_message() == _SENTINEL_MESSAGE


def _no_c_call(what: str) -> None:
    message = _lib.last_error_message()
    assert message == _SENTINEL_MESSAGE, f"{what} called C after its context closed: {message!r}"


# Methods that may return on a closed object: closing again does nothing, and these open a
# `with` block whose entry is what refuses (checked on the object they return).
_MAY_RETURN = {"close", "release", "unload"}
_RETURNS_SCOPE = {"capture", "conditional"}
# Python's protocols a closed object must refuse too (the other dunders call no C).
_PROTOCOLS = ("__cuda_stream__", "__call__", "__enter__", "__dlpack__", "__dlpack_device__")


def _public_members(cls: type) -> Iterator[Tuple[str, Any]]:
    """(name, static attribute) of every public method and property of ``cls``, and of the
    protocols in _PROTOCOLS it defines; not class or static methods (they take no instance)."""
    for name in sorted(dir(cls)):
        if name.startswith("_") and name not in _PROTOCOLS:
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, (classmethod, staticmethod)):
            continue
        if isinstance(attr, property) or callable(attr):
            yield name, attr


@pytest.fixture
def target(request: pytest.FixtureRequest) -> SimpleNamespace:
    """The backend under test (CPU unless a test is parametrized with _ON_EACH_BACKEND) and a
    kernel of it that takes one uint64 and does nothing with 0: (backend, image, name)."""
    backend = getattr(request, "param", "cpu")
    if backend == "cpu":
        return SimpleNamespace(backend="cpu", image=request.getfixturevalue("cpu_module_path"),
                               name="noop")
    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    return SimpleNamespace(backend=backend, image=request.getfixturevalue("ptx"),
                           name="qd_test_spin")


_ON_EACH_BACKEND = pytest.mark.parametrize("target", ["cpu", "cuda"], indirect=True)


@pytest.fixture
def live(target: SimpleNamespace) -> Iterator[SimpleNamespace]:
    """Open objects of a second context, the arguments of the calls: a closed object must
    refuse for itself, not because an argument of its closed context did."""
    ctx = qd.Context(target.backend)
    s = ctx.create_stream()
    kernel = ctx.load_module(target.image).get_kernel(target.name)
    with s.capture() as graph:
        kernel.launch(0, stream=s)
    ns = SimpleNamespace(ctx=ctx, stream=s, event=ctx.create_event(), kernel=kernel,
                         timing=ctx.create_event(timing=True), graph=graph,
                         lease=ctx.acquire_stream(), timeline=ctx.create_timeline())
    yield ns
    ctx.close()


def _arguments(live: SimpleNamespace) -> Dict[str, Any]:
    """A value for each parameter, by name, of the methods of the context's children."""
    return {
        "stream": live.stream, "event": live.event, "end": live.timing, "other": live.graph,
        "children": [live.lease], "n": 1, "name": live.kernel.name, "index": 0, "access": "read",
        "node": 0, "kind": qd.CONDITIONAL_IF, "condition": 0, "num_cases": 0,
        "timing": False, "refresh": False, "dtype": "uint8", "shape": None,
        "path": "/nonexistent/qd-closed-children.dot",  # never written: refused before C
        "timeline": live.timeline, "value": 1,
    }


def _call(bound: Callable[..., Any], args: Dict[str, Any], what: str) -> Any:
    positional: List[Any] = []
    keywords: Dict[str, Any] = {}
    for p in inspect.signature(bound).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in args:
            value = args[p.name]
        elif p.default is not p.empty:
            continue
        else:
            pytest.fail(f"{what}: no test value for its parameter {p.name!r}; add one to "
                        "_arguments in this file")
        if p.kind is p.KEYWORD_ONLY:
            keywords[p.name] = value
        else:
            positional.append(value)
    return bound(*positional, **keywords)


def _children(ctx: qd.Context, target: SimpleNamespace) -> Dict[str, Any]:
    """One object of every kind the context owns, each used before the close."""
    owned = ctx.create_stream()
    lease = ctx.acquire_stream()
    forked = owned.fork(1)[0]
    module = ctx.load_module(target.image)
    kernel = module.get_kernel(target.name)
    for _ in range(3):  # its launch learns the signature: the compiled / made fast paths
        kernel.launch(0, stream=owned)
    with owned.capture() as graph:
        kernel.launch(0, stream=owned)
    launcher = kernel.prepare(0)
    launcher(stream=owned)
    graph.launch(stream=owned)
    owned.join([forked])
    forked = owned.fork(1)[0]
    objects = {
        "owned stream": owned, "lease": lease, "forked lease": forked,
        "default stream": ctx.default_stream, "event": ctx.create_event(),
        "timing event": ctx.create_event(timing=True), "record event": owned.record(),
        "timing record event": owned.record(timing=True), "module": module, "kernel": kernel,
        "graph": graph, "launcher": launcher, "timeline": ctx.create_timeline(),
    }
    if target.backend == "cpu":
        objects["host-function kernel"] = qd.Kernel.from_host_fn(ctx, lambda info, args: None)
    else:  # a borrowed stream: the native stream of another context's stream
        objects["borrowed stream"] = qd.Stream.from_external(ctx, ctx.create_stream())
    owned.synchronize()
    return objects


@_ON_EACH_BACKEND
@pytest.mark.parametrize("via", ["close", "with"])
def test_every_method_of_a_closed_contexts_children_raises_object_closed_before_c(
        target: SimpleNamespace, live: SimpleNamespace, via: str) -> None:
    ctx = qd.Context(target.backend)
    objects = _children(ctx, target)
    if via == "close":
        ctx.close()
    else:
        with ctx:
            pass
    args = _arguments(live)
    checked = set()
    wrong: List[str] = []
    for label, obj in objects.items():
        cls = type(obj)
        if hasattr(cls, "closed") and not obj.closed:
            wrong.append(f"{label}.closed is False")
        if hasattr(cls, "handle") and obj.handle != 0:
            wrong.append(f"{label}.handle is {obj.handle:#x}")
        # Closing last: the calls before it must refuse because the context closed.
        members = sorted(_public_members(cls), key=lambda m: m[0] in _MAY_RETURN)
        for name, attr in members:
            checked.add(f"{cls.__name__}.{name}")
            problem = _refusal(obj, name, attr, args, f"{label}.{name}")
            if problem:
                wrong.append(problem)
    # The methods that reach C, as a floor: the generated walk found them.
    for expected in ("Stream.synchronize", "Stream.query", "Stream.wait", "Stream.record",
                     "Event.query", "Event.record", "Graph.launch", "Kernel.launch",
                     "Launcher.launch", "Module.get_kernel"):
        assert expected in checked
    assert not wrong, "after ctx.close():\n" + "\n".join(wrong)


def _refusal(obj: Any, name: str, attr: Any, args: Dict[str, Any], what: str) -> str:
    """What is wrong with ``obj.name`` on a closed object ("" if nothing): a property or a
    method that does not raise ObjectClosedError (but closing again, and `with` on what is not
    a stream, which return), or that calls C."""
    _reset_message()
    try:
        if isinstance(attr, property):
            try:
                getattr(obj, name)
            except qd.ObjectClosedError:
                pass
        elif name in _MAY_RETURN or (name == "__enter__" and not isinstance(obj, qd.Stream)):
            _call(getattr(obj, name), args, what)
        else:
            try:
                result = _call(getattr(obj, name), args, what)
                if name in _RETURNS_SCOPE:
                    result.__enter__()
            except qd.ObjectClosedError:
                pass
            else:
                return f"{what} returned {result!r}"
    except Exception as exc:  # noqa: BLE001 (what is wrong is reported)
        return f"{what} raised {type(exc).__name__}: {exc}"
    message = _lib.last_error_message()
    if message != _SENTINEL_MESSAGE:
        return f"{what} called C: {message!r}"
    return ""


@_ON_EACH_BACKEND
def test_calls_that_name_a_closed_contexts_stream_raise_object_closed_before_c(
        target: SimpleNamespace, live: SimpleNamespace) -> None:
    ctx = qd.Context(target.backend)
    objects = _children(ctx, target)
    buf = qd.alloc(64, stream=objects["owned stream"])
    ctx.close()
    kernel = live.kernel
    calls = {
        "alloc": lambda s: qd.alloc(64, stream=s),
        "free": lambda s: qd.free(buf, stream=s),
        "memset": lambda s: qd.memset(bytearray(8), 0, stream=s),
        "memcpy": lambda s: qd.memcpy(bytearray(8), bytes(8), stream=s),
        "launch_host_fn": lambda s: qd.launch_host_fn(lambda: None, stream=s),
        "launch_parallel": lambda s: qd.launch_parallel([qd.Task(kernel)], stream=s),
        "live kernel launch": lambda s: kernel.launch(stream=s),
        "live kernel launch with arguments": lambda s: kernel.launch(0, stream=s),
        "live event record": lambda s: live.event.record(stream=s),
        "live graph launch": lambda s: live.graph.launch(stream=s),
        "live stream wait": lambda s: live.stream.wait(s),
        "live context set_active_stream": lambda s: live.ctx.set_active_stream(s),
        "live context active_stream": lambda s: live.ctx.active_stream(s).__enter__(),
        "Stream.from_external into a live context": lambda s: qd.Stream.from_external(live.ctx, s),
    }
    for _ in range(3):
        kernel.launch(0, stream=live.stream)  # learned: the compiled / made fast paths
    for label in ("owned stream", "lease", "forked lease", "default stream"):
        for name, call in calls.items():
            _reset_message()
            with pytest.raises(qd.ObjectClosedError):
                call(objects[label])
            _no_c_call(f"{name}(stream={label})")
    closed_kernel, launcher = objects["kernel"], objects["launcher"]
    for name, call in {"closed kernel launch with arguments": lambda: closed_kernel.launch(
            0, stream=live.stream), "closed kernel's launcher": lambda: launcher(
                stream=live.stream)}.items():
        _reset_message()
        with pytest.raises(qd.ObjectClosedError):
            call()
        _no_c_call(name)
    for label in ("event", "record event"):
        _reset_message()
        with pytest.raises(qd.ObjectClosedError):
            live.stream.wait(objects[label])
        _no_c_call(f"wait({label})")


def test_a_graph_whose_capture_the_close_ended_raises_object_closed(
        live: SimpleNamespace) -> None:
    ctx = qd.Context("cpu")
    s = ctx.create_stream()
    with pytest.raises(qd.ObjectClosedError, match="closed inside"):
        with s.capture() as graph:
            ctx.close()
    assert graph.closed and graph.handle == 0
    for call in (lambda: graph.launch(stream=live.stream), lambda: graph.kernel_node_count,
                 lambda: graph.update(live.graph), lambda: graph.set_kernel_args(0)):
        _reset_message()
        with pytest.raises(qd.ObjectClosedError, match="closing its qd.Context"):
            call()
        _no_c_call("a graph whose capture the close ended")


@_ON_EACH_BACKEND
def test_finalizers_of_a_closed_contexts_children_make_no_c_call(
        target: SimpleNamespace) -> None:
    ctx = qd.Context(target.backend)
    objects = _children(ctx, target)
    ctx.close()
    gc.collect()  # what earlier tests left: its finalizers are not under test here
    for label in list(objects):
        _reset_message()
        del objects[label]
        gc.collect()
        _no_c_call(f"the finalizer of the {label}")


@_ON_EACH_BACKEND
def test_a_closed_contexts_buffers_refuse_as_freed_memory_before_c(
        target: SimpleNamespace, live: SimpleNamespace) -> None:
    """Its buffers were freed by the close: each public method and property, and the address
    and DLPack protocols, returns (reading 0, freed) or raises InvalidAddressError (as a freed
    buffer does) or ObjectClosedError, and never calls C."""
    ctx = qd.Context(target.backend)
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    objects = {"device buffer": buf, "view": buf.view("uint8", (64,)),
               "host buffer": ctx.host_alloc(64)}
    s.synchronize()
    ctx.close()
    args = _arguments(live)
    wrong: List[str] = []
    for label, obj in objects.items():
        members = sorted(_public_members(type(obj)), key=lambda m: m[0] in _MAY_RETURN)
        for name, attr in list(members) + [("__index__", None)]:
            what = f"{label}.{name}"
            _reset_message()
            try:
                if isinstance(attr, property):
                    getattr(obj, name)
                else:
                    # (the protocols with their defaults: __dlpack__'s stream is a CUstream)
                    _call(getattr(obj, name), {} if name.startswith("__") else args, what)
            except (qd.InvalidAddressError, qd.ObjectClosedError):
                pass
            except Exception as exc:  # noqa: BLE001 (what is wrong is reported)
                wrong.append(f"{what} raised {type(exc).__name__}: {exc}")
            message = _lib.last_error_message()
            if message != _SENTINEL_MESSAGE:
                wrong.append(f"{what} called C: {message!r}")
        assert getattr(obj, "address") == 0, label
    assert not wrong, "after ctx.close():\n" + "\n".join(wrong)


def test_a_call_that_lost_the_race_with_close_raises_object_closed() -> None:
    """A call that passed its closed check while another thread closed the context gets
    QD_ERROR_INVALID_HANDLE from C (qd.h, "Threads"): it raises ObjectClosedError, as the same
    call made after the close does. (The race itself is timing; its outcome is this.)"""
    ctx = qd.Context("cpu")
    s = ctx.create_stream()
    stale = s._c
    ctx.close()
    status = qd._base._f_stream_query(stale)  # what the call sends C once the close has run
    assert status == qd.Status.ERROR_INVALID_HANDLE
    exc = qd._base._err(status, ctx)
    assert isinstance(exc, qd.ObjectClosedError) and "its qd.Context was closed" in str(exc)
