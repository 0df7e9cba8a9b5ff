"""Misuse from safe code gets a clear error, never a second owner, a crash or a late failure
(README, "Copying and pickling", "Interop", "Timeline trace", "Graphs")."""

from __future__ import annotations

import copy
import gc
import os
import pickle
from typing import Any, Callable, List, Tuple

import pytest

import qd


def _owners(ctx: qd.Context) -> List[Tuple[str, Any]]:
    s = ctx.create_stream()
    with s.capture() as graph:
        pass
    return [
        ("Context", ctx),
        ("Stream", s),
        ("Stream", ctx.acquire_stream()),
        ("Event", ctx.create_event()),
        ("HostBuffer", ctx.host_alloc(64)),
        ("DeviceBuffer", qd.alloc(64, stream=s)),
        ("Graph", graph),
        ("Kernel", qd.Kernel.from_host_fn(ctx, lambda info, args: 0)),
    ]


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps],
                         ids=["copy", "deepcopy", "pickle"])
def test_copy_and_pickle_of_owners_raise_type_error_naming_the_class(
        how: Callable[[Any], Any]) -> None:
    with qd.Context("cpu") as ctx:
        for name, obj in _owners(ctx):
            with pytest.raises(TypeError, match=f"qd.{name} cannot be"):
                how(obj)
        gc.collect()
        # Nothing was destroyed by the refused copies: the originals still work.
        s = ctx.create_stream()
        hb = ctx.host_alloc(16)
        with pytest.raises(TypeError):
            copy.copy(s)
        with pytest.raises(TypeError):
            copy.copy(hb)
        gc.collect()
        qd.memset(hb, 1, stream=s)
        s.synchronize()
        assert bytes(hb.view) == b"\x01" * 16
        hb.close()
        s.close()


def test_dlpack_stream_on_cpu_buffer_is_refused(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(64, stream=stream)
    for bad in (5, 1, -1, 0):
        with pytest.raises(qd.InvalidArgumentError, match="stream=None"):
            buf.__dlpack__(stream=bad)
        with pytest.raises(qd.InvalidArgumentError, match="stream=None"):
            buf.view("uint8").__dlpack__(stream=bad)
    buf.__dlpack__(stream=None)  # allowed


def test_trace_to_unwritable_path_fails_on_entry_with_no_context(tmp_path: Any) -> None:
    missing = str(tmp_path / "no-such-dir" / "x.json")
    with pytest.raises(qd.InvalidArgumentError, match="cannot be written"):
        with qd.trace(missing):
            pytest.fail("the block ran")
    with pytest.raises(qd.InvalidArgumentError, match="is a directory"):
        with qd.trace(str(tmp_path)):
            pytest.fail("the block ran")
    assert not os.listdir(tmp_path)  # nothing left behind
    with qd.Context("cpu"):  # and nothing stays half-started
        pass


def test_cross_context_copy_error_names_memcpy_peer() -> None:
    with qd.Context("cpu") as a, qd.Context("cpu") as b:
        sa, sb = a.create_stream(), b.create_stream()
        src = qd.alloc(64, stream=sa)
        dst = qd.alloc(64, stream=sb)
        with pytest.raises(qd.WrongContextError, match=r"qd\.memcpy_peer"):
            qd.memcpy(dst, src, stream=sa)


def test_closing_the_context_inside_a_capture_says_so() -> None:
    c = qd.Context("cpu")
    s = c.create_stream()
    with pytest.raises(qd.ObjectClosedError, match="closed inside the `with stream.capture"):
        with s.capture():
            qd.launch_host_fn(lambda: None, stream=s)
            c.close()
