// A CPU context: one scheduler (worker pool) and the streams, events and modules made on it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/scheduler.h"

namespace qd::backend::cpu {

// The most worker threads a context may ask for (qd_context_desc.cpu_worker_threads); the
// default count is capped at it too.
inline constexpr uint32_t kMaxWorkerThreads = 256;

class CpuContext final : public Context {
  public:
    // worker_threads: 0 = max(2, usable CPUs), capped at kMaxWorkerThreads; more than
    // kMaxWorkerThreads is QD_ERROR_INVALID_ARGUMENT.
    static qd_status create(uint32_t worker_threads, std::unique_ptr<Context> *out);

    ~CpuContext() override;

    qd_status create_stream(uint32_t flags, int32_t priority,
                            std::shared_ptr<Stream> *out) override;
    qd_status create_event(bool timing, std::shared_ptr<Event> *out) override;
    qd_status create_timeline(uint64_t initial, std::shared_ptr<Timeline> *out) override;
    qd_status load_module(const void *image, uint64_t size, std::shared_ptr<Module> *out) override;
    qd_status kernel_from_host_fn(qd_host_kernel_fn fn, const char *name,
                                  std::shared_ptr<Kernel> *out) override;
    qd_status synchronize() override;
    qd_status elapsed_ms(Event &start, Event &end, float *ms) override;
    void priority_range(int32_t *least, int32_t *greatest) const override;
    qd_status host_alloc(uint64_t bytes, void **out) override;
    void host_free(void *ptr) override;
    void mem_free_now(uint64_t address) override;
    bool in_callback() const override;
    bool runs_inline() const override { return true; }
    qd_status run_inline(const InlineOp &op) override;  // inline_run.cpp
    // Every launch attribute has a CPU meaning (qd.h, "Launch attributes"; CpuStream::launch_ex).
    qd_status check_launch_attrs(const LaunchAttrs &, const LaunchDims &, bool) override {
        return QD_SUCCESS;
    }
    void shutdown() override;
    // qd_context_split: each part starts workers of its own (cpu_split.cpp).
    qd_status split(const uint32_t *counts, uint32_t n,
                    std::vector<std::unique_ptr<Context>> *out) override;

  private:
    CpuContext() = default;
    // `threads` workers, worker i pinned to cpus[i] (cpus empty: they float).
    static qd_status start(uint32_t threads, const std::vector<int> &cpus,
                           std::unique_ptr<Context> *out);

    uint32_t threads_ = 0;  // its worker count: the units a split divides

    std::shared_ptr<Scheduler> scheduler_;
};

}  // namespace qd::backend::cpu
