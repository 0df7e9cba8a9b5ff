// A CPU test module whose constructor and destructor call back into the program that loads it,
// so tests can make qd calls from inside qd_module_load and from wherever the module is finally
// unloaded (qd.h, qd_module_load and qd_module_unload). The program names its hook in the
// environment variable QDT_MODULE_HOOK: the address, in hexadecimal, of a
// `void hook(int phase)` (phase 0: the constructor, 1: the destructor). Without the variable the
// module does nothing. It needs no qd symbol, so it loads into programs that link qd statically
// (the API-sequence fuzzer) as well as those that use libqd.so.
#include <qd/qd.h>

#include <cstdint>
#include <cstdlib>

#define QDT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

void call_hook(int phase) {
    const char *v = std::getenv("QDT_MODULE_HOOK");
    if (!v || !*v) return;
    const uintptr_t address = static_cast<uintptr_t>(std::strtoull(v, nullptr, 16));
    if (address) reinterpret_cast<void (*)(int)>(address)(phase);
}

__attribute__((constructor)) void on_load() { call_hook(0); }
__attribute__((destructor)) void on_unload() { call_hook(1); }

}  // namespace

QDT_EXPORT int32_t qd_test_hook_noop(const qd_host_kernel_info *, void *const *) { return 0; }
