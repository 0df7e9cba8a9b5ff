"""Contexts, devices, library discovery and errors (CPU backend)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

import qd
from conftest import subprocess_env


def test_device_count_and_properties_cpu() -> None:
    assert qd.device_count("cpu") == 1
    assert qd.device_count(qd.Backend.CPU) == 1
    props = qd.device_properties("cpu", 0)
    assert props.backend is qd.Backend.CPU and props.device == 0
    assert props.multiprocessors >= 1 and props.name


def test_device_properties_out_of_range_is_invalid_argument() -> None:
    with pytest.raises(qd.InvalidArgumentError) as info:
        qd.device_properties("cpu", 1)
    assert info.value.status == qd.Status.ERROR_INVALID_ARGUMENT
    assert info.value.message  # qd_last_error_message() was captured


def test_unknown_backend_value_is_invalid_argument() -> None:
    with pytest.raises(qd.InvalidArgumentError):
        qd.device_count(99)
    with pytest.raises(qd.InvalidArgumentError):
        qd.Context("metal")
    with pytest.raises(qd.InvalidArgumentError):
        qd.Context(99)


def test_backend_names_are_the_librarys_names_of_every_backend() -> None:
    want = {qd.Backend.DEFAULT: "default", qd.Backend.CPU: "cpu", qd.Backend.CUDA: "cuda",
            qd.Backend.HIP: "hip"}
    for backend, name in want.items():
        assert qd.backend_name(backend) == name
        assert backend.label == name
        assert qd.backend_name(name) == name  # a name passes through
    assert qd.backend_name(int(qd.Backend.CUDA)) == "cuda"
    assert qd.backend_name(99) == "unknown"  # a number that names no backend
    with qd.Context("CPU") as ctx:  # names are matched without regard to case
        assert ctx.backend is qd.Backend.CPU and "cpu:0" in repr(ctx)


def test_backend_name_of_bad_input_raises_a_clear_error() -> None:
    with pytest.raises(qd.InvalidArgumentError, match="'cpu', 'cuda', 'hip'"):
        qd.backend_name("metal")
    with pytest.raises(qd.ArgumentRangeError):
        qd.backend_name(2**40)
    with pytest.raises(qd.ArgumentTypeError):
        qd.backend_name(1.0)  # type: ignore[arg-type]


def test_hip_backend_unavailable_here_or_works() -> None:
    try:
        n = qd.device_count("hip")
    except qd.BackendUnavailableError as exc:
        assert exc.status == qd.Status.ERROR_BACKEND_UNAVAILABLE
        assert exc.message  # carries the loader's reason
    else:
        assert n >= 0


def test_context_lifecycle_and_stats() -> None:
    ctx = qd.Context("cpu", stream_pool_size=4, cpu_worker_threads=2)
    assert not ctx.closed and ctx.handle and ctx.backend is qd.Backend.CPU
    stats = ctx.stats()
    assert stats.stream_pool_capacity == 4 and stats.live_streams == 1  # the default stream
    ctx.close()
    assert ctx.closed and ctx.handle == 0
    ctx.close()  # idempotent
    with pytest.raises(qd.ObjectClosedError):
        ctx.stats()
    with pytest.raises(qd.InvalidHandleError):  # ObjectClosedError is an InvalidHandleError
        ctx.create_stream()


def test_default_backend_is_cpu() -> None:
    with qd.Context() as ctx:
        assert ctx.backend is qd.Backend.CPU
    assert ctx.closed


@pytest.mark.parametrize("kwargs", [
    {"stream_pool_size": 4097},
    {"cpu_worker_threads": 257},
    {"device": 1},
])
def test_context_desc_out_of_range_is_invalid_argument(kwargs) -> None:
    with pytest.raises(qd.InvalidArgumentError) as info:
        qd.Context("cpu", **kwargs)
    assert info.value.status == qd.Status.ERROR_INVALID_ARGUMENT


def test_children_of_a_closed_context_raise_not_crash(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    ev = ctx.create_event()
    lease = ctx.acquire_stream()
    default = ctx.default_stream
    ctx.close()
    for call in (s.synchronize, s.query, lease.synchronize, default.synchronize, ev.query,
                 lambda: ev.record(stream=s), lambda: qd.alloc(8, stream=s)):
        with pytest.raises(qd.InvalidHandleError) as info:
            call()
        assert "closed" in str(info.value)
    s.close()  # closing children afterwards is fine
    lease.close()
    ev.close()


def test_context_synchronize_waits_for_all_streams(ctx: qd.Context) -> None:
    import time
    done = []
    streams = [ctx.create_stream() for _ in range(3)]
    for i, s in enumerate(streams):
        qd.launch_host_fn(lambda i=i: (time.sleep(0.02), done.append(i)), stream=s)
    ctx.synchronize()
    assert sorted(done) == [0, 1, 2]


def test_priority_range_cpu(ctx: qd.Context) -> None:
    least, greatest = ctx.priority_range()
    assert (least, greatest) == (0, -2)
    s = ctx.create_stream(priority=-5)
    assert s.priority == -2  # clamped
    s.close()


def test_error_attributes_and_pickling() -> None:
    exc = qd.PoolExhaustedError("every stream is leased")
    assert exc.status == -8 and exc.status_name == "QD_ERROR_POOL_EXHAUSTED"
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is qd.PoolExhaustedError and again.message == exc.message
    assert issubclass(qd.InvalidArgumentError, ValueError)
    assert issubclass(qd.ArgumentRangeError, OverflowError)
    assert issubclass(qd.HandleTypeError, TypeError)
    assert issubclass(qd.OutOfMemoryError, MemoryError)
    assert issubclass(qd.ObjectClosedError, qd.InvalidHandleError)


def _run(code: str, env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, cwd=str(cwd))


def test_library_not_found_lists_every_place(tmp_path) -> None:
    env = subprocess_env()
    env.pop("QD_LIBRARY")
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # nothing there
    # Copy the package without any libqd next to it, so discovery must fail.
    import shutil
    pkg = tmp_path / "pkg"
    shutil.copytree(os.path.dirname(qd.__file__), pkg / "qd",
                    ignore=shutil.ignore_patterns("libqd.so*", "__pycache__"))
    env["PYTHONPATH"] = str(pkg)
    result = _run("import qd", env, tmp_path)
    if result.returncode == 0:
        pytest.skip("a system-wide libqd is installed, so discovery cannot fail here")
    err = result.stderr
    assert "LibraryNotFoundError" in err
    assert "QD_LIBRARY: not set" in err
    assert "next to the package" in err
    assert "libqd.so.0" in err  # the system loader was asked


def test_library_from_qd_library_env_and_bad_path(tmp_path) -> None:
    env = subprocess_env()
    env["QD_LIBRARY"] = str(tmp_path / "nope" / "libqd.so")
    result = _run("import qd", env, tmp_path)
    assert result.returncode != 0
    assert "QD_LIBRARY=" in result.stderr and "Nothing else was tried" in result.stderr


def test_library_next_to_package(tmp_path) -> None:
    import shutil
    pkg = tmp_path / "pkg"
    shutil.copytree(os.path.dirname(qd.__file__), pkg / "qd",
                    ignore=shutil.ignore_patterns("libqd.so*", "__pycache__"))
    shutil.copy(qd.library_path, pkg / "qd" / "libqd.so.0")
    env = subprocess_env()
    env.pop("QD_LIBRARY")
    env["PYTHONPATH"] = str(pkg)
    result = _run("import qd; print(qd.library_path)", env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(pkg / "qd" / "libqd.so.0")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_context_inherited_across_fork_is_forked_error(ctx: qd.Context) -> None:
    """docs/reliability.md, category 11, through the binding: the parent's context gives
    ForkedError in the child; a context made in the child works; the child exits without
    touching the parent's."""
    import warnings
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into pytest
        code = 1
        try:
            try:
                ctx.create_stream()
            except qd.ForkedError as exc:
                if exc.status == qd.Status.ERROR_FORKED:
                    with qd.Context("cpu") as fresh:
                        with fresh.create_stream() as s:
                            out = bytearray(2)
                            qd.memset(out, 7, stream=s)
                        code = 0 if out == b"\x07\x07" else 3
            os.write(w, bytes([code]))
        finally:
            os._exit(0)
    os.close(w)
    result = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert result == b"\x00"
    ctx.create_stream().close()  # the parent's context is untouched


