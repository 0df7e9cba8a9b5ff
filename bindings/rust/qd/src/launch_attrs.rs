//! Launch attributes (qd.h, "Launch attributes"): [`LaunchAttrs`], the builder that
//! [`crate::Stream::launch_with`], [`crate::Stream::launch_host_with`] and [`crate::Task::attrs`]
//! take.

use crate::event::Event;
use std::marker::PhantomData;

/// What a launch asks of the device beyond grid, block and shared memory (`qd_launch_ex`):
/// thread-block clusters, programmatic dependent launch, a per-launch priority and a
/// launch-completion event. The default asks for nothing (a plain `qd_launch`).
///
/// On the CPU backend a cluster runs its blocks as any grid, PDL is plain stream order, a
/// priority makes the worker take this launch's stream first when it has a choice, and the
/// completion event completes as the launch starts its last block. An attribute the backend or
/// device cannot honour is [`crate::Error::NotSupported`], naming it.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let s = qd::Stream::new(&ctx)?;
/// let done = qd::Event::new(&ctx)?;
/// let k = qd::HostKernel::new(&ctx, "k", |_, _| Ok(()))?;
/// let attrs = qd::LaunchAttrs::new().cluster(2, 1, 1).programmatic(true).priority(-1).completion_event(&done);
/// s.launch_host_with(&k, &qd::LaunchConfig::new().grid(4, 1, 1), &attrs, ())?;
/// s.synchronize()?;
/// assert!(done.query()?);
/// # Ok::<(), qd::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchAttrs<'e> {
    /// Blocks per thread-block cluster in x, y, z (each at least 1, dividing the grid); `None`:
    /// no clusters.
    pub cluster: Option<[u32; 3]>,
    /// Programmatic dependent launch: the kernel may start before the previous kernel of its
    /// stream has finished, and must wait for its grid dependency before reading its results.
    pub programmatic: bool,
    /// This launch's priority (lower is more urgent), in place of its stream's; `None`: the
    /// stream's.
    pub priority: Option<i32>,
    completion_event: qd_sys::qd_event,
    _event: PhantomData<&'e ()>,
}

impl<'e> LaunchAttrs<'e> {
    /// No attribute.
    pub const fn new() -> Self {
        LaunchAttrs { cluster: None, programmatic: false, priority: None, completion_event: 0, _event: PhantomData }
    }
    /// Group the grid's blocks into clusters of `x` x `y` x `z` blocks.
    #[must_use]
    pub const fn cluster(mut self, x: u32, y: u32, z: u32) -> Self {
        self.cluster = Some([x, y, z]);
        self
    }
    /// Programmatic dependent launch on or off.
    #[must_use]
    pub const fn programmatic(mut self, on: bool) -> Self {
        self.programmatic = on;
        self
    }
    /// This launch's priority.
    #[must_use]
    pub const fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }
    /// An event of the stream's context that the launch records: it completes once every block
    /// of the launch has started, which may be long before the kernel ends.
    #[must_use]
    pub fn completion_event(mut self, event: &'e Event<'_>) -> Self {
        self.completion_event = event.raw();
        self
    }

    /// The `qd_launch_attr` array and how many of its entries are used.
    pub(crate) fn raw(&self) -> ([qd_sys::qd_launch_attr; 4], u32) {
        let zero = qd_sys::qd_launch_attr {
            kind: 0,
            value: 0,
            cluster: [0; 3],
            reserved0: 0,
            event: 0,
            reserved: [0; 2],
        };
        let mut list = [zero; 4];
        let mut n = 0usize;
        if let Some(c) = self.cluster {
            list[n] = qd_sys::qd_launch_attr { kind: qd_sys::QD_LAUNCH_ATTR_CLUSTER_DIM, cluster: c, ..zero };
            n += 1;
        }
        if self.programmatic {
            list[n] = qd_sys::qd_launch_attr { kind: qd_sys::QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION, value: 1, ..zero };
            n += 1;
        }
        if let Some(p) = self.priority {
            list[n] = qd_sys::qd_launch_attr { kind: qd_sys::QD_LAUNCH_ATTR_PRIORITY, value: p, ..zero };
            n += 1;
        }
        if self.completion_event != 0 {
            list[n] = qd_sys::qd_launch_attr {
                kind: qd_sys::QD_LAUNCH_ATTR_COMPLETION_EVENT,
                event: self.completion_event,
                ..zero
            };
            n += 1;
        }
        (list, n as u32)
    }
}
