// The one table of qd's backends. Everything that names or lists backends reads it: the
// registry (which backend a qd_backend value loads), qd_backend_name(), the core's messages and
// trace, tools/check-rooms (which backend folders may use the GPU layer); tools, tests and
// bindings read it through qd_backend_name(). A new backend is one row here (DEVELOPERS.md,
// "Adding a backend", lists the rest).
//
// X(kind, slug, name, gpu_layer):
//   kind       its qd_backend value (qd.h; numbered from 1 without gaps: qd_backend_name says so)
//   slug       lower case, an identifier: qd_backend_name(), the trace, `qd demo --backend`, the
//              bindings' names; its folder src/backends/<slug>/, its build option -D<slug>=, and
//              its factory make_<slug>_driver() (backends/registry.cpp)
//   name       how messages name it ("a CUDA context")
//   gpu_layer  built over src/backends/gpu, the logic the GPU drivers share
#pragma once

#include <qd/qd.h>

#include <cstddef>
#include <cstdint>

#define QD_BACKEND_TABLE(X)                                                                        \
    X(QD_BACKEND_CPU, cpu, "CPU", false)                                                           \
    X(QD_BACKEND_CUDA, cuda, "CUDA", true)                                                         \
    X(QD_BACKEND_HIP, hip, "HIP", true)

namespace qd {

struct BackendRow {
    qd_backend kind;
    const char *slug;
    const char *name;
    bool gpu_layer;
};

#define QD_BACKEND_ROW_(kind, slug, name, gpu_layer) {kind, #slug, name, gpu_layer},
inline constexpr BackendRow kBackendRows[] = {QD_BACKEND_TABLE(QD_BACKEND_ROW_)};
#undef QD_BACKEND_ROW_

inline constexpr size_t kBackendCount = sizeof kBackendRows / sizeof kBackendRows[0];

// The row of a backend, or nullptr for a value that names none (QD_BACKEND_DEFAULT included:
// it stands for the CPU backend, the caller resolves it).
inline const BackendRow *backend_row(uint32_t kind) {
    for (const BackendRow &row : kBackendRows)
        if (static_cast<uint32_t>(row.kind) == kind) return &row;
    return nullptr;
}

// qd_backend_name(): the slug; "default" for QD_BACKEND_DEFAULT, "unknown" for other values.
inline const char *backend_slug(uint32_t kind) {
    if (kind == QD_BACKEND_DEFAULT) return "default";
    const BackendRow *row = backend_row(kind);
    return row ? row->slug : "unknown";
}

// The name messages use ("CPU"); "unknown" for a value that names no backend.
inline const char *backend_display_name(uint32_t kind) {
    if (kind == QD_BACKEND_DEFAULT) kind = QD_BACKEND_CPU;
    const BackendRow *row = backend_row(kind);
    return row ? row->name : "unknown";
}

}  // namespace qd
