// The children of a Context: Stream, Event, Timeline, Module and Kernel, the objects a context's handles
// name besides the context itself (core/context.h, which includes this header).
//
// Every child holds a reference to its Context, so a call racing with context destroy still
// finds valid memory (and then an invalid handle or a shut-down backend), never freed memory.
// Each wraps the backend's object (`impl`, src/backends/backend.h).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "core/handle_table.h"

namespace qd::core {

class Context;  // core/context.h

enum class StreamKind : uint8_t { Owned, Leased, Borrowed, Default };

class Stream : public Object, public std::enable_shared_from_this<Stream> {
  public:
    static constexpr Tag kTag = Tag::Stream;

    Stream(std::shared_ptr<Context> ctx, std::shared_ptr<backend::Stream> impl, StreamKind kind,
           uint32_t flags = QD_STREAM_NON_BLOCKING)
        : ctx(std::move(ctx)), impl(std::move(impl)), kind(kind), flags(flags) {}

    std::shared_ptr<Context> ctx;
    std::shared_ptr<backend::Stream> impl;
    const StreamKind kind;
    // qd_stream_get_flags: the flags it was created with (a borrowed stream's come from its
    // backend: backend::Stream::native_flags).
    const uint32_t flags;
    uint32_t pool_slot = 0;  // reserved handle slot, for leases
    // The handle that names the stream now (a lease gets a new one per acquire; 0 while a
    // pooled stream is leased without one, by qd_launch_parallel or a graph replay). Read only
    // to name the stream in messages (the validation mode's reports).
    std::atomic<uint64_t> handle{0};

    // Is the stream a lane of an open graph capture (qd.h, "Graphs")? Set when it begins or
    // joins one and cleared when the capture ends or is abandoned, by the context's capture
    // router (core/capture/capture.h), which then takes its operations instead of the backend.
    bool capturing() const { return capture_lane.load(std::memory_order_acquire); }
    std::atomic<bool> capture_lane{false};  // written by the capture router only
    // Operations queued on this stream past the observers (core::submit_unobserved): the
    // trace shares a boundary between two operations only when none came between them
    // (core/trace/timing.h).
    std::atomic<uint64_t> unobserved{0};
};

class Event : public Object, public std::enable_shared_from_this<Event> {
  public:
    static constexpr Tag kTag = Tag::Event;

    Event(std::shared_ptr<Context> ctx, std::shared_ptr<backend::Event> impl)
        : ctx(std::move(ctx)), impl(std::move(impl)) {}

    std::shared_ptr<Context> ctx;
    std::shared_ptr<backend::Event> impl;

    // Was the event's latest record made inside a capture that is still open (a node of the
    // graph, not work of a stream)? Kept by the capture router (core/capture/capture.h).
    bool recorded_in_capture() const { return capture_record.load(std::memory_order_acquire); }
    std::atomic<bool> capture_record{false};  // written by the capture router only
};

// A timeline (qd.h, "Timelines"). The handle table and the calls that resolved it hold it;
// the backend timeline also lives as long as the signals queued on it.
class Timeline : public Object {
  public:
    static constexpr Tag kTag = Tag::Timeline;

    Timeline(std::shared_ptr<Context> ctx, std::shared_ptr<backend::Timeline> impl,
             uint64_t initial)
        : ctx(std::move(ctx)), impl(std::move(impl)), initial(initial), signalled_(initial) {}

    std::shared_ptr<Context> ctx;
    std::shared_ptr<backend::Timeline> impl;
    const uint64_t initial;  // the counter's first value (the validation mode's floor)

    // A signal's value must be above every value signalled or queued before it (qd.h,
    // "Values"): reserve() takes it, or fails with QD_ERROR_INVALID_ARGUMENT and the message;
    // a call refused after that gives it back with unreserve(), so a refused call changes
    // nothing (unless a larger value was reserved since, which refuses this one anyway).
    qd_status reserve(uint64_t value, uint64_t *previous);
    void unreserve(uint64_t value, uint64_t previous) {
        signalled_.compare_exchange_strong(value, previous, std::memory_order_acq_rel);
    }

  private:
    std::atomic<uint64_t> signalled_;  // the largest value signalled or queued
};

class Module : public Object {
  public:
    static constexpr Tag kTag = Tag::Module;

    Module(std::shared_ptr<Context> ctx, std::shared_ptr<backend::Module> impl)
        : ctx(std::move(ctx)), impl(std::move(impl)) {}

    std::shared_ptr<Context> ctx;
    std::shared_ptr<backend::Module> impl;

    // Handles of the kernels taken from this module, invalidated by unload. Once `unloaded` is
    // set (under the mutex, by unload), a kernel taken later is destroyed by its taker.
    std::mutex kernels_mutex;
    std::vector<uint64_t> kernels;
    bool unloaded = false;
};

class Kernel : public Object {
  public:
    static constexpr Tag kTag = Tag::Kernel;

    Kernel(std::shared_ptr<Context> ctx, std::shared_ptr<backend::Kernel> impl)
        : ctx(std::move(ctx)), impl(std::move(impl)) {}

    std::shared_ptr<Context> ctx;
    std::shared_ptr<backend::Kernel> impl;
    // qd_kernel_set_param_access: a qd_param_access per parameter index, read by the
    // validation mode (core/validation/) at each launch it checks.
    std::array<std::atomic<uint8_t>, QD_MAX_ARGS> param_access{};
};

}  // namespace qd::core
