// One unit of stream work as it sits in a stream's queue.
//
// A task is a 48-byte header plus, for launches, the argument sizes and bytes right behind it in
// the same record. No std::function and no allocation per task: the queue hands out raw record
// space (task_queue.h) and the task is built in place, so an enqueue is a copy into memory the
// queue already owns. Records are kept small because a burst of enqueues onto a busy stream
// writes them all to memory before any runs: bytes per task are what that burst costs.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "backends/backend.h"

namespace qd::backend::cpu {

class Scheduler;
class StreamList;
struct WorkerState;

enum class TaskKind : uint8_t {
    kLaunch,        // ref: CpuKernel; u.launch + extra (shared memory bytes); arguments follow
    kLaunchEx,      // as kLaunch, but ref: LaunchExtras (launch attributes, qd_launch_ex)
    kHostFn,        // u.host
    kHostStatusFn,  // u.status: called whatever happens (run, skipped when lost, abandoned)
    kMemcpy,        // u.copy
    kMemset,        // u.set + extra (the byte value)
    kFree,          // u.free_ptr: a stream-ordered free
    kRecord,        // ref: Marker to complete
    kWait,          // ref: Marker to wait for (an event's record, or a timeline's value)
    kSignal,        // ref: CpuTimeline; u.value: what its counter becomes
};

class CpuKernel;
class Marker;

// What a launch with attributes holds besides its kernel (TaskKind::kLaunchEx): one allocation
// per such launch, so the plain launch's record stays as it is.
struct LaunchExtras {
    std::shared_ptr<CpuKernel> kernel;
    // COMPLETION_EVENT: completed once, when the launch starts its last block, or, for a launch
    // that never gets there (skipped after a loss, stopped by a fault, abandoned), when the task
    // is done with.
    std::shared_ptr<Marker> completion;
    bool completed = false;
    // PRIORITY more urgent than the stream's: the stream's count of such launches at that
    // level (CpuStream::level), given back when the task is done with; null otherwise.
    std::atomic<uint32_t> *urgent = nullptr;
    std::atomic<uint32_t> *urgent_total = nullptr;  // the stream's count of all of them

    // The end of the task, run or not: completes the marker if it has not been, gives back the
    // priority. Exactly once per task.
    void finish(StreamList &woken) noexcept;
};

struct alignas(16) Task {
    Task(TaskKind k, uint32_t bytes, std::shared_ptr<void> r = nullptr) noexcept
        : ref(std::move(r)), kind(k), record_bytes(static_cast<uint16_t>(bytes)) {}

    std::shared_ptr<void> ref;  // keeps the kernel (and so its module) or the marker alive
    union {
        struct {
            uint32_t grid[3];
            uint32_t block[3];
        } launch;
        struct {
            void *dst;
            const void *src;
            uint64_t bytes;
        } copy;
        struct {
            void *dst;
            uint64_t bytes;
        } set;
        struct {
            qd_host_fn fn;
            void *user_data;
        } host;
        struct {
            qd_host_status_fn fn;
            void *user_data;
            uint64_t handle;
        } status;
        void *free_ptr;
        uint64_t value;
    } u{};
    uint32_t extra = 0;  // launch: shared memory bytes per block; memset: the value
    TaskKind kind;
    uint8_t num_args = 0;
    uint16_t record_bytes;  // the whole record: header and trailing argument storage
};

static_assert(sizeof(Task) == 48, "keep the task header small: see the file comment");

// Record size of a launch with these arguments: the header, one uint16_t size per argument,
// then each argument aligned to the largest power of two dividing its size (capped at 16),
// which is at least its type's alignment since a type's alignment divides its size.
uint32_t launch_record_bytes(const qd_arg *args, uint32_t num_args) noexcept;
// The largest record any task needs (a launch with QD_MAX_ARGS arguments of QD_MAX_ARG_BYTES).
inline constexpr uint32_t kMaxRecordBytes =
    sizeof(Task) + QD_MAX_ARGS * sizeof(uint16_t) + QD_MAX_ARG_BYTES + QD_MAX_ARGS * 15u + 16u;
static_assert(kMaxRecordBytes <= UINT16_MAX, "record sizes are stored in 16 bits");
// Copies the arguments into the record behind `task`.
void pack_launch_args(Task &task, const qd_arg *args, uint32_t num_args) noexcept;

// Runs one task on a worker. Wait tasks never get here (the stream handles them).
void execute(Task &task, WorkerState &worker) noexcept;
// Disposes of a task that will never run (its context shut down under it): frees stream-ordered
// frees so nothing leaks and completes record markers so no waiter hangs. Completing a marker
// may briefly take its host mutex: not under a spin lock (CpuStream::abandon_all completes
// records itself, outside its lock). A host status callback is not called here either (it runs
// user code): CpuStream::abandon_all calls it outside its lock, with QD_ERROR_INVALID_HANDLE.
void abandon(Task &task, StreamList &woken) noexcept;

// True while the calling thread runs a host kernel or host callback for `scheduler`.
bool in_callback_of(const Scheduler *scheduler) noexcept;

}  // namespace qd::backend::cpu
