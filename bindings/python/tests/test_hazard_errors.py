"""A hazard report never vanishes (README, "Validation"): under a warnings filter that makes
qd.HazardWarning an error (``pytest -W error``) the next synchronize() raises it; a context
that refuses hazards (validate="raise", or QD_VALIDATE=error) raises HazardError and warns
nothing. No timing: the planted race waits for its producer with a host callback, which the
validation model does not count as ordering."""

from __future__ import annotations

import builtins
import subprocess
import sys
import threading
import warnings
from ctypes import c_uint32

import pytest

import qd
from conftest import subprocess_env

# Every test plants a hazard, or sets the validation mode itself: not in the validation pass.
pytestmark = pytest.mark.races_on_purpose


def _ran(stream: qd.Stream) -> None:
    done = threading.Event()
    qd.launch_host_fn(done.set, stream=stream)
    assert done.wait(20)


def _race(ctx: qd.Context, cpu_module_path: str) -> qd.Stream:
    """Plant a race between two streams on one buffer; returns the racing stream."""
    add_one = ctx.load_module(cpu_module_path).get_kernel("add_one")
    a, b = ctx.create_stream(), ctx.create_stream()
    buf = qd.alloc(64, stream=a)
    a.synchronize()
    add_one.launch(buf, c_uint32(4), stream=a)
    _ran(a)
    add_one.launch(buf, c_uint32(4), stream=b)
    return b


def test_hazard_under_error_filter_is_raised_by_next_synchronize(cpu_module_path: str) -> None:
    with qd.Context("cpu", validate=True) as ctx:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            b = _race(ctx, cpu_module_path)
            assert ctx.stats().hazards_reported == 1
            with pytest.raises(qd.HazardWarning, match="race: kernel 'add_one'"):
                b.synchronize()
            b.synchronize()  # reported once
            ctx.synchronize()


def test_qd_validate_error_raises_hazard_error_and_warns_nothing(
        cpu_module_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QD_VALIDATE", "error")
    with qd.Context("cpu") as ctx:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with pytest.raises(qd.HazardError, match="race"):
                _race(ctx, cpu_module_path)
        assert [w for w in seen if issubclass(w.category, qd.HazardWarning)] == []
        ctx.synchronize()


def test_callback_error_keeps_every_exception(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    raised = [ValueError("one"), KeyError("two"), RuntimeError("three")]
    for exc in raised:
        qd.launch_host_fn(lambda exc=exc: (_ for _ in ()).throw(exc), stream=s)
    with pytest.raises(qd.CallbackError, match="2 more") as info:
        s.synchronize()
    assert list(info.value.exceptions) == raised
    cause = info.value.__cause__
    group = getattr(builtins, "ExceptionGroup", None)  # Python 3.11+
    if group is None:
        assert cause is raised[0]
    else:
        assert isinstance(cause, group) and list(cause.exceptions) == raised
    s.synchronize()  # reported once


_UNREPORTED = """
import sys, threading
from ctypes import c_uint32
import qd
ctx = qd.Context("cpu", validate=True)
add_one = ctx.load_module(sys.argv[1]).get_kernel("add_one")
a, b = ctx.create_stream(), ctx.create_stream()
buf = qd.alloc(64, stream=a)
a.synchronize()
add_one.launch(buf, c_uint32(4), stream=a)
done = threading.Event()
qd.launch_host_fn(done.set, stream=a)
assert done.wait(20)
add_one.launch(buf, c_uint32(4), stream=b)
print("exiting with the context open")
"""


def test_unreported_hazard_under_error_filter_reaches_stderr_at_exit(
        cpu_module_path: str) -> None:
    """Nothing synchronizes and the context is destroyed at exit, where nothing can raise: the
    report goes to stderr rather than vanish."""
    run = subprocess.run([sys.executable, "-W", "error", "-c", _UNREPORTED, cpu_module_path],
                         env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "validation mode reported a hazard" in run.stderr and "race" in run.stderr
