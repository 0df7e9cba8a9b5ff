"""After close, every accessor says closed and addresses read 0 (README, "The binding's side
of the contract"): the context's children once it closed, a buffer once freed."""

from __future__ import annotations

import pytest

import qd


def test_children_of_a_closed_context_report_closed_and_handle_0(cpu_module_path: str) -> None:
    ctx = qd.Context("cpu")
    s = ctx.create_stream()
    lease = ctx.acquire_stream()
    ev = s.record()
    made = ctx.create_event()
    module = ctx.load_module(cpu_module_path)
    kernel = module.get_kernel("noop")
    with s.capture() as graph:
        kernel.launch(stream=s)
    hb = ctx.host_alloc(64)
    buf = qd.alloc(64, stream=s)
    view = buf.view("uint8", (64,))
    s.synchronize()
    ctx.close()
    assert ctx.closed and ctx.handle == 0
    for obj in (s, lease, ev, made, module, kernel, graph):
        assert obj.closed, obj
        assert obj.handle == 0, obj
    assert hb.closed and hb.address == 0
    assert buf.freed and buf.address == 0 and view.address == 0
    for addressed in (hb, buf, view):
        with pytest.raises(qd.InvalidAddressError):
            int(addressed)


def test_freed_buffers_read_address_0(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(64, stream=stream)
    view = buf.view("uint8")
    assert buf.address != 0 and int(buf) == buf.address and view.address == buf.address
    qd.free(buf, stream=stream)
    assert buf.freed and buf.address == 0 and view.address == 0
    with pytest.raises(qd.InvalidAddressError):
        int(buf)
    hb = ctx.host_alloc(64)
    assert hb.address != 0
    hb.close()
    assert hb.closed and hb.address == 0
    with pytest.raises(qd.InvalidAddressError):
        int(hb)
