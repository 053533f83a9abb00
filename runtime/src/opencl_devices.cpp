// The OpenCL platforms and devices this machine has, as the ICD loader
// (libOpenCL.so.1, Debian's ocl-icd-libopencl1) reports them. Loaded at run
// time, as Halide's OpenCL runtime loads it, so libmsda needs no OpenCL at
// link time and a machine without it gets a reason instead of a failure to
// load. Only the few entry points and constants of the OpenCL 1.2 API used
// here are declared.
#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <vector>

#include <msda/msda.hpp>

namespace msda {

namespace {

using cl_int = std::int32_t;
using cl_uint = std::uint32_t;
using cl_platform_id = struct opaque_platform *;
using cl_device_id = struct opaque_device *;
using cl_device_type = std::uint64_t;

constexpr cl_uint kPlatformName = 0x0902;
constexpr cl_uint kPlatformVersion = 0x0901;
constexpr cl_uint kDeviceType = 0x1000;
constexpr cl_uint kDeviceName = 0x102B;
constexpr cl_uint kDeviceVersion = 0x102F;
constexpr cl_uint kDeviceExtensions = 0x1030;
constexpr cl_device_type kDeviceTypeAll = 0xFFFFFFFF;
constexpr cl_int kDeviceNotFound = -1;
constexpr cl_int kPlatformNotFoundKhr = -1001;

using GetPlatformIds = cl_int (*)(cl_uint, cl_platform_id *, cl_uint *);
using GetPlatformInfo = cl_int (*)(cl_platform_id, cl_uint, std::size_t, void *, std::size_t *);
using GetDeviceIds = cl_int (*)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
using GetDeviceInfo = cl_int (*)(cl_device_id, cl_uint, std::size_t, void *, std::size_t *);

template <typename Get, typename Handle>
std::string text_info(Get get, Handle handle, cl_uint what) {
    std::size_t size = 0;
    if (get(handle, what, 0, nullptr, &size) != 0 || size == 0) return "";
    std::string text(size, '\0');
    if (get(handle, what, size, text.data(), nullptr) != 0) return "";
    while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
    return text;
}

std::string type_name(cl_device_type type) {
    if (type & 2) return "CPU";
    if (type & 4) return "GPU";
    if (type & 8) return "accelerator";
    return "other";
}

}  // namespace

OpenClReport opencl_devices() {
    OpenClReport report;
    void *library = dlopen("libOpenCL.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (library == nullptr) library = dlopen("libOpenCL.so", RTLD_LAZY | RTLD_LOCAL);
    if (library == nullptr) {
        report.error = "no OpenCL ICD loader (libOpenCL.so.1) could be loaded (apt install ocl-icd-libopencl1 and a "
                       "driver, e.g. pocl-opencl-icd)";
        return report;
    }
    const auto platform_ids = reinterpret_cast<GetPlatformIds>(dlsym(library, "clGetPlatformIDs"));
    const auto platform_info = reinterpret_cast<GetPlatformInfo>(dlsym(library, "clGetPlatformInfo"));
    const auto device_ids = reinterpret_cast<GetDeviceIds>(dlsym(library, "clGetDeviceIDs"));
    const auto device_info = reinterpret_cast<GetDeviceInfo>(dlsym(library, "clGetDeviceInfo"));
    if (!platform_ids || !platform_info || !device_ids || !device_info) {
        report.error = "libOpenCL.so.1 lacks the OpenCL 1.2 entry points";
        dlclose(library);
        return report;
    }
    cl_uint count = 0;
    const cl_int listed = platform_ids(0, nullptr, &count);
    if (listed == kPlatformNotFoundKhr || (listed == 0 && count == 0)) {
        report.error = "the OpenCL ICD loader found no platform (no driver installed: apt install pocl-opencl-icd "
                       "for the CPU one)";
    } else if (listed != 0) {
        report.error = "clGetPlatformIDs failed with OpenCL error " + std::to_string(listed);
    }
    std::vector<cl_platform_id> platforms(count);
    if (count > 0 && listed == 0 && platform_ids(count, platforms.data(), nullptr) == 0) {
        for (cl_platform_id platform : platforms) {
            const std::string platform_name = text_info(platform_info, platform, kPlatformName);
            const std::string platform_version = text_info(platform_info, platform, kPlatformVersion);
            cl_uint devices = 0;
            const cl_int found = device_ids(platform, kDeviceTypeAll, 0, nullptr, &devices);
            if (found == kDeviceNotFound || devices == 0) continue;
            std::vector<cl_device_id> ids(devices);
            if (device_ids(platform, kDeviceTypeAll, devices, ids.data(), nullptr) != 0) continue;
            for (cl_device_id id : ids) {
                OpenClDevice device;
                device.platform = platform_name;
                device.platform_version = platform_version;
                device.name = text_info(device_info, id, kDeviceName);
                device.version = text_info(device_info, id, kDeviceVersion);
                cl_device_type type = 0;
                device_info(id, kDeviceType, sizeof type, &type, nullptr);
                device.type = type_name(type);
                const std::string extensions = text_info(device_info, id, kDeviceExtensions);
                device.fp16 = extensions.find("cl_khr_fp16") != std::string::npos;
                report.devices.push_back(device);
            }
        }
        if (report.devices.empty() && report.error.empty()) report.error = "no OpenCL platform has a device";
    }
    dlclose(library);
    return report;
}

}  // namespace msda
