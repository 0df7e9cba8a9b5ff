"""qd._speedups (qd/_speedups.c): the four stream bookkeeping calls, Kernel.launch's packing and
Stream.record compiled. The whole suite
runs with and without it (bindings/python/test builds it and sets QD_PYTHON_SPEEDUPS to its
path; tools/test-all runs the suite again with QD_PYTHON_SPEEDUPS=0). These tests check that the
setting asked for is the one in use, that the compiled calls fail as the foreign calls do, and
that the module refuses what it cannot take instead of passing it on."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, List

import pytest

import qd
from qd import _lib

from conftest import subprocess_env


def test_setting_is_the_one_asked_for() -> None:
    asked = os.environ.get("QD_PYTHON_SPEEDUPS", "")
    if asked == "0":
        assert _lib.SPEEDUPS is None
        assert _lib.why_not_speedups == "QD_PYTHON_SPEEDUPS=0"
    elif asked not in ("", "1"):  # a path: bindings/python/test built it, so it must be in use
        assert _lib.SPEEDUPS is not None, _lib.why_not_speedups
    if _lib.SPEEDUPS is None:
        assert _lib.why_not_speedups


needs_speedups = pytest.mark.skipif(_lib.SPEEDUPS is None,
                                    reason=f"qd._speedups not in use: {_lib.why_not_speedups}")


@needs_speedups
def test_the_module_in_use_carries_every_compiled_path() -> None:
    # A module built from an older source still loads (each path is looked up by name) and the
    # binding falls back for what it lacks: here, where it was built from this tree, all is there.
    from qd import _kernel, _stream

    sp = _lib.SPEEDUPS
    for name in ("acquire", "release", "set_active", "get_active", "launch", "bind_record",
                 "event_record", "StreamBase", "EventBase"):
        assert hasattr(sp, name), f"qd._speedups ({sp.__file__}) has no {name}: rebuild it"
    assert _kernel._sp_launch is not None
    assert qd.Stream.record is sp.StreamBase.__dict__["record"]
    assert qd.Stream.record is not _stream._py_record
    assert issubclass(qd.Event, sp.EventBase) and issubclass(qd.Stream, sp.StreamBase)


@needs_speedups
def test_lease_round_trip_through_the_compiled_calls() -> None:
    with qd.Context("cpu", stream_pool_size=2) as ctx:
        a = ctx.acquire_stream()
        b = ctx.acquire_stream()
        assert a.kind is qd.StreamKind.LEASED and a != b
        with pytest.raises(qd.PoolExhaustedError):
            ctx.acquire_stream()
        a.close()
        c = ctx.acquire_stream()  # the slot a gave back
        buf = bytearray(4)
        qd.memset(buf, 9, stream=c)  # the lease's c_uint64 handle works for the foreign calls
        c.synchronize()
        assert buf == b"\x09" * 4
        b.close()
        c.close()


@needs_speedups
def test_active_stream_round_trip_through_the_compiled_calls() -> None:
    with qd.Context("cpu") as ctx:
        default = ctx.get_active_stream(refresh=True)
        assert default.kind is qd.StreamKind.DEFAULT
        s = ctx.create_stream()
        assert ctx.set_active_stream(s) == default
        assert ctx.get_active_stream(refresh=True) == s
        assert ctx.set_active_stream(default) == s
        assert ctx.get_active_stream(refresh=True) == default
        s.close()


@needs_speedups
def test_closed_objects_are_named_as_without_speedups() -> None:
    ctx = qd.Context("cpu")
    lease = ctx.acquire_stream()
    lease.close()
    with pytest.raises(qd.ObjectClosedError, match="released"):
        ctx.set_active_stream(lease)
    ctx.close()
    with pytest.raises(qd.ObjectClosedError):
        ctx.acquire_stream()
    with pytest.raises(qd.ObjectClosedError):
        ctx.get_active_stream(refresh=True)


@needs_speedups
def test_module_refuses_what_is_not_a_handle() -> None:
    sp = _lib.SPEEDUPS
    with pytest.raises(OverflowError):
        sp.acquire(-1)
    with pytest.raises(OverflowError):
        sp.release(1 << 64)
    with pytest.raises(TypeError):
        sp.set_active(1)
    with pytest.raises(TypeError):
        sp.get_active("1")
    # a forged handle is C's to refuse: its status comes back
    assert sp.acquire(0xDEAD_BEEF) == int(qd.Status.ERROR_INVALID_HANDLE)
    assert sp.release(0) == int(qd.Status.ERROR_INVALID_HANDLE)


@needs_speedups
def test_module_raises_until_bound() -> None:
    # A fresh process that loads the module file without qd: nothing bound it yet.
    path = _lib.SPEEDUPS.__file__
    code = f"""
