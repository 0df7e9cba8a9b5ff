"""Conditionals in a capture (qd.h, "Conditionals"): ``with stream.conditional(...)``, the
explicit calls, and their refusals. CPU contexts (a GPU context's capture refuses them in this
release); the condition word is host memory of the context, written by the host while the
stream is idle between replays."""

from __future__ import annotations

import ctypes

import pytest

import qd


def _word(ctx: qd.Context):
    buf = ctx.host_alloc(8)
    return buf, (ctypes.c_uint32 * 2).from_address(buf.address)


@pytest.fixture
def cpu(ctx: qd.Context) -> qd.Context:
    if ctx.backend != qd.Backend.CPU:
        pytest.skip("these cases use host kernels and a host word: CPU contexts only")
    return ctx


def test_if_runs_its_body_only_when_the_word_is_not_zero(kernels, cpu: qd.Context) -> None:
    s = cpu.create_stream()
    word_buf, word = _word(cpu)
    log = (ctypes.c_uint32 * 16)()
    with s.capture() as graph:
        with s.conditional(qd.CONDITIONAL_IF, condition=word_buf.address):
            kernels.append_log.launch(ctypes.addressof(log), ctypes.c_uint32(7), stream=s)
    for value, runs in ((0, 0), (1, 1), (0, 1), (5, 2)):
        word[0] = value
        graph.launch(stream=s)
        s.synchronize()
        assert log[0] == runs, f"word {value}"
    graph.close()


def test_if_else_and_the_explicit_calls(kernels, cpu: qd.Context) -> None:
    s = cpu.create_stream()
    word_buf, word = _word(cpu)
    log = (ctypes.c_uint32 * 16)()
    with s.capture() as graph:
        s.begin_conditional(qd.CONDITIONAL_IF_ELSE, condition=word_buf.address)
        kernels.append_log.launch(ctypes.addressof(log), ctypes.c_uint32(1), stream=s)
        s.next_branch()
        kernels.append_log.launch(ctypes.addressof(log), ctypes.c_uint32(2), stream=s)
        with pytest.raises(qd.InvalidOperationError):
            s.next_branch()  # an IF_ELSE has two bodies
        with pytest.raises(qd.NotSupportedError):
            s.conditional_handle()  # no driver graph on the CPU
        s.end_conditional()
    for value in (3, 0):
        word[0] = value  # the stream is idle: the replay before has run
        graph.launch(stream=s)
        s.synchronize()
    assert log[0] == 2 and list(log[1:3]) == [1, 2]
    graph.close()


def test_misuse_is_refused(cpu: qd.Context) -> None:
    s = cpu.create_stream()
    word_buf, _ = _word(cpu)
    with pytest.raises(qd.InvalidOperationError):  # not capturing
        s.begin_conditional(qd.CONDITIONAL_IF, condition=word_buf.address)
    with pytest.raises(qd.InvalidOperationError):
        s.end_conditional()
    with pytest.raises(qd.InvalidOperationError):
        s.next_branch()
    with s.capture() as graph:
        with pytest.raises(qd.InvalidArgumentError):
            s.begin_conditional(99, condition=word_buf.address)
        with pytest.raises(qd.InvalidArgumentError):
            s.begin_conditional(qd.CONDITIONAL_SWITCH, condition=word_buf.address)
        with pytest.raises(qd.InvalidArgumentError):
            s.begin_conditional(qd.CONDITIONAL_IF, condition=word_buf.address + 1)
        with pytest.raises(qd.InvalidOperationError):
            s.end_conditional()  # none open
    graph.close()
    s.close()
    with pytest.raises(qd.ObjectClosedError):
        s.end_conditional()
