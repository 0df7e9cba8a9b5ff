#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_context.h"
#include "common/error.h"

namespace qd::backend {

namespace {

// The one CPU device is the host itself.
class CpuDriver final : public Driver {
  public:
    qd_backend kind() const override { return QD_BACKEND_CPU; }
    qd_status device_count(uint32_t *out) override;
    qd_status device_info(uint32_t device, qd_device_info *out) override;
    qd_status create_context(const ContextParams &params, std::unique_ptr<Context> *out) override;
};

qd_status fail_no_device(uint32_t device);
std::string cpu_model_name();

}  // namespace

qd_status make_cpu_driver(std::unique_ptr<Driver> *out) {
    *out = std::make_unique<CpuDriver>();
    return QD_SUCCESS;
}

namespace {

qd_status CpuDriver::device_count(uint32_t *out) {
    *out = 1;
    return QD_SUCCESS;
}

qd_status CpuDriver::device_info(uint32_t device, qd_device_info *out) {
    if (device != 0) return fail_no_device(device);
    out->backend = QD_BACKEND_CPU;
    out->device = 0;
    out->driver_version = 0;
    out->compute_major = 0;
    out->compute_minor = 0;
    out->multiprocessors = std::thread::hardware_concurrency();
    out->reserved = 0;
    out->total_memory = 0;
    const std::string name = cpu_model_name();
    std::snprintf(out->name, sizeof out->name, "%s", name.c_str());
    // A split divides a context's workers one by one (cpu_split.cpp).
    out->split_granularity = 1;
    out->split_minimum = 1;
    return QD_SUCCESS;
}

qd_status CpuDriver::create_context(const ContextParams &params, std::unique_ptr<Context> *out) {
    if (params.device != 0) return fail_no_device(params.device);
    return cpu::CpuContext::create(params.worker_threads, out);
}

qd_status fail_no_device(uint32_t device) {
    return fail(QD_ERROR_INVALID_ARGUMENT,
                "device %u does not exist: the CPU backend has one device, 0", device);
}

// "model name" from /proc/cpuinfo (x86 and most others); some architectures do not have it.
std::string cpu_model_name() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.compare(0, 10, "model name") != 0) continue;
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        const size_t begin = line.find_first_not_of(" \t", colon + 1);
        if (begin == std::string::npos) continue;
        const size_t end = line.find_last_not_of(" \t\r");
        return line.substr(begin, end - begin + 1);
    }
    return "host CPU";
}

}  // namespace

}  // namespace qd::backend
