package qd

// #include "qdgo.h"
import "C"

import (
	"strconv"
	"unsafe"
)

// Header version this package was built against (QD_VERSION_MAJOR, _MINOR, _PATCH).
const (
	HeaderVersionMajor = C.QD_VERSION_MAJOR
	HeaderVersionMinor = C.QD_VERSION_MINOR
	HeaderVersionPatch = C.QD_VERSION_PATCH
)

// Limits of one launch (QD_MAX_ARGS, QD_MAX_ARG_BYTES). A launch of a Go host kernel uses one
// argument and 16 + 4 × (number of arguments) bytes of them itself (HostKernel).
const (
	MaxArgs     = C.QD_MAX_ARGS
	MaxArgBytes = C.QD_MAX_ARG_BYTES
)

// Version is the loaded libqd's version, encoded as (major << 16) | (minor << 8) | patch.
func Version() uint32 { return uint32(C.qd_version()) }

// StatusName is libqd's own name for a status (qd_status_name), e.g. "QD_ERROR_INVALID_HANDLE".
func StatusName(s Status) string { return C.GoString(C.qd_status_name(C.qd_status(s))) }

// Backend selects the implementation behind a context (qd_backend).
type Backend uint32

// The backends of qd.h.
const (
	BackendDefault Backend = C.QD_BACKEND_DEFAULT // the embedded default: the CPU backend
	BackendCPU     Backend = C.QD_BACKEND_CPU     // asynchronous streams on host threads
	BackendCUDA    Backend = C.QD_BACKEND_CUDA    // NVIDIA driver, loaded at run time
	BackendHIP     Backend = C.QD_BACKEND_HIP     // AMD HIP, loaded at run time
)

// String is libqd's name of the backend (qd_backend_name): "cpu", "cuda", "hip", "default";
// a value that names no backend is "backend(N)".
func (b Backend) String() string {
	if name := C.GoString(C.qd_backend_name(C.qd_backend(b))); name != "unknown" {
		return name
	}
	return "backend(" + strconv.FormatUint(uint64(b), 10) + ")"
}

// DeviceCount is the number of devices of a backend (qd_device_count). The CPU backend has 1; an
// absent GPU backend gives ErrBackendUnavailable with the loader's reason.
func DeviceCount(b Backend) (int, error) {
	n, err := u64Result(C.gq_device_count(C.qd_backend(b)))
	return int(n), err
}

// DeviceInfo describes one device (qd_device_info).
type DeviceInfo struct {
	Backend         Backend
	Device          uint32
	DriverVersion   uint32 // CUDA: e.g. 13000; CPU: 0
	ComputeMajor    uint32 // CUDA compute capability; CPU: 0
	ComputeMinor    uint32
	Multiprocessors uint32 // GPU: multiprocessors; CPU: hardware threads
	TotalMemory     uint64 // bytes of device memory; CPU: 0 (unknown)
	Name            string
	// SplitGranularity (since 0.3): every count of Context.Split is a multiple of it; 0: the
	// device cannot be split (HIP, a CUDA driver before 12.4). CPU: 1.
	SplitGranularity uint32
	SplitMinimum     uint32 // (since 0.3) the smallest count of Context.Split
}

// GetDeviceInfo describes device `device` of backend b (qd_device_get_info).
func GetDeviceInfo(b Backend, device uint32) (DeviceInfo, error) {
	info := (*C.qd_device_info)(C.calloc(1, C.sizeof_qd_device_info))
	if info == nil {
		return DeviceInfo{}, newError(StatusOutOfMemory, "no memory for a qd_device_info")
	}
	defer C.free(unsafe.Pointer(info))
	info.struct_size = C.sizeof_qd_device_info
	if err := resultError(C.gq_device_get_info(C.qd_backend(b), C.uint32_t(device), info)); err != nil {
		return DeviceInfo{}, err
	}
	return DeviceInfo{
		Backend:          Backend(info.backend),
		Device:           uint32(info.device),
		DriverVersion:    uint32(info.driver_version),
		ComputeMajor:     uint32(info.compute_major),
		ComputeMinor:     uint32(info.compute_minor),
		Multiprocessors:  uint32(info.multiprocessors),
		TotalMemory:      uint64(info.total_memory),
		Name:             C.GoString(&info.name[0]),
		SplitGranularity: uint32(info.split_granularity),
		SplitMinimum:     uint32(info.split_minimum),
	}, nil
}
