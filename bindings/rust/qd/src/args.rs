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
/// structs) and for `&DeviceBuffer` / `&HostBuffer` (their address). qd copies the `size` bytes
/// at `data` without any check, so the trait is `unsafe`: safe code cannot make an argument
/// that points anywhere but into itself. For your own types, implement [`Pod`] instead.
///
/// A program that forbids `unsafe` cannot forge one:
///
/// ```compile_fail,E0200
/// #![deny(unsafe_code)]
/// struct Forged;
/// impl qd::KernelArg for Forged { // error: the trait requires an `unsafe impl`
///     fn as_qd_arg(&self) -> qd::sys::qd_arg {
///         qd::sys::qd_arg { data: 16 as *const std::ffi::c_void, size: 1 << 20 }
///     }
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unsafe_code)]
/// struct Forged;
/// // SAFETY: none: the lint refuses the `unsafe impl` itself.
/// unsafe impl qd::KernelArg for Forged { // error: implementation of an `unsafe` trait (unsafe_code)
///     fn as_qd_arg(&self) -> qd::sys::qd_arg {
///         qd::sys::qd_arg { data: 16 as *const std::ffi::c_void, size: 1 << 20 }
///     }
/// }
/// ```
///
/// # Safety
/// `as_qd_arg` must return `data` pointing to `size` initialised bytes that live as long as
/// `self` (qd reads them before the launch call returns), and `size` must be what the kernel
/// reads for this parameter.
pub unsafe trait KernelArg {
    /// The argument's bytes: `data` points into `self` for `size` bytes.
    fn as_qd_arg(&self) -> qd_arg;
}

// SAFETY: `data` points to the `size_of::<T>()` bytes of `self`; Pod has no padding.
unsafe impl<T: Pod> KernelArg for T {
    #[inline(always)]
    fn as_qd_arg(&self) -> qd_arg {
        qd_arg { data: self as *const T as *const c_void, size: size_of::<T>() as u64 }
    }
}

mod sealed {
    /// Only the tuples of this crate are argument lists.
    pub trait Sealed {}
}

/// The argument list of a launch: a tuple of [`KernelArg`]s (up to 16), or `()` for none.
///
/// ```
/// fn takes<A: qd::KernelArgs>(_: A) {}
/// takes(());
/// takes((1u32,));
/// takes((qd::DevicePtr(0x1000), 8u32, 0.5f32));
/// ```
///
/// Sealed: only those tuples implement it, so no other type can hand qd a forged list.
///
/// ```compile_fail,E0277
/// struct Forged;
/// impl qd::KernelArgs for Forged { // error: `Forged: Sealed` is not satisfied
///     type Packed = [qd::sys::qd_arg; 1];
///     fn pack(&self) -> Self::Packed {
///         [qd::sys::qd_arg { data: 16 as *const std::ffi::c_void, size: 8 }]
///     }
/// }
/// ```
pub trait KernelArgs: sealed::Sealed {
    /// The packed `qd_arg` array, on the stack.
    type Packed: AsRef<[qd_arg]>;
    /// Pack: each entry points into `self`, so `self` must outlive the use of the result.
    fn pack(&self) -> Self::Packed;
    /// Number of arguments.
    #[doc(hidden)]
    const COUNT: usize;
    /// Pack behind a Rust host kernel's hidden first argument, `header`, whose count and
    /// sizes this fills in.
    #[doc(hidden)]
    fn pack_host(&self, header: &mut HostHeader) -> HostPacked;
}

/// The hidden first argument of every launch of a Rust host kernel: the closure's address,
/// the number of the caller's arguments and each one's size, and a tag the C trampoline checks
/// before it trusts the rest.
#[doc(hidden)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HostHeader {
    pub(crate) closure: u64,
    pub(crate) count: u32,
    pub(crate) tag: u32,
    pub(crate) sizes: [u32; MAX_HOST_ARGS],
}

/// Most arguments of a Rust host kernel launch: the longest [`KernelArgs`] tuple.
pub(crate) const MAX_HOST_ARGS: usize = 16;
/// [`HostHeader::tag`]: "qdRk".
pub(crate) const HOST_HEADER_TAG: u32 = u32::from_le_bytes(*b"qdRk");
/// Bytes of a header before its sizes.
pub(crate) const HOST_HEADER_FIXED: usize = 16;

impl HostHeader {
    #[inline(always)]
    pub(crate) fn new(closure: u64) -> HostHeader {
        HostHeader { closure, count: 0, tag: HOST_HEADER_TAG, sizes: [0; MAX_HOST_ARGS] }
    }
    /// The header as an argument: the fixed part and `count` sizes.
    #[inline(always)]
    pub(crate) fn as_arg(&self) -> qd_arg {
        qd_arg { data: self as *const HostHeader as *const c_void, size: (HOST_HEADER_FIXED + 4 * self.count as usize) as u64 }
    }
}

/// At most 17 entries (a header and 16 arguments) of which the first `len` are set; for
/// [`KernelArgs::pack_host`]. of which the first `len` are set; for [`KernelArgs::pack_host`].
#[doc(hidden)]
pub struct HostPacked {
    pub(crate) args: [std::mem::MaybeUninit<qd_arg>; 17],
    pub(crate) len: usize,
}

impl HostPacked {
    #[inline(always)]
    pub(crate) fn as_slice(&self) -> &[qd_arg] {
        // SAFETY: the first `len` entries are initialised (pack_host).
        unsafe { std::slice::from_raw_parts(self.args.as_ptr() as *const qd_arg, self.len) }
    }
}

impl sealed::Sealed for () {}
impl KernelArgs for () {
    type Packed = [qd_arg; 0];
    const COUNT: usize = 0;
    #[inline(always)]
    fn pack(&self) -> [qd_arg; 0] {
        []
    }
    #[inline(always)]
    fn pack_host(&self, header: &mut HostHeader) -> HostPacked {
        header.count = 0;
        let mut p = HostPacked { args: [std::mem::MaybeUninit::uninit(); 17], len: 1 };
        p.args[0].write(header.as_arg());
        p
    }
}

macro_rules! tuple_args {
    ($n:literal: $($name:ident $idx:tt),+) => {
        impl<$($name: KernelArg),+> sealed::Sealed for ($($name,)+) {}
        impl<$($name: KernelArg),+> KernelArgs for ($($name,)+) {
            type Packed = [qd_arg; $n];
            const COUNT: usize = $n;
            #[inline(always)]
            fn pack(&self) -> [qd_arg; $n] {
                [$(self.$idx.as_qd_arg()),+]
            }
            #[inline(always)]
            fn pack_host(&self, header: &mut HostHeader) -> HostPacked {
                let mut p = HostPacked { args: [std::mem::MaybeUninit::uninit(); 17], len: $n + 1 };
                header.count = $n;
                $(
                    let a = self.$idx.as_qd_arg();
                    header.sizes[$idx] = u32::try_from(a.size).unwrap_or(u32::MAX);
                    p.args[$idx + 1].write(a);
                )+
                p.args[0].write(header.as_arg());
                p
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
