"""The binding's fast paths stay fast under ordinary use (README, "Performance notes"): a kernel
launched with a few argument signatures in turn keeps a launch function for each
(``Stream.record()``'s pooled events: test_record.py). Asserted on what the binding does (which
path ran, which qd handle came back), never on time."""

from __future__ import annotations

import ctypes
import struct
from ctypes import c_double, c_float, c_uint8, c_uint16, c_uint32, c_uint64
from typing import Any, List, Tuple

import pytest

import qd
from qd import _kernel


def test_alternating_argument_signatures_stay_on_the_fast_path(
        ctx: qd.Context, kernels: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    k = kernels.noop
    signatures = [(buf, c_uint32(4)), (buf, c_float(1.0)), (buf, 7, 2.5)]
    for args in signatures:  # each signature's launch function is made once
        k.launch(*args, stream=s)
    slow: List[str] = []
    layout_get = _kernel._Layout.get
    general = _kernel.Kernel._launch_general

    def counting_get(types: Any) -> Any:
        slow.append("layout")
        return layout_get(types)

    def counting_general(self: Any, *a: Any) -> Any:
        slow.append("general")
        return general(self, *a)

    monkeypatch.setattr(_kernel._Layout, "get", staticmethod(counting_get))
    monkeypatch.setattr(_kernel.Kernel, "_launch_general", counting_general)
    for i in range(60):
        k.launch(*signatures[i % 2], stream=s)  # two in turn
    for i in range(60):
        k.launch(*signatures[i % 3], stream=s)  # three in turn
    s.synchronize()
    assert slow == [], f"{len(slow)} of 120 launches left the fast path"


def test_alternating_signatures_still_check_every_argument(ctx: qd.Context,
                                                           kernels: Any) -> None:
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    k = kernels.noop
    k.launch(buf, c_uint32(4), stream=s)
    k.launch(buf, c_float(1.0), stream=s)
    k.launch(buf, c_uint32(4), stream=s)
    qd.free(buf, stream=s)
    with pytest.raises(qd.InvalidAddressError):
        k.launch(buf, c_float(1.0), stream=s)  # a freed buffer, in a remembered signature
    with pytest.raises(qd.ArgumentRangeError):
        k.launch(2**64, c_uint32(1), stream=s)
    s.synchronize()


class _Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_uint64), ("b", ctypes.c_double)]


def _echo8_signatures() -> List[Any]:
    """Eight argument signatures of echo8 (more than a kernel keeps launch functions for), as
    functions of (out address, i) -> args; every one passes the same bytes for the same i."""
    def make(d_ctypes: bool, f_ctypes: bool, g_array: bool) -> Any:
        def args(out: int, i: int) -> Tuple[Any, ...]:
            d = c_uint64(1000 + i) if d_ctypes else 1000 + i
            f = c_double(i + 0.25) if f_ctypes else i + 0.25
            g: Any = _Pair(7 * i, -0.5 * i)
            if g_array:
                g = (c_uint8 * 16).from_buffer_copy(bytes(g))
            return (out, c_uint8(i & 0xFF), c_uint16(3 * i), c_uint32(5 * i), d, c_float(i / 2),
                    f, g)
        return args
    return [make(d, f, g) for d in (False, True) for f in (False, True) for g in (False, True)]


def _echo8_expected(i: int) -> bytes:
    return struct.pack("<BHIQfd", i & 0xFF, 3 * i, 5 * i, 1000 + i, i / 2, i + 0.25) + \
        struct.pack("<Qd", 7 * i, -0.5 * i)


def test_signatures_in_turn_give_each_launch_its_own_values(ctx: qd.Context,
                                                            kernels: Any) -> None:
    s = ctx.create_stream()
    signatures = _echo8_signatures()
    order = [0, 1] * 8 + [0, 1, 2] * 6 + list(range(8)) * 4  # two, three, then eight in turn
    outs = [(ctypes.c_uint8 * 64)() for _ in order]
    for i, (sig, out) in enumerate(zip(order, outs)):
        kernels.echo8.launch(*signatures[sig](ctypes.addressof(out), i), stream=s)
    s.synchronize()
    for i, out in enumerate(outs):
        expected = _echo8_expected(i)
        assert bytes(out[:len(expected)]) == expected, f"launch {i} (signature {order[i]})"


