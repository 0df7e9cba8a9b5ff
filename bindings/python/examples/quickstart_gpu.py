"""qd quick start (CUDA): a PTX kernel on a qd stream, pre-packed launches, and the CUDA stream
protocol that cuda.core, CuPy and PyTorch understand."""
import array
import ctypes

import qd

# add_one(int *data, unsigned n): data[i] += 1. PTX made by nvcc -ptx; any PTX, cubin or
# fatbin works the same way (ctx.load_module also takes a file path).
PTX = b"""
.version 7.0
.target sm_75
.address_size 64
.visible .entry add_one(.param .u64 data, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [data];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r6, [%rd4];
    add.s32 %r7, %r6, 1;
    st.global.u32 [%rd4], %r7;
DONE:
    ret;
}
"""

N = 1 << 20

with qd.Context("cuda") as ctx:
    add_one = ctx.load_module(PTX).get_kernel("add_one")
    with ctx.create_stream(non_blocking=True) as s:  # synchronized and destroyed at the end
        buf = qd.alloc(4 * N, stream=s)
        qd.memset(buf, 0, stream=s)
        launch = add_one.prepare(buf, ctypes.c_uint32(N), grid=(N + 255) // 256, block=256)
        for _ in range(10):
            launch(stream=s)  # one foreign call each
        out = array.array("i", bytes(4 * N))
        qd.memcpy(out, buf, stream=s)
        qd.free(buf, stream=s)
        version, cu_stream = s.__cuda_stream__()  # (0, the CUstream as an int)
    assert set(out) == {10}
    print(f"ok: {N} ints incremented 10 times on CUstream {cu_stream:#x}")
