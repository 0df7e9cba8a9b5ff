//! [`Graph`] and [`Capture`]: work captured once from a stream and replayed many times.

use crate::context::Context;
use crate::args::KernelArgs;
use crate::error::{check, Result};
use crate::module::Kernel;
use crate::stream::Stream;
use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A capture in progress on a stream, from [`Stream::begin_capture`] until [`Capture::end`].
///
/// While it lives, the work queued on its stream, and on every stream that joins the capture
/// (the leases of [`Stream::fork`], the streams of [`Stream::launch_parallel`], a stream that
/// waits on an event recorded inside it), is recorded instead of run (qd.h, "Graphs").
/// Blocking calls on a capturing stream fail with [`crate::Error::InvalidOperation`].
///
/// The guard borrows its stream, so the stream cannot be dropped while it captures. Dropping
/// the guard without [`Capture::end`] ends the capture and drops what it recorded; if the
/// capture cannot end (a forked stream has not joined back) it stays open until the context
/// is destroyed, and the failure is kept for [`Context::take_drop_errors`]. A
/// [`crate::DeviceBuffer`] dropped while a capture is open is freed once it has ended.
///
/// Host callbacks ([`Stream::host_fn`]) are refused on a capturing stream: their closure runs
/// once, and a graph would call it on every replay.
///
/// `Send + Sync`: a borrow of a `Sync` stream; qd allows ending a capture from any thread.
///
/// The guard is `#[must_use]`: a capture begun and dropped at once records nothing.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
/// let s = qd::Stream::new(&ctx).unwrap();
/// s.begin_capture().unwrap(); // error: unused `Capture` that must be used
/// ```
///
/// ```compile_fail,E0505
/// let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
/// let s = qd::Stream::new(&ctx).unwrap();
/// let capture = s.begin_capture().unwrap();
/// drop(s); // error: `s` is borrowed by the capture
/// capture.end().unwrap();
/// ```
#[must_use = "the capture ends when the guard drops: keep it, and end it with Capture::end"]
pub struct Capture<'s, 'ctx> {
    stream: &'s Stream<'ctx>,
    open: bool,
}

impl fmt::Debug for Capture<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture").field("stream", &format_args!("{:#x}", self.stream.raw())).finish()
    }
}

impl<'s, 'ctx> Capture<'s, 'ctx> {
    /// The stream the capture began on (its origin).
    pub fn stream(&self) -> &'s Stream<'ctx> {
        self.stream
    }

    /// End the capture and return what it recorded as a [`Graph`].
    /// Errors: [`crate::Error::InvalidOperation`] when a stream that joined the capture has not
    /// joined back (the message names it; the capture stays open and the guard is gone, so
    /// join it and end the capture through [`Stream::end_capture`]), or when the driver
    /// invalidated the capture (CUDA, HIP).
    pub fn end(mut self) -> Result<Graph<'ctx>> {
        self.open = false;
        self.stream.end_capture()
    }
}

impl Drop for Capture<'_, '_> {
    fn drop(&mut self) {
        if self.open {
            // Abandoned: end it and drop what it recorded. A failure leaves it open (a stream
            // has not joined back) and is kept for Context::take_drop_errors.
            let mut raw = 0;
            let ctx = self.stream.context();
            // SAFETY: valid output; a graph made here is destroyed at once.
            let status = unsafe { qd_sys::qd_stream_end_capture(self.stream.raw(), &mut raw) };
            if status == qd_sys::QD_SUCCESS {
                // SAFETY: the graph just made, known to no one else.
                unsafe { qd_sys::qd_graph_destroy(raw) };
                ctx.capture_ended();
            } else {
                ctx.drop_failed("Capture", status);
            }
        }
    }
}

