"""The protocols qd consumes follow the binding's rule for a wrong Python type (README,
"Argument validation"): ``ArgumentTypeError`` for each element of the value, before its value
is judged (which is ``InvalidArgumentError`` or ``ArgumentRangeError``). ``__cuda_stream__``'s
(version, handle), and ``__dlpack__``'s ``stream``, ``max_version``, ``dl_device`` and ``copy``,
and the view a DLPack or CUDA-array-interface export is made of (``buf.view``)."""

from __future__ import annotations

from typing import Any

import pytest

import qd


class _CudaStream:
    def __init__(self, result: Any) -> None:
        self.result = result

    def __cuda_stream__(self) -> Any:
        return self.result


class _Index:
    """An int-like value (as a NumPy integer is): accepted wherever an int is."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


_WRONG_TYPES = ("not_an_int", 1.0, None, b"\x00", [0], object())


@pytest.mark.parametrize("bad", _WRONG_TYPES, ids=lambda v: type(v).__name__)
def test_cuda_stream_element_of_a_wrong_type_is_argument_type_error(
        ctx: qd.Context, kernels: Any, bad: Any) -> None:
    for result in ((bad, 0), (0, bad)):
        obj = _CudaStream(result)
        with pytest.raises(qd.ArgumentTypeError, match="__cuda_stream__"):
            qd.Stream.from_external(ctx, obj)
        with pytest.raises(qd.ArgumentTypeError, match="__cuda_stream__"):
            kernels.noop.launch(stream=obj)  # stream= imports it: the same rule, nothing queued


def test_cuda_stream_values_of_the_right_type_are_judged_by_value(ctx: qd.Context) -> None:
    with pytest.raises(qd.ArgumentTypeError, match=r"\(version, handle\)"):
        qd.Stream.from_external(ctx, _CudaStream((0, 1, 2)))
    with pytest.raises(qd.InvalidArgumentError, match="version 1") as info:
        qd.Stream.from_external(ctx, _CudaStream((1, 0x1234)))
    assert not isinstance(info.value, TypeError)
    with pytest.raises(qd.ArgumentRangeError):
        qd.Stream.from_external(ctx, _CudaStream((0, -1)))
    with pytest.raises(qd.NotSupportedError):  # well formed: the CPU backend has no native streams
        qd.Stream.from_external(ctx, _CudaStream((_Index(0), _Index(0x1234))))


@pytest.mark.parametrize("argument, bad", [
    ("stream", "1"), ("stream", 1.0), ("stream", True),
    ("max_version", "1.0"), ("max_version", (1,)), ("max_version", (1, "0")),
    ("max_version", 1),
    ("dl_device", "cpu"), ("dl_device", (1, None)), ("dl_device", (1, 0, 0)),
    ("copy", "no"), ("copy", 0),
], ids=repr)
def test_dlpack_argument_of_a_wrong_type_is_argument_type_error(
        ctx: qd.Context, stream: qd.Stream, argument: str, bad: Any) -> None:
    buf = qd.alloc(64, stream=stream)
    for exporter in (buf, buf.view("uint8")):
        with pytest.raises(qd.ArgumentTypeError, match=argument):
            exporter.__dlpack__(**{argument: bad})
    buf.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)  # the right types pass
    qd.free(buf, stream=stream)


@pytest.mark.parametrize("arguments", [
    {"offset": "0"}, {"offset": 1.0}, {"shape": "4"}, {"shape": 4.0}, {"shape": ("4",)},
    {"shape": {4}},
], ids=repr)
def test_view_argument_of_a_wrong_type_is_argument_type_error(
        ctx: qd.Context, stream: qd.Stream, arguments: Any) -> None:
    buf = qd.alloc(64, stream=stream)
    with pytest.raises(qd.ArgumentTypeError):
        buf.view("uint8", **arguments)
    assert buf.view("uint8", shape=(_Index(8),), offset=_Index(8)).shape == (8,)
    qd.free(buf, stream=stream)
