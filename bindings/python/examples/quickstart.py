"""qd quick start (CPU backend): two streams ordered by an event, a kernel launched plain and
pre-packed, stream-ordered memory, a host callback, and timing."""
import array
import ctypes

import qd

N = 1024


def scale(info, args):
    """A CPU kernel, called once per block: it loops over its block's threads itself."""
    data = qd.kernel_arg(args, 0)  # argument 0: a device address (uint64)
    factor = qd.kernel_arg(args, 1, ctypes.c_float)  # argument 1: a float
    first = info.block_idx[0] * info.block_dim[0]
    block = (ctypes.c_float * info.block_dim[0]).from_address(data + 4 * first)
    for t in range(info.block_dim[0]):
        block[t] *= factor


with qd.Context("cpu") as ctx:
    kernel = qd.Kernel.from_host_fn(ctx, scale)
    a = ctx.create_stream()
    b = ctx.acquire_stream()  # a lease from the context's stream pool

    host = array.array("f", range(N))
    buf = qd.alloc(4 * N, stream=a)  # every call that schedules work names its stream
    qd.memcpy(buf, host, stream=a)  # the binding keeps `host` alive until the copy ran
    start = ctx.create_event(timing=True).record(stream=a)
    kernel.launch(buf, ctypes.c_float(2.0), grid=N // 256, block=256, stream=a)

    b.wait(ctx.create_event().record(stream=a))  # b waits for a's kernel; the host does not
    halve = kernel.prepare(buf, ctypes.c_float(0.5), grid=N // 256, block=256)
    halve(stream=b)  # pre-packed: one foreign call per launch
    qd.launch_host_fn(lambda: print("callback: the kernels have run"), stream=b)
    end = ctx.create_event(timing=True).record(stream=b)
    qd.memcpy(host, buf, stream=b)
    qd.free(buf, stream=b)

    b.synchronize()  # everything queued on b (and, through the event, on a) is done
    assert host.tolist() == [float(i) for i in range(N)]  # doubled, then halved
    print(f"ok: {N} floats through 2 streams in {end - start:.3f} ms")
    b.close()  # back to the pool
    a.close()