/// A captured graph: replay it with [`Graph::launch`], give it new argument values with
/// [`Graph::update`]. On CUDA and HIP it is a native driver graph, and a replay is one driver
/// launch; on the CPU backend a replay re-queues the recorded tasks with the same concurrency.
///
/// It borrows its [`Context`], like every child. `Drop` destroys it at once; replays already
/// queued still run.
///
/// `Send + Sync`: a 64-bit handle plus a borrow of its `Sync` context; qd allows every graph
/// call from any thread.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let total = Arc::new(AtomicU32::new(0));
/// let sink = total.clone();
/// let add = qd::HostKernel::new(&ctx, "add", move |_block, args| {
///     sink.fetch_add(args.get::<u32>(0)?, Ordering::Relaxed);
///     Ok(())
/// })?;
/// let s = qd::Stream::new(&ctx)?;
/// let one = qd::LaunchConfig::new();
///
/// let capture = s.begin_capture()?;
/// s.launch_host(&add, &one, (1u32,))?; // recorded, not run
/// let graph = capture.end()?;
/// assert_eq!(total.load(Ordering::Relaxed), 0);
///
/// for _ in 0..3 {
///     // SAFETY: the graph uses no memory (a host kernel with a value argument).
///     unsafe { graph.launch(&s)? };
/// }
/// s.synchronize()?;
/// assert_eq!(total.load(Ordering::Relaxed), 3);
///
/// // New argument values: capture the same calls again and update.
/// let capture = s.begin_capture()?;
/// s.launch_host(&add, &one, (10u32,))?;
/// graph.update(&capture.end()?)?;
/// unsafe { graph.launch(&s)? };
/// s.synchronize()?;
/// assert_eq!(total.load(Ordering::Relaxed), 13);
/// # Ok::<(), qd::Error>(())
/// ```
pub struct Graph<'ctx> {
    raw: qd_sys::qd_graph,
    ctx: &'ctx Context,
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph").field("raw", &format_args!("{:#x}", self.raw)).finish()
    }
}

impl<'ctx> Graph<'ctx> {
    /// The `qd_graph` handle; valid while `self` lives.
    pub fn raw(&self) -> qd_sys::qd_graph {
        self.raw
    }

    /// The context the graph belongs to.
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    /// Replay the graph on `stream` (any stream of its context): it starts after the work
    /// queued there so far, and later work there waits for all of it; the host does not block.
    /// Errors: [`crate::Error::WrongContext`] for a stream of another context,
    /// [`crate::Error::InvalidOperation`] when `stream` is capturing.
    ///
    /// # Safety
    /// A replay runs the captured operations again with the addresses they were captured with:
    /// every buffer the captured copies, sets and kernels use must still be live (a capture
    /// borrows no buffer, so the compiler cannot check it), as for [`Stream::launch`].
    pub unsafe fn launch(&self, stream: &Stream<'_>) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_graph_launch(self.raw, stream.raw()) })
    }

    /// Prepare the replays on `stream` ahead of the first [`Graph::launch`] (`qd_graph_upload`,
    /// as `cuGraphUpload`), so that the first launch costs what later ones do. Ordered on
    /// `stream` like a launch; it runs nothing, and a launch afterwards (on any stream) gives
    /// the same results as without it. On the CPU backend it only makes the pooled events a
    /// replay takes. Errors: [`crate::Error::WrongContext`] for a stream of another context,
    /// [`crate::Error::InvalidOperation`] when `stream` is capturing (the capture goes on),
    /// [`crate::Error::NotSupported`] where the CUDA driver lacks `cuGraphUpload` (before 11.1).
    pub fn upload(&self, stream: &Stream<'_>) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_graph_upload(self.raw, stream.raw()) })
    }