def test_children_report_closed_once_their_context_closed(cpu_module_path) -> None:
    ctx = qd.Context("cpu")
    s, lease, ev = ctx.create_stream(), ctx.acquire_stream(), ctx.create_event()
    module = ctx.load_module(cpu_module_path)
    kernel = module.get_kernel("noop")
    buf = qd.alloc(64, stream=s)
    host = ctx.host_alloc(64)
    default = ctx.default_stream
    objects = (s, lease, ev, module, kernel, default)
    assert not any(o.closed for o in objects) and not buf.freed and not host.closed
    ctx.close()
    for o in objects:
        assert o.closed, o
        assert "closed" in repr(o)
    assert buf.freed and host.closed
    for st in (s, lease, default):
        with pytest.raises(qd.ObjectClosedError, match="closed with its qd.Context"):
            with st:
                pass
    for o in objects:
        o.close()  # still idempotent and silent
    assert s.handle == 0


def test_pool_exhausted_message_names_the_python_parameter() -> None:
    with qd.Context("cpu", stream_pool_size=1) as ctx:
        lease = ctx.acquire_stream()
        with pytest.raises(qd.PoolExhaustedError) as info:
            ctx.acquire_stream()
        assert "qd.Context(stream_pool_size=...)" in str(info.value)
        assert "qd_context_desc" not in str(info.value)
        lease.close()


def test_failed_import_names_qd_library_not_found_error(tmp_path) -> None:
    env = subprocess_env()
    env["QD_LIBRARY"] = str(tmp_path / "missing" / "libqd.so")
    r = subprocess.run([sys.executable, "-c", "import qd"], env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("qd.LibraryNotFoundError: "), last
