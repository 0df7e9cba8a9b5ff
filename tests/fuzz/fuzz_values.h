// The valid values the generated fuzz entries (api_table_gen.h, written by abi/gen) pass in
// every position but the one under test: one expression per parameter role of
// abi/qd-api.json. Each must pass the class-1 checks of qd.h ("Which error wins"), so that the
// handle under test decides the status. The fuzzer that uses the entries fills the fields
// (handles of one live context, a module image, allocations). Hand-written: a new role of the
// description is the only reason to edit it (abi/generators/fuzz.py names the roles).
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace qd_fuzz {

// The most handle types the tables support (api_table_gen.h checks HandleKind against it).
constexpr int kMaxHandleKinds = 16;

// Calls of the generated no-op callbacks (noop_qd_host_fn, ...): a refused call runs none.
inline std::atomic<uint64_t> callback_calls{0};

struct Values {
    // role handle: a live handle of each kind (HandleKind), all of one context.
    uint64_t handles[kMaxHandleKinds] = {};
    // role string: a kernel name, or for a parameter named "path" a file path (the trace).
    const char *kernel_name = "qd_test_noop";
    const char *path = "/tmp/qd-fuzz-trace.json";
    // roles bytes and size: a module image and its size.
    const void *image = nullptr;
    uint64_t image_size = 0;
    // role host_pointer: a qd_host_alloc block of the context.
    void *host = nullptr;
    // role address: inside live allocations of the context (src for a parameter named "src").
    uint64_t dst = 0, src = 0;
    // What INIT leaves invalid (complete): a qd_arg's data.
    uint8_t arg[8] = {};

    uint64_t handle(int kind) const { return handles[kind]; }
    // role value: 1 is a valid size, count, flag set (QD_EVENT_TIMING), native handle,
    // parameter index and access (QD_PARAM_READ), memset byte and backend (QD_BACKEND_CPU).
    template <class T>
    T value() const {
        return T(1);
    }
    const char *string(const char *param) const {
        return std::strcmp(param, "path") == 0 ? path : kernel_name;
    }
    const void *bytes() const { return image; }
    uint64_t bytes_size() const { return image_size; }
    uint64_t address(const char *param) const { return std::strcmp(param, "src") == 0 ? src : dst; }
    void *host_pointer() const { return host; }
    // role user_data: the generated callbacks never read it.
    void *user_data() const { return const_cast<uint8_t *>(arg); }

    // A struct after its INIT macro and its handle fields: what else a valid one needs.
    template <class T>
    void complete(T &) const {}
    void complete(qd_arg &a) const {
        a.data = arg;
        a.size = sizeof arg;
    }
    // A qd_launch_attr (no INIT macro: all zero, kind 0 invalid) whose one handle field, event,
    // the entry filled: a completion event, valid on every backend's class-1 checks.
    void complete(qd_launch_attr &a) const { a.kind = QD_LAUNCH_ATTR_COMPLETION_EVENT; }
};

}  // namespace qd_fuzz
