// The CUDA devices this machine has, as the CUDA driver (libcuda.so.1, the
// NVIDIA driver's library) reports them. Loaded at run time, as Halide's
// CUDA runtime loads it, so libmsda needs no CUDA to load and a machine
// without a driver gets a reason. Only the driver API entry points used here
// are declared.
#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <msda/msda.hpp>

#include "validate.h"

namespace msda {

namespace {

using CUresult = int;
using CUdevice = int;
constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;
constexpr CUresult kNoDevice = 100;  // CUDA_ERROR_NO_DEVICE

using Init = CUresult (*)(unsigned);
using DriverGetVersion = CUresult (*)(int *);
using DeviceGetCount = CUresult (*)(int *);
using DeviceGet = CUresult (*)(CUdevice *, int);
using DeviceGetName = CUresult (*)(char *, int, CUdevice);
using DeviceGetAttribute = CUresult (*)(int *, int, CUdevice);
using DeviceTotalMem = CUresult (*)(std::size_t *, CUdevice);

template <typename Function>
bool load(void *library, const char *name, Function &function) {
    function = reinterpret_cast<Function>(dlsym(library, name));
    return function != nullptr;
}

}  // namespace

CudaReport cuda_devices() {
    CudaReport report;
    void *library = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (library == nullptr) library = dlopen("libcuda.so", RTLD_LAZY | RTLD_LOCAL);
    if (library == nullptr) {
        report.error = "no CUDA driver (libcuda.so.1, from the NVIDIA driver) could be loaded";
        return report;
    }
    Init init = nullptr;
    DriverGetVersion driver_version = nullptr;
    DeviceGetCount count = nullptr;
    DeviceGet get = nullptr;
    DeviceGetName name = nullptr;
    DeviceGetAttribute attribute = nullptr;
    DeviceTotalMem total_memory = nullptr;
    if (!load(library, "cuInit", init) || !load(library, "cuDriverGetVersion", driver_version) ||
        !load(library, "cuDeviceGetCount", count) || !load(library, "cuDeviceGet", get) ||
        !load(library, "cuDeviceGetName", name) || !load(library, "cuDeviceGetAttribute", attribute) ||
        !load(library, "cuDeviceTotalMem_v2", total_memory)) {
        report.error = "libcuda.so.1 lacks the CUDA driver API's entry points";
        return report;
    }
    int version = 0;
    if (driver_version(&version) == 0) {
        report.driver_version = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
    }
    const CUresult initialized = init(0);
    int devices = 0;
    if (initialized == kNoDevice || (initialized == 0 && count(&devices) == 0 && devices == 0)) {
        report.error = "the CUDA driver found no device";
        return report;
    }
    if (initialized != 0) {
        report.error = "cuInit failed with CUDA error " + std::to_string(initialized);
        return report;
    }
    for (int ordinal = 0; ordinal < devices; ++ordinal) {
        CUdevice device = 0;
        if (get(&device, ordinal) != 0) continue;
        CudaDevice entry;
        char text[256] = {};
        if (name(text, sizeof text - 1, device) == 0) entry.name = text;
        attribute(&entry.compute_major, kComputeCapabilityMajor, device);
        attribute(&entry.compute_minor, kComputeCapabilityMinor, device);
        std::size_t bytes = 0;
        if (total_memory(&bytes, device) == 0) entry.memory_bytes = static_cast<std::int64_t>(bytes);
        report.devices.push_back(entry);
    }
    if (report.devices.empty()) report.error = "the CUDA driver's devices could not be read";
    return report;
}

namespace detail {

void require_cuda_device() {
    static std::mutex mutex;
    static bool found = false;  // a device does not go away within a process
    std::lock_guard<std::mutex> lock(mutex);
    if (found) return;
    const CudaReport report = cuda_devices();
    if (report.devices.empty()) throw Error("msda: CUDA: no CUDA device to run on: " + report.error);
    found = true;
}

}  // namespace detail

}  // namespace msda
