#include "backends/cpu/cpu_context.h"
#include "common/limits.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>
#include <system_error>
#include <thread>

#include "backends/cpu/cpu_event.h"
#include "backends/cpu/cpu_module.h"
#include "backends/cpu/cpu_stream.h"
#include "backends/cpu/cpu_timeline.h"
#include "backends/cpu/host_memory.h"
#include "backends/cpu/task.h"
#include "backends/cpu/worker_affinity.h"
#include "common/error.h"

namespace qd::backend::cpu {

namespace {

qd_status fail_destroyed() { return fail_context_destroyed(); }

// The CPUs this process may run on (taskset, cpusets), not the machine's: more workers than
// usable CPUs only float and contend, and worker pinning applies only when the counts match.
uint32_t usable_cpus() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        const int n = CPU_COUNT(&allowed);
        if (n > 0) return uint32_t(n);
    }
    return std::thread::hardware_concurrency();
}

}  // namespace

qd_status CpuContext::create(uint32_t worker_threads, std::unique_ptr<Context> *out) {
    if (worker_threads > kMaxWorkerThreads)
        return fail(QD_ERROR_INVALID_ARGUMENT, "cpu_worker_threads %u is above the limit %u",
                    worker_threads, kMaxWorkerThreads);
    uint32_t threads = worker_threads;
    if (threads == 0) threads = std::min(std::max(2u, usable_cpus()), kMaxWorkerThreads);
    return start(threads, worker_cpus(threads), out);
}

qd_status CpuContext::start(uint32_t threads, const std::vector<int> &cpus,
                            std::unique_ptr<Context> *out) {
    std::unique_ptr<CpuContext> context(new CpuContext());
    context->threads_ = threads;
    try {
        context->scheduler_ = Scheduler::start(threads, &context->lost_state(), cpus);
        // A loss releases every timeline wait (qd.h, "Timelines": never a hang).
        context->lost_state().on_lost(
            [](void *scheduler) { static_cast<Scheduler *>(scheduler)->release_timelines(); },
            context->scheduler_.get());
    } catch (const std::system_error &e) {
        return fail(QD_ERROR_OUT_OF_MEMORY, "cannot start %u CPU worker threads: %s", threads,
                    e.what());
    }
    *out = std::move(context);
    return QD_SUCCESS;
}

CpuContext::~CpuContext() {
    // The core calls shutdown() itself; this covers a context dropped without it, so no worker
    // outlives the LostState it reports to.
    if (scheduler_) scheduler_->shutdown();
}

qd_status CpuContext::create_stream(uint32_t, int32_t priority, std::shared_ptr<Stream> *out) {
    // Flags (QD_STREAM_NON_BLOCKING) have no meaning without a legacy stream: accepted, ignored.
    if (scheduler_->stopping()) return fail_destroyed();
    const int32_t applied = std::clamp(priority, kGreatestPriority, kLeastPriority);
    std::shared_ptr<CpuStream> stream = CpuStream::create(scheduler_, applied);
    if (!stream) return fail_destroyed();  // shutdown began after the check above
    *out = std::move(stream);
    return QD_SUCCESS;
}

qd_status CpuContext::create_event(bool timing, std::shared_ptr<Event> *out) {
    *out = std::make_shared<CpuEvent>(timing);
    return QD_SUCCESS;
}

qd_status CpuContext::create_timeline(uint64_t initial, std::shared_ptr<Timeline> *out) {
    std::shared_ptr<CpuTimeline> timeline = CpuTimeline::create(scheduler_, &lost_state(), initial);
    if (!timeline) return fail_destroyed();  // the context's shutdown began
    *out = std::move(timeline);
    return QD_SUCCESS;
}

qd_status CpuContext::load_module(const void *image, uint64_t size, std::shared_ptr<Module> *out) {
    return load_cpu_module(image, size, out, scheduler_);
}

qd_status CpuContext::kernel_from_host_fn(qd_host_kernel_fn fn, const char *name,
                                          std::shared_ptr<Kernel> *out) {
    return make_host_fn_kernel(fn, name, out);
}

qd_status CpuContext::synchronize() {
    // Stream by stream: each wait covers what was queued on that stream before it started,
    // so enqueues racing with this call cannot keep it waiting forever.
    for (const std::shared_ptr<CpuStream> &stream : scheduler_->live_streams())
        stream->synchronize();
    return QD_SUCCESS;
}

qd_status CpuContext::elapsed_ms(Event &start, Event &end, float *ms) {
    const std::shared_ptr<Marker> first = static_cast<CpuEvent &>(start).latest();
    const std::shared_ptr<Marker> last = static_cast<CpuEvent &>(end).latest();
    if (!first || !last) return fail(QD_ERROR_NOT_RECORDED, "an event was never recorded");
    if (!first->complete() || !last->complete()) return QD_NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(last->time() - first->time()).count();
    return QD_SUCCESS;
}

void CpuContext::priority_range(int32_t *least, int32_t *greatest) const {
    *least = kLeastPriority;
    *greatest = kGreatestPriority;
}

qd_status CpuContext::host_alloc(uint64_t bytes, void **out) {
    void *block = aligned_host_alloc(with_end_guard(bytes));
    if (!block)
        return fail(QD_ERROR_OUT_OF_MEMORY, "cannot allocate %llu bytes of host memory",
                    static_cast<unsigned long long>(bytes));
    *out = block;
    return QD_SUCCESS;
}

void CpuContext::host_free(void *ptr) { std::free(ptr); }

void CpuContext::mem_free_now(uint64_t address) {
    std::free(reinterpret_cast<void *>(static_cast<uintptr_t>(address)));
}

bool CpuContext::in_callback() const { return in_callback_of(scheduler_.get()); }

void CpuContext::shutdown() { scheduler_->shutdown(); }

}  // namespace qd::backend::cpu
