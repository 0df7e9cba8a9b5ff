"""The validation mode through the binding (qd.h, "Validation"): Context(validate=...) turns
hazard reports into qd.HazardWarning, or (validate="raise") refuses the call with
qd.HazardError. No timing: the planted race waits for its producer with a host callback, which
the validation model does not count as ordering."""

from __future__ import annotations

import threading
import warnings
from ctypes import c_uint32
from types import SimpleNamespace
from typing import Iterator

import pytest

import qd

# Plants hazards, and sets validation per context itself (tests/README.md, "The validation
# pass": skipped there).
pytestmark = pytest.mark.races_on_purpose


@pytest.fixture(params=[True, "raise"], ids=["warn", "raise"])
def vmode(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture
def vctx(vmode: object) -> Iterator[qd.Context]:
    context = qd.Context("cpu", validate=vmode)
    try:
        yield context
    finally:
        context.close()


def _kernels(ctx: qd.Context, path: str) -> SimpleNamespace:
    module = ctx.load_module(path)
    return SimpleNamespace(add_one=module.get_kernel("add_one"))


def _ran(stream: qd.Stream) -> None:
    """Wait until what is queued on stream has run, without telling qd's validation."""
    done = threading.Event()
    qd.launch_host_fn(done.set, stream=stream)
    assert done.wait(20)


def test_race_without_event_warns_or_raises_naming_both_kernels(vctx: qd.Context, vmode: object,
                                                                 cpu_module_path: str) -> None:
    k = _kernels(vctx, cpu_module_path)
    a, b = vctx.create_stream(), vctx.create_stream()
    buf = qd.alloc(64, stream=a)
    a.synchronize()
    k.add_one.launch(buf, c_uint32(4), stream=a)
    _ran(a)
    if vctx.stats().hazards_reported != 0:
        pytest.fail("a report before the race")
    race = "race: kernel 'add_one'.*kernel 'add_one'"
    if vmode == "raise":  # the call is refused, and nothing is warned
        with warnings.catch_warnings():
            warnings.simplefilter("error", qd.HazardWarning)
            with pytest.raises(qd.HazardError, match=race):
                k.add_one.launch(buf, c_uint32(4), stream=b)
    else:
        with pytest.warns(qd.HazardWarning, match=race):
            k.add_one.launch(buf, c_uint32(4), stream=b)
    assert vctx.stats().hazards_reported == 1
    vctx.synchronize()


def test_race_with_event_is_silent(vctx: qd.Context, cpu_module_path: str) -> None:
    k = _kernels(vctx, cpu_module_path)
    a, b = vctx.create_stream(), vctx.create_stream()
    buf = qd.alloc(64, stream=a)
    with warnings.catch_warnings():
        warnings.simplefilter("error", qd.HazardWarning)
        k.add_one.launch(buf, c_uint32(4), stream=a)
        b.wait(a.record())
        k.add_one.launch(buf, c_uint32(4), stream=b)
        vctx.synchronize()
    assert vctx.stats().hazards_reported == 0


def test_read_only_parameter_on_two_streams_is_silent(cpu_module_path: str) -> None:
    with qd.Context("cpu", validate=True) as ctx:
        k = _kernels(ctx, cpu_module_path)
        k.add_one.set_param_access(0, "read")
        a, b = ctx.create_stream(), ctx.create_stream()
        buf = qd.alloc(64, stream=a)
        a.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("error", qd.HazardWarning)
            # add_one writes its buffer; declared "read" here only to exercise the declaration
            # (the two launches touch disjoint words: n=0 on b).
            k.add_one.launch(buf, c_uint32(0), stream=a)
            k.add_one.launch(buf, c_uint32(0), stream=b)
            ctx.synchronize()
        with pytest.raises(qd.InvalidArgumentError):
            k.add_one.set_param_access(64, "read")
        with pytest.raises(TypeError):
            k.add_one.set_param_access(0, "sometimes")


def test_validate_argument_is_checked() -> None:
    with pytest.raises(TypeError):
        qd.Context("cpu", validate="loudly")  # type: ignore[arg-type]
    with qd.Context("cpu") as ctx:
        assert ctx.stats().hazards_reported == 0
