// The blocks a graph owns (qd.h, "Graphs", "Memory inside a graph"): qd_mem_alloc_async on a
// capturing stream makes one, and a qd_mem_free_async of it inside the same capture frees it in
// the graph. Every block must be freed inside the capture that made it (the end refuses
// otherwise), so each replay holds its blocks from their alloc to their free only.
//
// Two kinds, one per capture:
// - Recorded (the CPU backend, the re-issue path): the capture allocates each block once, on
//   the allocating stream, in stream order, and registers it (AllocRegistry::Kind::Graph); the
//   address the call returns is the block every replay uses. A replay's alloc and free are
//   ordering points on it (Op::graph_block), seen by the observers, never by the backend. Since
//   every replay uses the same memory, the replays of one graph run one after the other: each
//   waits for the event recorded at the end of the one before (the first for the
//   allocations), which the replays take under replay_mutex().
// - Native (a driver capture): the driver made the block as a graph memory node and frees it in
//   the graph; qd only registers its address (Kind::GraphDriver) for range checks.
//
// The one lifetime rule: GraphBlocks is held by what may still touch the blocks, the open
// capture and then the graph's data (GraphData: every graph that replays it, qd_graph_update
// included); each replay orders itself through it. When the last holder lets go, the recorded
// blocks are freed in stream order after the last replay (or the allocations), on the stream
// of that replay, past the observers (they saw each replay's free). The registry decides who
// frees: a block is freed by whoever removes it from the registry, here or the context's
// destroy (its sweep, after the drain, when the destroy has begun).
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/context.h"

namespace qd::core {

class GraphBlocks {
  public:
    struct Block {
        uint64_t address = 0, bytes = 0;
        uint64_t stream = 0;  // the handle of the stream it was allocated on (messages), or 0
        bool freed = false;   // freed inside the capture (written while it is open)
        int32_t node = -1;    // the graph's MemAlloc node that makes it
    };

    GraphBlocks(std::shared_ptr<Context> ctx, bool native)
        : ctx_(std::move(ctx)), native_(native) {}
    ~GraphBlocks();
    GraphBlocks(const GraphBlocks &) = delete;
    GraphBlocks &operator=(const GraphBlocks &) = delete;

    bool native() const { return native_; }
    const std::vector<Block> &blocks() const { return blocks_; }

    // At capture, under the capture router's lock.
    // Recorded: allocates `bytes` on `stream` (handle for messages) through the backend,
    // registers the block and orders the first replay after the allocation.
    qd_status allocate(Stream &stream, uint64_t handle, uint64_t bytes, uint64_t *address);
    // Native: registers `address`, which the driver capture returned.
    qd_status adopt_driver_block(uint64_t handle, uint64_t address, uint64_t bytes);
    // The block of this capture that starts at address, or null.
    Block *find(uint64_t address);
    // QD_ERROR_INVALID_OPERATION (written, naming the block) when a block is not freed.
    qd_status check_all_freed() const;

    // Replays (recorded blocks): held while a replay builds and submits its operations.
    std::mutex &replay_mutex() { return replay_mutex_; }
    // The thread that holds replay_mutex(), noted by the replay: a qd_graph_launch of the same
    // graph nested in that replay (from a hazard handler) is refused instead of deadlocking.
    std::atomic<std::thread::id> replaying{};
    // With replay_mutex(): the events the next replay waits for on its launch stream first.
    const std::vector<std::shared_ptr<backend::Event>> &waits() const { return waits_; }
    // With replay_mutex(): a replay whose last operation records `done` on `stream` was queued;
    // later replays and the release wait for it instead.
    void replayed(const std::shared_ptr<Stream> &stream, std::shared_ptr<backend::Event> done);

  private:
    void release();

    const std::shared_ptr<Context> ctx_;
    const bool native_;
    std::vector<Block> blocks_;
    std::mutex replay_mutex_;
    std::vector<std::shared_ptr<backend::Event>> waits_;
    std::shared_ptr<Stream> last_;  // the stream the release is queued on
};

}  // namespace qd::core