def test_a_kernel_keeps_a_bounded_number_of_launch_functions(ctx: qd.Context,
                                                             kernels: Any) -> None:
    s = ctx.create_stream()
    out = (ctypes.c_uint8 * 64)()
    k = kernels.echo8
    for round_ in range(3):
        for i, sig in enumerate(_echo8_signatures()):
            k.launch(*sig(ctypes.addressof(out), i), stream=s)
            kept = [f for f in (k._fast, k._prev, *k._recent) if f is not _kernel._no_fast]
            assert len(kept) == min(round_ * 8 + i + 1, _kernel._RECENT + 1)
            assert len(set(map(id, kept))) == len(kept), "a launch function kept twice"
    s.synchronize()
    assert len(_kernel._Layout._by_types) <= 256


def _spin_write_signatures(words: Any) -> List[Tuple[Any, bytes]]:
    """spin_write(u64 dst, u32 value, u64 microseconds) with every kind of argument the
    compiled launch packs: (args, the 4 bytes each must leave at words[i])."""
    base = ctypes.addressof(words)
    return [
        ((base, c_uint32(0xDEADBEEF), 0), struct.pack("<I", 0xDEADBEEF)),
        ((base + 4, ctypes.c_int32(-2), c_uint64(0)), struct.pack("<i", -2)),
        ((base + 8, c_float(1.5), ctypes.c_int64(0)), struct.pack("<f", 1.5)),
        ((base + 12, c_uint32(7), c_double(0.0)), struct.pack("<I", 7)),
        ((base + 16, ctypes.c_int32(-9), 0.0), struct.pack("<i", -9)),
        ((c_uint64(base + 20), c_uint32(11), 0), struct.pack("<I", 11)),
    ]


def test_signatures_in_turn_of_every_packed_kind_write_their_own_values(
        ctx: qd.Context, kernels: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    s = ctx.create_stream()
    k = kernels.spin_write
    words = (c_uint32 * 8)()
    cases = _spin_write_signatures(words)
    for args, _ in cases[:2]:  # learned once
        k.launch(*args, stream=s)
    s.synchronize()
    ctypes.memset(words, 0, ctypes.sizeof(words))
    slow: List[str] = []
    monkeypatch.setattr(_kernel.Kernel, "_launch_general",
                        lambda self, *a: slow.append("general"))
    for rnd in range(3):  # six signatures in turn: more than a kernel keeps
        for args, expected in cases:
            k.launch(*args, stream=s)
    s.synchronize()
    assert slow == []
    raw = bytes(words)
    for i, (_, expected) in enumerate(cases):
        assert raw[4 * i:4 * i + 4] == expected, f"signature {i}"
    if _kernel._sp_launch is not None:
        assert 0 < len(k._specs) <= _kernel._RECENT + 1  # the compiled path learned them


def test_learned_signatures_still_refuse_what_the_general_path_refuses(
        ctx: qd.Context, kernels: Any) -> None:
    s = ctx.create_stream()
    k = kernels.spin_write
    word = c_uint32()
    addr = ctypes.addressof(word)
    buf = qd.alloc(8, stream=s)
    k.launch(addr, c_uint32(1), 0, stream=s)  # (int, c_uint32, int) learned
    k.launch(buf, c_uint32(2), 0, stream=s)  # (DeviceBuffer, c_uint32, int) learned
    with pytest.raises(qd.ArgumentRangeError):
        k.launch(2**64, c_uint32(1), 0, stream=s)
    with pytest.raises(qd.ArgumentRangeError):
        k.launch(addr, c_uint32(1), -1, stream=s)
    with qd.Context("cpu") as other:
        foreign = qd.alloc(8, stream=other.default_stream)
        with pytest.raises(qd.WrongContextError):
            k.launch(foreign, c_uint32(3), 0, stream=s)
    qd.free(buf, stream=s)
    with pytest.raises(qd.InvalidAddressError):
        k.launch(buf, c_uint32(4), 0, stream=s)
    s.synchronize()
    assert word.value == 1
    s.close()
    with pytest.raises(qd.ObjectClosedError):
        k.launch(addr, c_uint32(5), 0, stream=s)