    /// Write the graph to `path` as a Graphviz DOT digraph (`qd_graph_debug_dot`, as
    /// `cuGraphDebugDotPrint`), from the operations qd recorded at capture, on every backend:
    /// a cluster per stream ("lane N"), a node per operation (kernel name, grid and block;
    /// bytes of copies, sets and allocations; records and waits), the lanes' order and the
    /// fork, join and event edges; a conditional's bodies as clusters. `verbose` adds argument
    /// sizes and addresses (`QD_GRAPH_DOT_VERBOSE`). The file is written whole.
    /// Errors: [`crate::Error::InvalidArgument`] when `path` is empty, a directory or special
    /// file, contains a NUL byte, or cannot be written.
    pub fn debug_dot(&self, path: impl AsRef<Path>, verbose: bool) -> Result<()> {
        let cpath = CString::new(path.as_ref().as_os_str().as_bytes()).map_err(|_| {
            crate::Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, "DOT path contains a NUL byte")
        })?;
        let flags = if verbose { qd_sys::QD_GRAPH_DOT_VERBOSE } else { 0 };
        // SAFETY: a NUL-terminated path that outlives the call.
        check(unsafe { qd_sys::qd_graph_debug_dot(self.raw, cpath.as_ptr(), flags) })
    }

    /// Give this graph the values of `from`, a graph captured from the same calls with other
    /// arguments; later replays use them, replays already queued keep theirs. `from` is
    /// unchanged. Errors: [`crate::Error::InvalidOperation`] when the shapes differ (the
    /// message names the first difference; this graph is unchanged).
    pub fn update(&self, from: &Graph<'_>) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_graph_update(self.raw, from.raw) })
    }

    /// The graph's kernel nodes (`qd_graph_kernel_node_count`): its launches in the order they
    /// were queued during the capture (a parallel launch's tasks in task order), numbered from
    /// 0; launches inside a conditional's body are not among them.
    pub fn kernel_node_count(&self) -> Result<u32> {
        let mut n = 0u32;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_graph_kernel_node_count(self.raw, &mut n) })?;
        Ok(n)
    }

    /// Rebind kernel node `node` (`qd_graph_set_kernel_args`): every later replay runs that
    /// launch with `args` (copied before this returns); replays already queued keep theirs.
    /// `kernel` is the kernel the node launches; the count and every size of `args` must be the
    /// captured launch's. Errors: [`crate::Error::InvalidArgument`] for a node past the last or
    /// other counts or sizes; [`crate::Error::NotSupported`] for the node of a Rust host kernel
    /// (its arguments carry the capture's reference to the closure: capture again and
    /// [`Graph::update`]) or where the driver cannot rebind (a HIP runtime without the
    /// kernel-node functions qd.h names).
    ///
    /// # Safety
    /// As for [`Stream::launch`]: the replays run the kernel with these values, so every
    /// address among them must stay valid for as long as the graph may be replayed.
    pub unsafe fn set_kernel_args<A: KernelArgs>(&self, node: u32, kernel: &Kernel<'_>, args: A) -> Result<()> {
        if kernel.host.is_some() {
            return Err(crate::Error::with_message(
                qd_sys::QD_ERROR_NOT_SUPPORTED,
                "the node of a Rust host kernel cannot be rebound (its arguments hold the capture's \
                 reference to the closure): capture the graph again and use Graph::update",
            ));
        }
        let packed = args.pack();
        let list = packed.as_ref();
        // SAFETY: `list` entries point into `args`, alive until this returns; qd copies them.
        check(unsafe { qd_sys::qd_graph_set_kernel_args(self.raw, node, list.as_ptr(), list.len() as u32) })
    }
}

impl Graph<'_> {
    /// Destroy the graph now (`qd_graph_destroy`); replays already queued still run. `Drop`
    /// does the same, keeping a failure for [`Context::take_drop_errors`].
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the handle was ours.
        check(unsafe { qd_sys::qd_graph_destroy(raw) })
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle is ours.
        let status = unsafe { qd_sys::qd_graph_destroy(self.raw) };
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed("Graph", status);
        }
    }
}

