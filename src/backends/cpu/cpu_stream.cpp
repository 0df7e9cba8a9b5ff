#include "backends/cpu/cpu_stream.h"
#include "common/limits.h"

#include <algorithm>
#include <cstdint>
#include <new>

#include "backends/cpu/cpu_event.h"
#include "backends/cpu/cpu_module.h"
#include "backends/cpu/cpu_timeline.h"
#include "backends/cpu/host_memory.h"
#include "backends/cpu/marker.h"
#include "backends/cpu/spin.h"
#include "common/error.h"

namespace qd::backend::cpu {

namespace {

// Tasks a worker runs from one stream before it yields to other ready streams.
constexpr int kFairnessBudget = 32;

// Shared memory per block beyond which a launch is refused up front instead of failing on the
// worker, where the only way to report it would be to lose the context.
constexpr uint32_t kMaxSharedMemBytes = 256u << 20;

qd_status fail_destroyed() { return fail_context_destroyed(); }

void *to_pointer(uint64_t address) noexcept {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
}

}  // namespace

CpuStream::CpuStream(std::shared_ptr<Scheduler> scheduler, int32_t priority)
    : scheduler_(std::move(scheduler)), priority_(priority), queue_(scheduler_->chunk_pool()) {}

std::shared_ptr<CpuStream> CpuStream::create(std::shared_ptr<Scheduler> scheduler,
                                             int32_t priority) {
    auto stream = std::make_shared<CpuStream>(scheduler, priority);
    if (!scheduler->register_stream(stream.get(), &stream->registry_entry_)) return nullptr;
    stream->registered_ = true;
    return stream;
}

CpuStream::~CpuStream() {
    if (registered_) scheduler_->unregister_stream(registry_entry_);
    // Only a context shut down under queued work can leave tasks here (otherwise the scheduler
    // would still hold the stream); dispose of them as the shutdown would.
    StreamList woken;
    abandon_all(woken);
    // Streams of other contexts that waited on this one's records run on (their own workers).
    scheduler_->make_ready(woken);
}

qd_status CpuStream::get_native_handle(uint64_t *) const {
    return fail(QD_ERROR_NOT_SUPPORTED, "the CPU backend has no native streams");
}

// --- Enqueue ---------------------------------------------------------------------------------

// The one enqueue path: one short spin-lock section, the task built in place, and the
// scheduler involved only when the stream goes from idle to having work.
template <class Build>
qd_status CpuStream::enqueue(uint32_t bytes, Build &&build) {
    std::unique_lock<SpinLock> lock(lock_);
    if (scheduler_->stopping()) return fail_destroyed();
    build(queue_.push_back(bytes));
    enqueued_.store(enqueued_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    if (scheduled_) return QD_SUCCESS;
    scheduled_ = true;
    lock.unlock();
    scheduler_->make_ready(shared_from_this());
    return QD_SUCCESS;
}

qd_status CpuStream::launch(Kernel &kernel, const LaunchDims &dims, const qd_arg *args,
                            uint32_t num_args) {
    auto &cpu_kernel = static_cast<CpuKernel &>(kernel);
    if (dims.shared_mem_bytes > kMaxSharedMemBytes)
        return fail(QD_ERROR_LAUNCH_FAILED,
                    "kernel '%s': %u bytes of shared memory per block exceed the CPU backend's "
                    "limit of %u",
                    cpu_kernel.name(), dims.shared_mem_bytes, kMaxSharedMemBytes);
    const uint32_t bytes = launch_record_bytes(args, num_args);
    std::shared_ptr<void> ref = cpu_kernel.shared_from_this();
    return enqueue(bytes, [&](void *slot) {
        Task *task = new (slot) Task(TaskKind::kLaunch, bytes, std::move(ref));
        for (int i = 0; i < 3; ++i) {
            task->u.launch.grid[i] = dims.grid[i];
            task->u.launch.block[i] = dims.block[i];
        }
        task->extra = dims.shared_mem_bytes;
        if (num_args != 0) pack_launch_args(*task, args, num_args);
    });
}

// Launch attributes on the CPU (qd.h, "Launch attributes"): a cluster runs its blocks as any
// grid does and PDL is plain stream order, so only PRIORITY and COMPLETION_EVENT change what
// happens; both live in the task's LaunchExtras.
qd_status CpuStream::launch_ex(Kernel &kernel, const LaunchDims &dims, const LaunchAttrs &attrs,
                               const qd_arg *args, uint32_t num_args) {
    auto &cpu_kernel = static_cast<CpuKernel &>(kernel);
    if (dims.shared_mem_bytes > kMaxSharedMemBytes)
        return launch(kernel, dims, args, num_args);  // the same refusal, with its message
    auto extras = std::make_shared<LaunchExtras>();
    extras->kernel = std::static_pointer_cast<CpuKernel>(cpu_kernel.shared_from_this());
    if (attrs.completion_event) extras->completion = std::make_shared<Marker>();
    int urgent_level = -1;
    if (attrs.has_priority) {
        const int32_t p = std::min(kLeastPriority, std::max(kGreatestPriority, attrs.priority));
        if (-p > level()) urgent_level = -p;
    }
    if (urgent_level >= 0) {
        // Counted before the enqueue, so the hand-over of an idle stream already sees it.
        extras->urgent = &urgent_[urgent_level];
        extras->urgent_total = &urgent_total_;
        extras->urgent->fetch_add(1, std::memory_order_relaxed);
        urgent_total_.fetch_add(1, std::memory_order_relaxed);
    }
    // The event is the launch's before the launch can run (a block that queries it sees it
    // pending), and back to its previous record if the enqueue is refused.
    auto *event = static_cast<CpuEvent *>(attrs.completion_event);
    std::shared_ptr<Marker> previous;
    const bool was_recorded = event && event->recorded();
    if (event) {
        previous = event->latest();
        event->publish(extras->completion);
    }
    const uint32_t bytes = launch_record_bytes(args, num_args);
    std::shared_ptr<void> ref = std::move(extras);
    auto *raw = static_cast<LaunchExtras *>(ref.get());
    qd_status st = enqueue(bytes, [&](void *slot) {
        Task *task = new (slot) Task(TaskKind::kLaunchEx, bytes, std::move(ref));
        for (int i = 0; i < 3; ++i) {
            task->u.launch.grid[i] = dims.grid[i];
            task->u.launch.block[i] = dims.block[i];
        }
        task->extra = dims.shared_mem_bytes;
        if (num_args != 0) pack_launch_args(*task, args, num_args);
    });
    if (st != QD_SUCCESS) {
        if (raw->urgent) {
            raw->urgent->fetch_sub(1, std::memory_order_relaxed);
            urgent_total_.fetch_sub(1, std::memory_order_relaxed);
        }
        if (event) event->restore(std::move(previous), was_recorded);
        return st;
    }
    return QD_SUCCESS;
}

int CpuStream::urgent_level() const noexcept {
    for (int level = kPriorityLevels - 1; level > -priority_; --level)
        if (urgent_[level].load(std::memory_order_relaxed) != 0) return level;
    return -priority_;
}

qd_status CpuStream::record(Event &event) {
    auto marker = std::make_shared<Marker>();
    {
        std::lock_guard<SpinLock> lock(lock_);
        if (scheduler_->stopping()) return fail_destroyed();
        if (completed_.load(std::memory_order_relaxed) ==
            enqueued_.load(std::memory_order_relaxed)) {
            // Nothing queued or running: everything before this record is done, so the marker
            // completes now. This is what makes fork (record on an idle parent) free.
            marker->complete_unpublished(Marker::Clock::now());
        } else {
            // Work is pending, so the stream is already scheduled: no hand-over needed.
            new (queue_.push_back(sizeof(Task))) Task(TaskKind::kRecord, sizeof(Task), marker);
            enqueued_.store(enqueued_.load(std::memory_order_relaxed) + 1,
                            std::memory_order_release);
        }
    }
    static_cast<CpuEvent &>(event).publish(std::move(marker));
    return QD_SUCCESS;
}

qd_status CpuStream::wait(Event &event) {
    return wait_marker(static_cast<CpuEvent &>(event).latest());
}

qd_status CpuStream::signal(Timeline &timeline, uint64_t value) {
    auto &cpu_timeline = static_cast<CpuTimeline &>(timeline);
    std::shared_ptr<void> ref = cpu_timeline.shared_from_this();
    StreamList woken;
    {
        std::lock_guard<SpinLock> lock(lock_);
        if (scheduler_->stopping()) return fail_destroyed();
        cpu_timeline.queued(value);
        if (completed_.load(std::memory_order_relaxed) !=
            enqueued_.load(std::memory_order_relaxed)) {
            // Work is pending, so the stream is already scheduled: no hand-over needed.
            Task *task = new (queue_.push_back(sizeof(Task)))
                Task(TaskKind::kSignal, sizeof(Task), std::move(ref));
            task->u.value = value;
            enqueued_.store(enqueued_.load(std::memory_order_relaxed) + 1,
                            std::memory_order_release);
            return QD_SUCCESS;
        }
    }
    // Nothing queued or running: everything before the signal is done, so it happens now (as
    // a record on an idle stream completes at once), outside the stream's lock.
    cpu_timeline.reach(value, woken);
    scheduler_->make_ready(woken);
    return QD_SUCCESS;
}

qd_status CpuStream::wait_value(Timeline &timeline, uint64_t value) {
    return wait_marker(static_cast<CpuTimeline &>(timeline).marker_for(value));
}

qd_status CpuStream::wait_marker(std::shared_ptr<Marker> marker) {
    std::unique_lock<SpinLock> lock(lock_);
    if (scheduler_->stopping()) return fail_destroyed();
    if (!marker || marker->complete()) return QD_SUCCESS;  // nothing to wait for
    new (queue_.push_back(sizeof(Task))) Task(TaskKind::kWait, sizeof(Task), marker);
    enqueued_.store(enqueued_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    if (scheduled_) return QD_SUCCESS;
    // An idle stream whose first task is this wait parks on the marker right here, rather than
    // waking a worker only to have it park the stream.
    scheduled_ = true;
    lock.unlock();
    std::shared_ptr<CpuStream> self = shared_from_this();
    if (!marker->park(self)) scheduler_->make_ready(std::move(self));
    return QD_SUCCESS;
}

qd_status CpuStream::mem_alloc(uint64_t bytes, uint64_t *address) {
    if (scheduler_->stopping()) return fail_destroyed();
    void *block = aligned_host_alloc(with_end_guard(bytes));
    if (!block)
        return fail(QD_ERROR_OUT_OF_MEMORY, "cannot allocate %llu bytes of CPU device memory",
                    static_cast<unsigned long long>(bytes));
    *address = reinterpret_cast<uintptr_t>(block);
    return QD_SUCCESS;
}

qd_status CpuStream::mem_free(uint64_t address) {
    return enqueue(sizeof(Task), [&](void *slot) {
        Task *task = new (slot) Task(TaskKind::kFree, sizeof(Task));
        task->u.free_ptr = to_pointer(address);
    });
}

qd_status CpuStream::memcpy(uint64_t dst, uint64_t src, uint64_t bytes) {
    return enqueue(sizeof(Task), [&](void *slot) {
        Task *task = new (slot) Task(TaskKind::kMemcpy, sizeof(Task));
        task->u.copy.dst = to_pointer(dst);
        task->u.copy.src = to_pointer(src);
        task->u.copy.bytes = bytes;
    });
}

qd_status CpuStream::memset(uint64_t dst, uint8_t value, uint64_t bytes) {
    return enqueue(sizeof(Task), [&](void *slot) {
        Task *task = new (slot) Task(TaskKind::kMemset, sizeof(Task));
        task->u.set.dst = to_pointer(dst);
        task->u.set.bytes = bytes;
        task->extra = value;
    });
}

qd_status CpuStream::host_fn(qd_host_fn fn, void *user_data) {
    return enqueue(sizeof(Task), [&](void *slot) {
        Task *task = new (slot) Task(TaskKind::kHostFn, sizeof(Task));
        task->u.host.fn = fn;
        task->u.host.user_data = user_data;
    });
}

qd_status CpuStream::host_status_fn(qd_host_status_fn fn, uint64_t handle, void *user_data) {
    return enqueue(sizeof(Task), [&](void *slot) {
        Task *task = new (slot) Task(TaskKind::kHostStatusFn, sizeof(Task));
        task->u.status.fn = fn;
        task->u.status.user_data = user_data;
        task->u.status.handle = handle;
    });
}

// --- Host waits ------------------------------------------------------------------------------

qd_status CpuStream::synchronize() {
    wait_for(enqueued_.load(std::memory_order_acquire));
    return QD_SUCCESS;
}

void CpuStream::drain() noexcept {
    uint64_t target;
    {
        std::lock_guard<SpinLock> lock(lock_);
        target = enqueued_.load(std::memory_order_relaxed);
    }
    wait_for(target);
}

qd_status CpuStream::query() {
    if (completed_.load(std::memory_order_acquire) >= enqueued_.load(std::memory_order_acquire))
        return QD_SUCCESS;
    // A record publishes its event and counts itself done in one hold of the lock (run()):
    // taking it here means an event the caller saw complete is counted, so a stream whose last
    // work was that record is idle.
    std::lock_guard<SpinLock> lock(lock_);
    return completed_.load(std::memory_order_relaxed) >= enqueued_.load(std::memory_order_relaxed)
               ? QD_SUCCESS
               : QD_NOT_READY;
}

// Spins, then blocks until `target` tasks have completed.
void CpuStream::wait_for(uint64_t target) noexcept {
    const auto reached = [&] { return completed_.load(std::memory_order_seq_cst) >= target; };
    if (spin_until(reached, kHostSpin)) return;
    std::unique_lock<std::mutex> lock(wait_mutex_);
    for (;;) {
        // Re-armed on every wake-up: the worker resets it, and another waiter may have needed
        // a smaller target.
        if (target < wake_at_.load(std::memory_order_relaxed))
            wake_at_.store(target, std::memory_order_seq_cst);
        if (reached()) return;
        idle_cv_.wait(lock);
    }
}

// --- Worker side -----------------------------------------------------------------------------

CpuStream::RunResult CpuStream::run(const std::shared_ptr<CpuStream> &self,
                                    WorkerState &worker) noexcept {
    std::unique_lock<SpinLock> lock(lock_);
    int budget = kFairnessBudget;
    for (;;) {
        Task *task = queue_.front();
        if (!task) {
            scheduled_ = false;
            return RunResult::kIdle;
        }
        const uint32_t bytes = task->record_bytes;
        bool wake_hosts;
        if (task->kind == TaskKind::kWait) {
            // The stream parks, the worker does not: it goes on with other streams.
            if (static_cast<Marker *>(task->ref.get())->park(self)) return RunResult::kParked;
            task->~Task();
            queue_.pop_front(bytes);
            wake_hosts = count_completion_locked();
        } else if (task->kind == TaskKind::kSignal) {
            // As a record: the counter rises and the signal counts as done in one hold of the
            // stream's lock, and the streams it releases go to this worker's woken list.
            std::shared_ptr<void> timeline = std::move(task->ref);
            const bool hosts_wait =
                static_cast<CpuTimeline *>(timeline.get())->raise(task->u.value, worker.woken);
            task->~Task();
            queue_.pop_front(bytes);
            wake_hosts = count_completion_locked();
            lock.unlock();  // host waiters are woken under a mutex, and the last reference to
                            // the timeline is dropped, never under the spin lock
            if (hosts_wait) static_cast<CpuTimeline *>(timeline.get())->wake_host_waiters();
            timeline.reset();
            lock.lock();
        } else if (task->kind == TaskKind::kRecord) {
            // The event completes and the record counts as done in one hold of the stream's
            // lock (query() takes it before saying "not ready"), so a stream whose last event
            // was seen complete queries idle, and an idle stream's last event is complete.
            std::shared_ptr<void> marker = std::move(task->ref);
            static_cast<Marker *>(marker.get())->publish(Marker::Clock::now(), worker.woken);
            task->~Task();
            queue_.pop_front(bytes);
            wake_hosts = count_completion_locked();
            lock.unlock();  // the marker's host waiters are woken under a mutex, never here
            static_cast<Marker *>(marker.get())->wake_host_waiters();
            marker.reset();
            lock.lock();
        } else {
            // The head record stays put while enqueuers append behind it, so the task runs
            // without the lock.
            lock.unlock();
            if (task->kind != TaskKind::kFree && !worker.woken.empty()) {
                // This task may take long: let other workers have the streams woken so far.
                worker.scheduler->make_ready(worker.woken);
            }
            execute(*task, worker);
            task->~Task();
            lock.lock();
            queue_.pop_front(bytes);
            wake_hosts = count_completion_locked();
        }
        if (wake_hosts) {
            lock.unlock();  // never block on a mutex while holding the spin lock
            wake_host_waiters();
            lock.lock();
        }
        if (--budget == 0) {
            if (worker.scheduler->has_ready()) return RunResult::kYield;
            budget = kFairnessBudget;
        }
    }
}

bool CpuStream::count_completion_locked() noexcept {
    const uint64_t done = completed_.load(std::memory_order_relaxed) + 1;
    completed_.store(done, std::memory_order_seq_cst);
    return done >= wake_at_.load(std::memory_order_seq_cst);
}

void CpuStream::wake_host_waiters() noexcept {
    {
        std::lock_guard<std::mutex> lock(wait_mutex_);
        wake_at_.store(UINT64_MAX, std::memory_order_relaxed);
    }
    idle_cv_.notify_all();
}

void CpuStream::abandon_all(StreamList &woken) noexcept {
    for (;;) {
        // The task's reference is released, and a record's marker completed, after the lock
        // is released: completing may take the marker's host mutex and the last reference to
        // a kernel may dlclose its module, and nothing blocks under a spin lock.
        std::shared_ptr<void> ref;
        bool is_record;
        bool is_signal;
        uint64_t signal_value = 0;
        qd_host_status_fn status_fn = nullptr;  // called below, outside the lock
        void *status_data = nullptr;
        uint64_t status_handle = 0;
        {
            std::lock_guard<SpinLock> lock(lock_);
            Task *task = queue_.front();
            if (!task) {
                completed_.store(enqueued_.load(std::memory_order_relaxed),
                                 std::memory_order_seq_cst);
                scheduled_ = false;
                break;
            }
            const uint32_t bytes = task->record_bytes;
            is_record = task->kind == TaskKind::kRecord;
            is_signal = task->kind == TaskKind::kSignal;
            signal_value = task->u.value;
            if (task->kind == TaskKind::kHostStatusFn) {
                status_fn = task->u.status.fn;
                status_data = task->u.status.user_data;
                status_handle = task->u.status.handle;
            }
            if (!is_record && !is_signal) abandon(*task, woken);
            ref = std::move(task->ref);
            task->~Task();
            queue_.pop_front(bytes);
        }
        if (is_record) static_cast<Marker *>(ref.get())->complete(Marker::Clock::now(), woken);
        // A signal reaches its value, so the waits on it drain (never under the lock: it may
        // wake host waiters under the timeline's mutex).
        if (is_signal) static_cast<CpuTimeline *>(ref.get())->reach(signal_value, woken);
        // The context shut down before its turn (qd_launch_host_status_fn).
        if (status_fn) status_fn(status_handle, QD_ERROR_INVALID_HANDLE, status_data);
    }
    wake_host_waiters();
}

}  // namespace qd::backend::cpu