import importlib.machinery, importlib.util
loader = importlib.machinery.ExtensionFileLoader("qd._speedups", {path!r})
spec = importlib.util.spec_from_file_location("qd._speedups", {path!r}, loader=loader)
m = importlib.util.module_from_spec(spec)
loader.exec_module(m)
try:
    m.acquire(1)
except RuntimeError as e:
    print("refused:", e)
class S(m.StreamBase):
    pass
for call in (lambda: S().record(), lambda: m.event_record(1, 2)):
    try:
        call()
    except RuntimeError as e:
        print("refused:", e)
"""
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "refused: qd._speedups: bind() was not called" in out.stdout
    assert out.stdout.count("refused: qd._speedups: bind_record() was not called") == 2


def test_a_path_that_cannot_be_loaded_fails_loudly(tmp_path) -> None:
    env = subprocess_env()
    env["QD_PYTHON_SPEEDUPS"] = str(tmp_path / "missing.abi3.so")
    out = subprocess.run([sys.executable, "-c", "import qd"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0
    assert "missing.abi3.so" in out.stderr


@needs_speedups
def test_compiled_launch_refuses_what_it_cannot_take() -> None:
    launch = _lib.SPEEDUPS.launch
    with pytest.raises(TypeError):
        launch(1, 2, 0)  # too few arguments
    with pytest.raises(TypeError):
        launch(1, 2, 0, None, [1], [])  # args not a tuple
    with pytest.raises(OverflowError):
        launch(-1, 2, 0, None, (1,), [])
    # No signature fits, or too many arguments: None, and nothing is called.
    assert launch(1, 2, 0, None, (1,), []) is None
    assert launch(1, 2, 0, None, (1,), [((float,), b"F")]) is None
    assert launch(1, 2, 0, None, (1.0,), [((float,), b"U")]) is None  # a code of another type
    assert launch(1, 2, 0, None, tuple(range(65)), [(tuple([int] * 65), b"U" * 65)]) is None
    assert launch(1, 2, 0, None, (2**64,), [((int,), b"U")]) is None  # out of range: a miss
    # A fit reaches qd_launch, which refuses the forged handles.
    assert launch(1, 2, 0, None, (1,), [((int,), b"U")]) == qd.Status.ERROR_INVALID_HANDLE


@needs_speedups
def test_compiled_record_refuses_what_it_cannot_take() -> None:
    sp = _lib.SPEEDUPS
    with pytest.raises(TypeError):
        sp.event_record(1)
    with pytest.raises(OverflowError):
        sp.event_record(-1, 2)
    with pytest.raises(TypeError):
        sp.bind_record(1, 2, 3, 4)  # too few arguments
    with pytest.raises(TypeError):
        sp.bind_record(1, 2, object, print, print, print, 64)  # not a subclass of EventBase
    with pytest.raises(ValueError):
        sp.bind_record(0, 2, qd.Event, print, print, print, 64)
    # Not a qd.Stream: the method refuses it, as a Python method of qd.Stream would not (that
    # one would fail on the missing fields): a TypeError either way.
    with pytest.raises(TypeError):
        sp.StreamBase.record(object())
    # The bare call: forged handles are C's to refuse.
    assert sp.event_record(0xDEAD, 0xBEEF) == qd.Status.ERROR_INVALID_HANDLE
    assert sp.event_record(0xDEAD, 0xBEEF, 3) == qd.Status.ERROR_INVALID_HANDLE


@needs_speedups
def test_compiled_record_takes_the_hot_case_and_hands_the_rest_to_python(
        ctx: qd.Context, stream: qd.Stream, kernels) -> None:
    from qd import _stream

    handed: List[str] = []

    def slow(s: Any, timing: Any) -> Any:
        handed.append(f"slow {timing!r}")
        return _stream._record(s, timing)

    def failed(ev: Any, status: int) -> None:
        handed.append(f"failed {status}")
        _stream._record_failed(ev, status)

    _stream._bind_record(slow, failed)
    try:
        stream.record().close()  # the pool was empty
        stream.record(timing=True).close()
        assert handed == ["slow False", "slow True"]
        handed.clear()
        for _ in range(5):
            stream.record().close()  # from the pool, in C
            stream.record(timing=True).close()
        assert handed == []
        stream.record(timing=1).close()  # not a bool: the Python path says what it means
        assert handed == ["slow 1"]
        handed.clear()
        kernels.fault.launch(stream=stream)
        with pytest.raises(qd.DeviceLostError):
            stream.synchronize()
        with pytest.raises(qd.DeviceLostError):
            stream.record()
        assert handed == [f"failed {int(qd.Status.ERROR_DEVICE_LOST)}"]
    finally:
        _stream._bind_record()