impl<'ctx> Stream<'ctx> {
    /// Begin capturing the work queued on this stream (it becomes the capture's origin); see
    /// [`Capture`]. Errors: [`crate::Error::InvalidOperation`] when the stream is capturing
    /// already (its own capture or one it joined).
    pub fn begin_capture(&self) -> Result<Capture<'_, 'ctx>> {
        // Counted before it begins, so that no buffer dropped meanwhile is freed into it.
        self.context().captures.lock().unwrap_or_else(|p| p.into_inner()).open += 1;
        // SAFETY: plain handle call.
        if let Err(e) = check(unsafe { qd_sys::qd_stream_begin_capture(self.raw()) }) {
            self.context().capture_ended();
            return Err(e);
        }
        Ok(Capture { stream: self, open: true })
    }

    /// Open a conditional on this capturing stream (`qd_stream_begin_conditional`; qd.h,
    /// "Conditionals"): the work queued here from now on is its first body. `condition` is the
    /// address of the `u32` word the graph's kernels write (memory of the context);
    /// `num_cases` is a [`ConditionalKind::Switch`]'s number of bodies, 0 for the other kinds.
    /// Close it with [`Stream::end_conditional`] ([`Stream::next_branch`] between an IF_ELSE's
    /// or a SWITCH's bodies). CPU contexts, and CUDA driver graphs from driver 12.3 on (12.8 for
    /// IF_ELSE and SWITCH); elsewhere [`crate::Error::NotSupported`] with the reason.
    pub fn begin_conditional(&self, kind: ConditionalKind, condition: u64, num_cases: u32) -> Result<()> {
        let desc = qd_sys::qd_conditional_desc {
            kind: kind as qd_sys::qd_conditional_kind,
            num_cases,
            condition,
            ..qd_sys::QD_CONDITIONAL_DESC_INIT
        };
        // SAFETY: a valid descriptor, read during the call.
        check(unsafe { qd_sys::qd_stream_begin_conditional(self.raw(), &desc) })
    }

    /// Close the current body of the innermost conditional open on this stream and open its
    /// next one: an IF_ELSE's else body, a SWITCH's next case (`qd_stream_next_branch`).
    pub fn next_branch(&self) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_stream_next_branch(self.raw()) })
    }

    /// Close the innermost conditional open on this stream: later work follows all of it
    /// (`qd_stream_end_conditional`).
    pub fn end_conditional(&self) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_stream_end_conditional(self.raw()) })
    }

    /// The native handle of the innermost conditional open on this stream
    /// (`qd_conditional_handle`), for kernels that set its value themselves;
    /// [`crate::Error::NotSupported`] where the capture is not a CUDA driver graph.
    pub fn conditional_handle(&self) -> Result<u64> {
        let mut h = 0u64;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_conditional_handle(self.raw(), &mut h) })?;
        Ok(h)
    }

    /// End the capture whose origin is this stream (for a capture whose [`Capture::end`]
    /// failed because a stream had not joined back yet). Errors: as [`Capture::end`], and
    /// [`crate::Error::InvalidOperation`] when the stream is not capturing.
    pub fn end_capture(&self) -> Result<Graph<'ctx>> {
        let mut raw = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_end_capture(self.raw(), &mut raw) })?;
        self.context().capture_ended();
        Ok(Graph { raw, ctx: self.context() })
    }
}

/// What a conditional decides (`qd_conditional_kind`; qd.h, "Conditionals").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ConditionalKind {
    /// Runs its body when the value is not 0.
    If = qd_sys::QD_CONDITIONAL_IF,
    /// Runs its first body when the value is not 0, else its second.
    IfElse = qd_sys::QD_CONDITIONAL_IF_ELSE,
    /// Runs its body while the value is not 0, deciding before each iteration.
    While = qd_sys::QD_CONDITIONAL_WHILE,
    /// Runs case number value; none when value is not below its number of cases.
    Switch = qd_sys::QD_CONDITIONAL_SWITCH,
}
