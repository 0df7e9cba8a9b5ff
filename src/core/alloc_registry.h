// The allocation registry of one context: every live qd_mem_alloc_async and qd_host_alloc
// block, and every block a graph owns (qd_mem_alloc_async inside a capture,
// core/capture/graph_blocks.h), keyed by start address. It turns a free of an unknown or already-freed address into
// QD_ERROR_INVALID_ADDRESS instead of a double free, lets memcpy/memset check ranges that start
// inside a block (of any context: every registry of the process is listed, so a copy on one
// context's stream into another context's block is checked against that block), and lets
// context destroy free what the user leaked.
//
// Alloc+free is hot (B6 sets 1.1x the raw driver's pair), so the lock is a spin lock held for a
// tree operation, the counters are written under it without read-modify-writes, and the nodes
// of freed entries are kept (up to kSpareNodes) and reused, so steady alloc/free churn makes no
// heap allocation.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <vector>

#include "common/spin_lock.h"

namespace qd::core {

class AllocRegistry {
  public:
    // Device and Host: the caller's blocks (qd_mem_alloc_async, qd_host_alloc), counted by the
    // stats. Graph: a block a graph owns, made by qd at capture (the CPU backend, the re-issue
    // path); GraphDriver: one a native driver capture made (a graph memory node's address,
    // the driver's to free). Graph blocks are checked by ranges like any block, are never
    // freed by a free of the caller's, and are not counted by the stats.
    enum class Kind : uint8_t { Device, Host, Graph, GraphDriver };

    AllocRegistry();  // lists itself in the process's registries, for check_range
    ~AllocRegistry();
    AllocRegistry(const AllocRegistry &) = delete;
    AllocRegistry &operator=(const AllocRegistry &) = delete;

    // Registers a block, unless `closed` is already true (context destroy sets it, once its
    // streams are drained and shut down, before its sweep, take_all, takes the same lock): then
    // nothing is registered and the call returns false, so a block made or given back during a
    // destroy is either swept by it or refused here, when no queued work can touch it any more.
    bool insert(Kind kind, uint64_t address, uint64_t bytes, const std::atomic<bool> &closed);
    // QD_ERROR_INVALID_ADDRESS (with message) when address is not the start of a live block.
    // *bytes (when given) receives the removed block's size.
    qd_status remove(Kind kind, uint64_t address, uint64_t *bytes = nullptr);
    // Is address the start of a live block a graph owns (Graph or GraphDriver)?
    bool graph_block(uint64_t address);
    // Checks [address, address+bytes) against every registry of the process (every context's
    // device and host blocks). QD_ERROR_INVALID_ADDRESS when the range starts inside a block
    // but runs past its end, or starts exactly at a block's end (one past the last byte) where
    // no other block starts. Ranges outside every block are the caller's raw memory.
    // The caller has checked that address + bytes does not wrap.
    static qd_status check_range(uint64_t address, uint64_t bytes, const char *what);

    // fork() (core/fork_handlers.h): the list of registries is locked in the prepare handler and
    // unlocked in the parent and the child. The child also empties it: the registries there are
    // of inherited contexts, whose locks a thread of the parent may have held at the fork, so
    // check_range never looks into them (their blocks are not the child's to use).
    static void lock_list_for_fork();
    static void unlock_list_after_fork(bool child);
    // qd_memcpy_peer_async: [address, address+bytes) must lie inside one live block (device or
    // host) of this registry; QD_ERROR_INVALID_ADDRESS naming `what` and `owner` (the
    // context's handle) otherwise. bytes > 0; the caller has checked the range does not wrap.
    // *host is set when the block is a qd_host_alloc block.
    qd_status check_inside(uint64_t address, uint64_t bytes, const char *what, uint64_t owner,
                           bool *host);
    // Empty the registry, returning what was still live.
    std::vector<uint64_t> take_all(Kind kind);

    uint64_t live_allocations() const { return device_count_.load(std::memory_order_relaxed); }
    uint64_t device_bytes() const { return device_bytes_.load(std::memory_order_relaxed); }
    uint64_t host_bytes() const { return host_bytes_.load(std::memory_order_relaxed); }

  private:
    using Map = std::map<uint64_t, uint64_t>;  // address -> bytes
    struct Block {
        uint64_t start = 0, size = 0;
        bool host = false;
    };
    // The live block that contains address (true), else the block that ends exactly at address
    // (false, *ends_at set when there is one).
    bool find(uint64_t address, Block *inside, Block *ends_at);
    static constexpr size_t kSpareNodes = 64;

    using Guard = SpinGuard;
    Map &map_of(Kind kind) { return maps_[size_t(kind)]; }
    // Written only under lock_; read by stats without it.
    static void bump(std::atomic<uint64_t> &c, int64_t d) { bump_counter(c, d); }

    SpinLock lock_;
    Map maps_[4];                        // by Kind
    std::vector<Map::node_type> spare_;  // nodes of removed entries, for reuse
    std::atomic<uint64_t> device_count_{0}, device_bytes_{0}, host_bytes_{0};
};

}  // namespace qd::core
