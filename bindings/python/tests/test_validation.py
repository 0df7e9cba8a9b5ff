"""docs/reliability.md, category 15: argument validation through the binding.

Huge sizes, negative values, wrong object kinds and None, through every call that takes them.
The rule (README, "Argument validation"):

- a value that fits the C parameter's type is passed unchanged, and the binding raises exactly
  the status the C API returns for it: these tests make the same call through the raw C function
  and compare;
- an int that does not fit (negative for an unsigned type, or too large) raises
  ArgumentRangeError: status QD_ERROR_INVALID_ARGUMENT, also an OverflowError; nothing wraps;
- None or a value of the wrong Python type raises ArgumentTypeError (QD_ERROR_INVALID_ARGUMENT,
  also a TypeError), except for handles: None or the wrong kind of object where a stream, event
  or kernel is required raises HandleTypeError (QD_ERROR_INVALID_HANDLE, also a TypeError), the
  status C gives for handle 0 or a handle of the wrong type; a closed object raises
  ObjectClosedError (QD_ERROR_INVALID_HANDLE) without calling C.

Every failing call leaves nothing allocated: the context's counters do not move.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_uint32, c_uint64, c_void_p
from typing import Any, Callable

import pytest

import qd
from qd import _callbacks, _lib

S = qd.Status
HUGE_FITTING = [2**64 - 1, 2**63]
OUT_OF_RANGE = [-1, -(2**63), 2**64, 2**70]
WRONG_TYPES = [None, 1.5, "8", b"8", [8], object()]


def _counters(ctx: qd.Context):
    s = ctx.stats()
    return (s.live_streams, s.live_events, s.live_modules, s.live_kernels,
            s.stream_pool_leased, s.live_allocations, s.bytes_allocated,
            s.host_bytes_allocated, len(_callbacks._pending))


def _expect(ctx: qd.Context, call: Callable[[], Any], status: int, *classes: type) -> None:
    before = _counters(ctx)
    with pytest.raises(qd.QdError) as info:
        call()
    assert info.value.status == status, f"{info.value!r}: expected {qd.status_name(status)}"
    for cls in classes:
        assert isinstance(info.value, cls), f"{info.value!r} is not a {cls.__name__}"
    assert _counters(ctx) == before, "a failed call changed the context's counters"


def _range(ctx, call):
    _expect(ctx, call, S.ERROR_INVALID_ARGUMENT, qd.ArgumentRangeError, OverflowError,
            ValueError)


def _wrong_type(ctx, call):
    _expect(ctx, call, S.ERROR_INVALID_ARGUMENT, qd.ArgumentTypeError, TypeError)


# -- stream= on every scheduling call ----------------------------------------------------------


@pytest.fixture
def setup(ctx: qd.Context, kernels):
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    s.synchronize()
    ev = ctx.create_event()
    calls = {
        "launch": lambda st: kernels.noop.launch(stream=st),
        "launcher": lambda st: kernels.noop.prepare(1, 2)(stream=st),
        "launch_parallel": lambda st: qd.launch_parallel([qd.Task(kernels.noop)], stream=st),
        "launch_host_fn": lambda st: qd.launch_host_fn(lambda: None, stream=st),
        "alloc": lambda st: qd.alloc(8, stream=st),
        "free": lambda st: qd.free(buf, stream=st),
        "memcpy": lambda st: qd.memcpy(bytearray(64), buf, stream=st),
        "memset": lambda st: qd.memset(buf, 0, stream=st),
        "record": lambda st: ev.record(stream=st),
    }
    yield ctx, s, ev, calls
    s.close()


SCHEDULING = ["launch", "launcher", "launch_parallel", "launch_host_fn", "alloc", "free",
              "memcpy", "memset", "record"]


@pytest.mark.parametrize("name", SCHEDULING)
def test_stream_none_is_invalid_handle_and_type_error(setup, name) -> None:
    ctx, s, ev, calls = setup
    _expect(ctx, lambda: calls[name](None), S.ERROR_INVALID_HANDLE, qd.HandleTypeError,
            TypeError)
    # The C API gives the same status for stream 0.
    assert qd.lib.qd_stream_query(0) == S.ERROR_INVALID_HANDLE
    assert "stream is required" in _lib.last_error_message()


@pytest.mark.parametrize("name", SCHEDULING)
def test_stream_omitted_is_type_error(setup, name) -> None:
    ctx, s, ev, calls = setup
    import inspect
    fn = {"launch": qd.Kernel.launch, "launcher": qd.Launcher.__call__,
          "launch_parallel": qd.launch_parallel, "launch_host_fn": qd.launch_host_fn,
          "alloc": qd.alloc, "free": qd.free, "memcpy": qd.memcpy, "memset": qd.memset,
          "record": qd.Event.record}[name]
    param = inspect.signature(fn).parameters["stream"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY
    assert param.default is inspect.Parameter.empty  # required: omitting it is a TypeError
    with pytest.raises(TypeError):
        {"alloc": lambda: qd.alloc(8), "launch_host_fn": lambda: qd.launch_host_fn(print),
         "record": lambda: ev.record()}.get(name, lambda: fn())()


@pytest.mark.parametrize("name", SCHEDULING)
@pytest.mark.parametrize("kind", ["event", "context", "int handle", "str"])
def test_stream_of_the_wrong_kind_is_invalid_handle(setup, name, kind) -> None:
    ctx, s, ev, calls = setup
    wrong = {"event": ev, "context": ctx, "int handle": s.handle, "str": "stream"}[kind]
    _expect(ctx, lambda: calls[name](wrong), S.ERROR_INVALID_HANDLE, qd.HandleTypeError,
            TypeError)
    # C: an event handle where a stream is expected is INVALID_HANDLE too.
    assert qd.lib.qd_stream_query(ev.handle) == S.ERROR_INVALID_HANDLE


@pytest.mark.parametrize("name", SCHEDULING)
def test_closed_stream_and_released_lease_raise_before_calling_c(setup, name) -> None:
    ctx, s, ev, calls = setup
    closed = ctx.create_stream()
    closed.close()
    lease = ctx.acquire_stream()
    lease.close()
    for st in (closed, lease):
        _expect(ctx, lambda: calls[name](st), S.ERROR_INVALID_HANDLE, qd.ObjectClosedError)


# -- sizes, counts, addresses: values that fit go to C and give C's status --------------------


@pytest.mark.parametrize("value", HUGE_FITTING)
def test_alloc_huge_sizes_match_c(setup, value) -> None:
    ctx, s, ev, calls = setup
    out = c_uint64()
    c_status = qd.lib.qd_mem_alloc_async(s.handle, value, byref(out))
    assert c_status < 0
    _expect(ctx, lambda: qd.alloc(value, stream=s), c_status)


def test_alloc_zero_matches_c(setup) -> None:
    ctx, s, ev, calls = setup
    _expect(ctx, lambda: qd.alloc(0, stream=s),
            qd.lib.qd_mem_alloc_async(s.handle, 0, byref(c_uint64())))


@pytest.mark.parametrize("value", HUGE_FITTING)
def test_host_alloc_huge_sizes_match_c(setup, value) -> None:
    ctx, s, ev, calls = setup
    c_status = qd.lib.qd_host_alloc(ctx.handle, value, byref(c_void_p()))
    assert c_status < 0
    _expect(ctx, lambda: ctx.host_alloc(value), c_status)


@pytest.mark.parametrize("value", HUGE_FITTING)
def test_memcpy_memset_huge_sizes_match_c(setup, value) -> None:
    ctx, s, ev, calls = setup
    a = qd.alloc(16, stream=s)
    b = qd.alloc(16, stream=s)
    s.synchronize()
    c_copy = qd.lib.qd_memcpy_async(s.handle, a.address, b.address, value)
    c_set = qd.lib.qd_memset_async(s.handle, a.address, 0, value)
    assert c_copy < 0 and c_set < 0
    _expect(ctx, lambda: qd.memcpy(a, b, value, stream=s), c_copy)
    _expect(ctx, lambda: qd.memset(a, 0, value, stream=s), c_set)
    # An address that wraps with the size: C's QD_ERROR_OVERFLOW, checked before any access.
    wrap = qd.lib.qd_memcpy_async(s.handle, 2**64 - 8, a.address, 16)
    assert wrap == S.ERROR_OVERFLOW
    _expect(ctx, lambda: qd.memcpy(2**64 - 8, a, 16, stream=s), wrap, qd.QdOverflowError)
    _expect(ctx, lambda: qd.memset(2**64 - 8, 0, 16, stream=s),
            qd.lib.qd_memset_async(s.handle, 2**64 - 8, 0, 16))
    # A Python buffer smaller than the size: the binding checks what C cannot, with the status
    # C gives for a range that runs past an allocation.
    _expect(ctx, lambda: qd.memcpy(bytearray(8), a, value, stream=s),
            S.ERROR_INVALID_ADDRESS, qd.InvalidAddressError)
    qd.free(a, stream=s)
    qd.free(b, stream=s)


@pytest.mark.parametrize("value", HUGE_FITTING)
def test_free_unknown_addresses_match_c(setup, value) -> None:
    ctx, s, ev, calls = setup
    c_status = qd.lib.qd_mem_free_async(s.handle, value)
    assert c_status == S.ERROR_INVALID_ADDRESS
    _expect(ctx, lambda: qd.free(value, stream=s), c_status, qd.InvalidAddressError)


def test_launch_dimensions_that_fit_match_c(setup, kernels) -> None:
    ctx, s, ev, calls = setup
    cfg = _lib.LaunchConfig()
    cfg.grid[:] = (2**32 - 1, 2, 1)
    c_status = qd.lib.qd_launch(s.handle, kernels.noop.handle, byref(cfg), None, 0)
    assert c_status == S.ERROR_OVERFLOW
    _expect(ctx, lambda: kernels.noop.launch(grid=(2**32 - 1, 2), stream=s), c_status,
            qd.QdOverflowError)
    cfg.grid[:] = (1, 1, 1)
    cfg.block[:] = (0, 1, 1)
    c_status = qd.lib.qd_launch(s.handle, kernels.noop.handle, byref(cfg), None, 0)
    _expect(ctx, lambda: kernels.noop.launch(block=(0, 1), stream=s), c_status)


def test_device_and_context_fields_that_fit_match_c() -> None:
    info = _lib.DeviceInfo()
    c_status = qd.lib.qd_device_get_info(qd.Backend.CPU, 2**32 - 1, byref(info))
    with pytest.raises(qd.QdError) as exc:
        qd.device_properties("cpu", 2**32 - 1)
    assert exc.value.status == c_status == S.ERROR_INVALID_ARGUMENT
    desc = _lib.ContextDesc()
    desc.backend = qd.Backend.CPU
    desc.stream_pool_size = 2**32 - 1
    out = c_uint64()
    c_status = qd.lib.qd_context_create(byref(desc), byref(out))
    with pytest.raises(qd.QdError) as exc:
        qd.Context("cpu", stream_pool_size=2**32 - 1)
    assert exc.value.status == c_status == S.ERROR_INVALID_ARGUMENT


# -- values that do not fit never wrap ----------------------------------------------------------


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_out_of_range_ints_raise_argument_range_error(setup, kernels, value) -> None:
    ctx, s, ev, calls = setup
    buf = qd.alloc(16, stream=s)
    s.synchronize()
    cases = [
        lambda: qd.alloc(value, stream=s),
        lambda: ctx.host_alloc(value),
        lambda: qd.memcpy(buf, bytes(16), value, stream=s),
        lambda: qd.memset(buf, 0, value, stream=s),
        lambda: qd.memset(buf, value, 16, stream=s),
        lambda: qd.memcpy(value, buf, 16, stream=s),
        lambda: qd.memcpy(buf, value, 16, stream=s),
        lambda: qd.free(value, stream=s),
        lambda: s.fork(value),
        lambda: kernels.noop.launch(grid=value, stream=s),
        lambda: kernels.noop.launch(block=(1, value), stream=s),
        lambda: kernels.noop.launch(shared_mem=value, stream=s),
        lambda: kernels.noop.launch(value, stream=s),
        lambda: kernels.noop.prepare(value),
        lambda: qd.Task(kernels.noop, group=value),
        lambda: qd.device_properties("cpu", value),
        lambda: qd.Context("cpu", device=value),
        lambda: qd.Context("cpu", stream_pool_size=value),
        lambda: qd.Context("cpu", cpu_worker_threads=value),
        lambda: ctx.create_stream(priority=value * 2**32),
    ]
    for case in cases:
        _range(ctx, case)
    qd.free(buf, stream=s)


def test_memset_value_range(setup) -> None:
    ctx, s, ev, calls = setup
    buf = qd.alloc(4, stream=s)
    _range(ctx, lambda: qd.memset(buf, 256, stream=s))
    _range(ctx, lambda: qd.memset(buf, -1, stream=s))
    qd.memset(buf, 255, stream=s)
    qd.free(buf, stream=s)


@pytest.mark.parametrize("value", WRONG_TYPES)
def test_wrong_python_types_raise_argument_type_error(setup, kernels, value) -> None:
    ctx, s, ev, calls = setup
    buf = qd.alloc(16, stream=s)
    s.synchronize()
    cases = [
        lambda: qd.alloc(value, stream=s),
        lambda: ctx.host_alloc(value),
        lambda: qd.memset(buf, value, 16, stream=s),
        lambda: s.fork(value),
        lambda: kernels.noop.launch(shared_mem=value, stream=s),
        lambda: qd.Task(kernels.noop, group=value),
        lambda: qd.Context("cpu", device=value),
    ]
    if not isinstance(value, list):  # grid=[8] is a valid 1-D grid
        cases.append(lambda: kernels.noop.launch(grid=value, stream=s))
    if value is not None:  # nbytes=None means "the size of the buffer(s)"
        cases.append(lambda: qd.memset(buf, 0, value, stream=s))
        cases.append(lambda: qd.memcpy(buf, bytes(16), value, stream=s))
    if value is None or isinstance(value, (str, bytes)):  # (a float is a double argument)
        cases.append(lambda: kernels.noop.launch(value, stream=s))
    if value is None or isinstance(value, (float, str)) or type(value) is object:
        cases.append(lambda: qd.free(value, stream=s))
        cases.append(lambda: qd.memcpy(value, buf, 16, stream=s))
    for case in cases:
        _wrong_type(ctx, case)
    qd.free(buf, stream=s)


# -- objects of the wrong kind where a handle is needed ----------------------------------------


def test_wrong_handle_kinds(setup, kernels) -> None:
    ctx, s, ev, calls = setup
    handle_error = (S.ERROR_INVALID_HANDLE, qd.HandleTypeError, TypeError)
    _expect(ctx, lambda: s.wait(ctx), *handle_error)
    assert qd.lib.qd_stream_wait_event(s.handle, s.handle) == S.ERROR_INVALID_HANDLE
    _expect(ctx, lambda: s.wait(None), *handle_error)
    _expect(ctx, lambda: s.join([ev]), *handle_error)
    _expect(ctx, lambda: ev.elapsed_ms(s), *handle_error)
    _expect(ctx, lambda: qd.Task(s), *handle_error)
    _expect(ctx, lambda: ctx.set_active_stream(ev), *handle_error)
    _expect(ctx, lambda: qd.Stream.from_external("ctx", s), *handle_error)
    _expect(ctx, lambda: qd.Kernel.from_host_fn(None, lambda i, a: 0), *handle_error)
    # Raw handles of the wrong type straight into C: INVALID_HANDLE, never a crash.
    assert qd.lib.qd_launch(s.handle, ev.handle, None, None, 0) == S.ERROR_INVALID_HANDLE
    assert qd.lib.qd_event_record(s.handle, s.handle) == S.ERROR_INVALID_HANDLE


def test_closed_objects_raise_before_calling_c(setup, kernels, cpu_module_path) -> None:
    ctx, s, ev, calls = setup
    closed_ev = ctx.create_event()
    closed_ev.close()
    module = ctx.load_module(cpu_module_path)
    k = module.get_kernel("noop")
    k.close()
    module.close()
    closed = (S.ERROR_INVALID_HANDLE, qd.ObjectClosedError)
    _expect(ctx, lambda: closed_ev.record(stream=s), *closed)
    _expect(ctx, lambda: closed_ev.query(), *closed)
    _expect(ctx, lambda: s.wait(closed_ev), *closed)
    _expect(ctx, lambda: k.launch(stream=s), *closed)
    _expect(ctx, lambda: k.prepare(), *closed)
    _expect(ctx, lambda: module.get_kernel("noop"), *closed)
    _expect(ctx, lambda: qd.launch_parallel([qd.Task(k)], stream=s), *closed)


def test_forged_handles_into_c_never_crash() -> None:
    """The binding's declared functions pass any uint64; C rejects forged values."""
    for forged in (0, 2**64 - 1, 0x1234_5678_9ABC_DEF0, 1):
        assert qd.lib.qd_stream_synchronize(forged) == S.ERROR_INVALID_HANDLE
        assert qd.lib.qd_event_query(forged) == S.ERROR_INVALID_HANDLE
        assert qd.lib.qd_context_destroy(forged) == S.ERROR_INVALID_HANDLE
        assert qd.lib.qd_kernel_destroy(forged) == S.ERROR_INVALID_HANDLE
    with pytest.raises(ctypes.ArgumentError):
        qd.lib.qd_stream_synchronize(None)  # ctypes refuses None for a uint64 handle
    n = c_uint32()
    assert qd.lib.qd_device_count(qd.Backend.CPU, None) == S.ERROR_INVALID_ARGUMENT
    assert qd.lib.qd_device_count(qd.Backend.CPU, byref(n)) == 0 and n.value == 1
