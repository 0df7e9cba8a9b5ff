// The entry point vendor loaders (cuda/, hip/) call once they have filled a DriverTable, and
// the few introspection hooks white-box tests use.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "backends/backend.h"
#include "backends/gpu/driver_table.h"
#include "backends/common/dl_library.h"

namespace qd::backend::gpu {

// Native objects qd made or released, per driver (process-wide). Tests read them to prove, for
// example, that a borrowed stream is never destroyed: streams_destroyed counts only streams qd
// created, streams_forgotten counts imported ones qd let go of without destroying them.
struct NativeCounters {
    std::atomic<uint64_t> streams_created{0};
    std::atomic<uint64_t> streams_destroyed{0};
    std::atomic<uint64_t> streams_imported{0};
    std::atomic<uint64_t> streams_forgotten{0};
    std::atomic<uint64_t> events_created{0};
    std::atomic<uint64_t> events_destroyed{0};
    std::atomic<uint64_t> modules_loaded{0};
    std::atomic<uint64_t> modules_unloaded{0};
    std::atomic<uint64_t> graphs_instantiated{0};
    std::atomic<uint64_t> graphs_destroyed{0};
};

// One table entry and the library symbols that provide it, preferred first (a vendor loader's
// list of them is data: {Fn::launch_kernel, {"cuLaunchKernel"}}).
struct SymbolBinding {
    Fn fn;
    const char *names[2];
};

// Fills each listed entry from the first of its symbols the library has, and names the entry by
// that symbol (by its first symbol when none is there, so a "lacks" message names it).
void bind_symbols(DriverTable &table, const DlLibrary &library, const SymbolBinding *bindings,
                  size_t count);

// Builds the GPU driver over a complete table (first_missing(table) == Fn::count) whose init
// entry has already succeeded. library keeps the vendor library loaded for the process.
// QD_ERROR_BACKEND_UNAVAILABLE when the driver reports no device.
qd_status make_gpu_driver(const DriverTable &table, DlLibrary library,
                          std::unique_ptr<Driver> *out);

// The counters of a GPU driver; null when driver is not one.
const NativeCounters *native_counters(const Driver *driver);

// A test seam for fault injection on a real driver (docs/reliability.md, category 13): when set, a
// vendor loader calls it on its filled table, after init succeeded and before the driver is built,
// so a test can wrap every entry (tests/gpu/gpu_fault_real_test.cpp fails the Nth call). Only code
// linked with qd_internal can set it: the symbol is hidden, so libqd.so offers no way to reach
// it, and it costs nothing when null.
extern void (*g_table_hook)(DriverTable &table);

// A readable "NAME (description)" of a native result, e.g.
// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)". Writes into buf.
const char *describe_result(const DriverTable &table, Result result, char *buf, size_t size);

}  // namespace qd::backend::gpu
