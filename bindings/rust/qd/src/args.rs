//! Typed kernel arguments: [`Pod`], [`DevicePtr`], [`KernelArg`], [`KernelArgs`], and
//! [`LaunchConfig`].

use qd_sys::qd_arg;
use std::ffi::c_void;
use std::mem::size_of;

/// Plain data: a type whose every bit pattern is a valid value, with no padding, pointers to
/// Rust-owned data or drop glue. Kernel arguments and buffer elements are `Pod`.
///
/// Implemented for the integer and float types, [`DevicePtr`], and arrays of `Pod`. Implement
/// it for a `#[repr(C)]` struct of `Pod` fields without padding to pass it by value:
///
/// ```
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct Params { scale: f32, count: u32, data: qd::DevicePtr }
/// // SAFETY: repr(C), Pod fields, no padding (4 + 4 + 8 bytes).
/// unsafe impl qd::Pod for Params {}
/// ```
///
/// # Safety
/// The type must be `#[repr(C)]` (or a primitive), have no padding bytes, and accept every bit
/// pattern, because qd copies it as bytes and kernels read it back as bytes.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => { $(
        // SAFETY: primitive number types accept every bit pattern and have no padding.
        unsafe impl Pod for $t {}
    )* };
}
pod!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
// SAFETY: an array of Pod has no padding between elements and accepts every bit pattern.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// A device address (`uint64_t` in the C API; a host pointer on the CPU backend), as a kernel
/// argument or a field of a `#[repr(C)]` argument struct.
///
/// Holding one does not keep memory alive: it is an address, like a raw pointer.
///
/// `Send + Sync`: a number.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DevicePtr(pub u64);
// SAFETY: repr(transparent) over u64.
unsafe impl Pod for DevicePtr {}

impl DevicePtr {
    /// The address `bytes` further on (wrapping, as address arithmetic in C).
    pub fn offset(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes))
    }
}

/// One kernel argument: the bytes qd copies when the launch is queued.
///
/// Implemented for every [`Pod`] type (integers, floats, [`DevicePtr`], your `#[repr(C)]`
/// structs) and for `&DeviceBuffer` / `&HostBuffer` (their address).
pub trait KernelArg {
    /// The argument's bytes: `data` points into `self` for `size` bytes.
    fn as_qd_arg(&self) -> qd_arg;
}

impl<T: Pod> KernelArg for T {
    #[inline(always)]
    fn as_qd_arg(&self) -> qd_arg {
        qd_arg { data: self as *const T as *const c_void, size: size_of::<T>() as u64 }
    }
}

/// The argument list of a launch: a tuple of [`KernelArg`]s (up to 16), or `()` for none.
///
/// ```
/// fn takes<A: qd::KernelArgs>(_: A) {}
/// takes(());
/// takes((1u32,));
/// takes((qd::DevicePtr(0x1000), 8u32, 0.5f32));
/// ```
pub trait KernelArgs {
    /// The packed `qd_arg` array, on the stack.
    type Packed: AsRef<[qd_arg]>;
    /// Pack: each entry points into `self`, so `self` must outlive the use of the result.
    fn pack(&self) -> Self::Packed;
}

impl KernelArgs for () {
    type Packed = [qd_arg; 0];
    #[inline(always)]
    fn pack(&self) -> [qd_arg; 0] {
        []
    }
}

macro_rules! tuple_args {
    ($n:literal: $($name:ident $idx:tt),+) => {
        impl<$($name: KernelArg),+> KernelArgs for ($($name,)+) {
            type Packed = [qd_arg; $n];
            #[inline(always)]
            fn pack(&self) -> [qd_arg; $n] {
                [$(self.$idx.as_qd_arg()),+]
            }
        }
    };
}
tuple_args!(1: A 0);
tuple_args!(2: A 0, B 1);
tuple_args!(3: A 0, B 1, C 2);
tuple_args!(4: A 0, B 1, C 2, D 3);
tuple_args!(5: A 0, B 1, C 2, D 3, E 4);
tuple_args!(6: A 0, B 1, C 2, D 3, E 4, F 5);
tuple_args!(7: A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_args!(8: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_args!(9: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_args!(10: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_args!(11: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_args!(12: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
tuple_args!(13: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
tuple_args!(14: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
tuple_args!(15: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
tuple_args!(16: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);

/// Grid and block of a launch (`qd_launch_config`). The default is one block of one thread.
///
/// On the CPU backend a host kernel is called once per block, in row-major block order, and
/// loops over the threads of its block itself. `Send + Sync`: plain numbers. It has the layout of `qd_launch_config`, so a
/// launch passes it to C as it is, without a copy.
///
/// ```
/// let cfg = qd::LaunchConfig::new().grid(4, 1, 1).block(128, 1, 1).shared_mem(256);
/// assert_eq!(cfg.grid, [4, 1, 1]);
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    struct_size: u32,
    /// Blocks in x, y, z (each at least 1).
    pub grid: [u32; 3],
    /// Threads per block in x, y, z (each at least 1).
    pub block: [u32; 3],
    /// Bytes of per-block scratch ("shared memory").
    pub shared_mem_bytes: u32,
}

// LaunchConfig is passed to C as a qd_launch_config: same size and field offsets.
const _: () = {
    use std::mem::offset_of;
    assert!(size_of::<LaunchConfig>() == size_of::<qd_sys::qd_launch_config>());
    assert!(std::mem::align_of::<LaunchConfig>() == std::mem::align_of::<qd_sys::qd_launch_config>());
    assert!(offset_of!(LaunchConfig, struct_size) == offset_of!(qd_sys::qd_launch_config, struct_size));
    assert!(offset_of!(LaunchConfig, grid) == offset_of!(qd_sys::qd_launch_config, grid));
    assert!(offset_of!(LaunchConfig, block) == offset_of!(qd_sys::qd_launch_config, block));
    assert!(offset_of!(LaunchConfig, shared_mem_bytes) == offset_of!(qd_sys::qd_launch_config, shared_mem_bytes));
};

impl Default for LaunchConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl LaunchConfig {
    /// One block of one thread.
    pub const fn new() -> Self {
        LaunchConfig {
            struct_size: size_of::<qd_sys::qd_launch_config>() as u32,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_mem_bytes: 0,
        }
    }
    /// Set the grid.
    #[must_use]
    pub const fn grid(mut self, x: u32, y: u32, z: u32) -> Self {
        self.grid = [x, y, z];
        self
    }
    /// Set the block.
    #[must_use]
    pub const fn block(mut self, x: u32, y: u32, z: u32) -> Self {
        self.block = [x, y, z];
        self
    }
    /// Set the per-block scratch size.
    #[must_use]
    pub const fn shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }
    /// The configuration as the C struct it is laid out as.
    #[inline(always)]
    pub(crate) fn as_raw(&self) -> *const qd_sys::qd_launch_config {
        self as *const LaunchConfig as *const qd_sys::qd_launch_config
    }
    #[inline(always)]
    pub(crate) fn raw(&self) -> qd_sys::qd_launch_config {
        // SAFETY: same layout (checked above), every bit pattern valid.
        unsafe { *self.as_raw() }
    }
}
