// Generic accessors over the driver-table list, so a vendor loader can fill the table from a
// list of (entry, symbol) pairs without naming each member.
#include "backends/gpu/driver_table.h"

#include "backends/gpu/gpu_backend.h"

namespace qd::backend::gpu {

void set_entry(DriverTable &table, Fn fn, void *address) {
    switch (fn) {
#define QD_GPU_SET_(name, required, params)                                                        \
    case Fn::name: table.name = reinterpret_cast<decltype(table.name)>(address); return;
        QD_GPU_DRIVER_TABLE(QD_GPU_SET_)
#undef QD_GPU_SET_
    case Fn::count: return;
    }
}

bool has_entry(const DriverTable &table, Fn fn) {
    switch (fn) {
#define QD_GPU_HAS_(name, required, params)                                                        \
    case Fn::name: return table.name != nullptr;
        QD_GPU_DRIVER_TABLE(QD_GPU_HAS_)
#undef QD_GPU_HAS_
    case Fn::count: return false;
    }
    return false;
}

bool has_native_graphs(const DriverTable &table) {
    static constexpr Fn kGraphs[] = {Fn::stream_begin_capture, Fn::stream_end_capture,
                                     Fn::stream_is_capturing,  Fn::graph_instantiate,
                                     Fn::graph_launch,         Fn::graph_exec_update,
                                     Fn::graph_exec_destroy,   Fn::graph_destroy};
    for (Fn fn : kGraphs)
        if (!has_entry(table, fn)) return false;
    return true;
}

Fn first_missing_partition_entry(const DriverTable &table) {
    static constexpr Fn kPartitions[] = {
        Fn::device_get_dev_resource,    Fn::dev_sm_resource_split_by_count,
        Fn::dev_resource_generate_desc, Fn::green_ctx_create,
        Fn::green_ctx_destroy,          Fn::ctx_from_green_ctx,
        Fn::green_ctx_stream_create};
    for (Fn fn : kPartitions)
        if (!has_entry(table, fn)) return fn;
    return Fn::count;
}

Fn first_missing(const DriverTable &table) {
#define QD_GPU_CHECK_(name, required, params)                                                      \
    if ((required) && table.name == nullptr) return Fn::name;
    QD_GPU_DRIVER_TABLE(QD_GPU_CHECK_)
#undef QD_GPU_CHECK_
    // The entries the table's current-device strategy needs.
    static constexpr Fn kContextStack[] = {Fn::ctx_get_current, Fn::ctx_set_current,
                                           Fn::ctx_push_current, Fn::ctx_pop_current};
    static constexpr Fn kCurrentDevice[] = {Fn::device_get_current, Fn::device_set_current};
    if (table.current_model == CurrentModel::context_stack) {
        for (Fn fn : kContextStack)
            if (!has_entry(table, fn)) return fn;
    } else {
        for (Fn fn : kCurrentDevice)
            if (!has_entry(table, fn)) return fn;
    }
    return Fn::count;
}

void bind_symbols(DriverTable &table, const DlLibrary &library, const SymbolBinding *bindings,
                  size_t count) {
    for (size_t i = 0; i < count; ++i) {
        const SymbolBinding &b = bindings[i];
        for (const char *name : b.names) {
            if (name == nullptr) break;
            if (void *address = library.symbol(name)) {
                set_entry(table, b.fn, address);
                table.symbol[static_cast<size_t>(b.fn)] = name;
                break;
            }
        }
        if (!has_entry(table, b.fn)) table.symbol[static_cast<size_t>(b.fn)] = b.names[0];
    }
}

const char *entry_name(Fn fn) {
    switch (fn) {
#define QD_GPU_NAME_(name, required, params)                                                       \
    case Fn::name: return #name;
        QD_GPU_DRIVER_TABLE(QD_GPU_NAME_)
#undef QD_GPU_NAME_
    case Fn::count: break;
    }
    return "?";
}

}  // namespace qd::backend::gpu
