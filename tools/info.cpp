// `msda info`: the library's version and target family, the compiled
// targets, the one this CPU runs and why, and the thread count; or the
// generated functions (--variants).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"

namespace msda_cli {

namespace {

std::string joined(const std::vector<std::string> &names) {
    std::string text;
    for (const std::string &name : names) text += (text.empty() ? "" : " ") + name;
    return text;
}

std::string thread_source() {
    if (const char *count = std::getenv("HL_NUM_THREADS")) return std::string("HL_NUM_THREADS=") + count;
    if (const char *count = std::getenv("HL_NUMTHREADS")) return std::string("HL_NUMTHREADS=") + count;
    return "one per core";
}

std::string sizes(int count) { return count == 0 ? "any" : std::to_string(count); }

// One line per generated function: what it serves, for which family.
void print_variants() {
    std::printf("%-36s %-6s %-24s %-5s %-9s %-9s %-4s %-4s %s\n", "function", "family", "kind", "op", "storage",
                "locations", "C_h", "N_l", "N_p");
    for (const msda::CompiledVariant &variant : msda::compiled_variants()) {
        std::printf("%-36s %-6s %-24s %-5s %-9s %-9s %-4s %-4s %s\n", variant.name.c_str(), variant.family.c_str(),
                    variant.kind.c_str(), variant.op == msda::Operator::gka ? "gka" : "msda",
                    msda::dtype_name(variant.dtype), msda::dtype_name(variant.locations_dtype),
                    sizes(variant.channels).c_str(), sizes(variant.levels).c_str(), sizes(variant.points).c_str());
    }
}

}  // namespace

bool run_info(const InfoCommand &command) {
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    if (command.cpuid) {
        std::printf("# the CPU words read by msda %s (cpuid and xgetbv on x86-64, AT_HWCAP on ARM): %s\n%s", msda::version(), dispatch.cpu.c_str(),
                    dispatch.cpuid.c_str());
        return true;
    }
    if (command.variants) {
        print_variants();
        return true;
    }
    std::printf("msda %s\n", msda::version());
    std::printf("family: %s\n", dispatch.family.c_str());
    std::printf("cpu: %s\n", dispatch.cpu.c_str());
    std::printf("caches: %lld KiB L1d, %lld KiB L2 a core (%s)\n", static_cast<long long>(dispatch.l1_data_cache_bytes >> 10),
                static_cast<long long>(dispatch.l2_cache_bytes >> 10), dispatch.caches.c_str());
    std::printf("compiled targets, best first:\n");
    for (const msda::CompiledTarget &target : dispatch.targets) {
        std::printf("  %-14s %-40s %s\n", target.name.c_str(), target.halide_target.c_str(),
                    target.missing.empty() ? "this CPU has its features"
                                           : ("this CPU lacks " + joined(target.missing)).c_str());
        if (command.features) std::printf("                 needs: %s\n", joined(target.features).c_str());
    }
    if (!dispatch.cap.empty()) std::printf("%s: %s\n", dispatch.cap_variable.c_str(), dispatch.cap.c_str());
    if (dispatch.error.empty()) {
        std::printf("runs: %s (%s)\n", dispatch.selected.c_str(), dispatch.reason.c_str());
    } else {
        std::printf("runs: nothing, every call fails: %s\n", dispatch.error.c_str());
    }
    std::printf("threads: %d (%s)\n", msda::num_threads(), thread_source().c_str());
    const msda::OpenClReport opencl = msda::opencl_devices();
    if (opencl.devices.empty()) {
        std::printf("opencl: none (%s)\n", opencl.error.c_str());
    } else {
        std::printf("opencl devices (--target opencl runs on msda's own queue, on the device Halide picks: the "
                    "first platform's with the most compute units, unless HL_OCL_PLATFORM_NAME, "
                    "HL_OCL_DEVICE_TYPE or HL_GPU_DEVICE choose another):\n");
        for (const msda::OpenClDevice &device : opencl.devices) {
            std::printf("  %s: %s, %s (%s; %s)\n", device.platform.c_str(), device.name.c_str(), device.type.c_str(),
                        device.version.c_str(), device.fp16 ? "cl_khr_fp16" : "no cl_khr_fp16");
        }
    }
    const msda::CudaReport cuda = msda::cuda_devices();
    if (cuda.devices.empty()) {
        std::printf("cuda: none (%s)\n", cuda.error.c_str());
    } else {
        std::printf("cuda devices (driver %s; --target cuda runs the one Halide picks, HL_GPU_DEVICE chooses):\n",
                    cuda.driver_version.c_str());
        for (std::size_t i = 0; i < cuda.devices.size(); ++i) {
            const msda::CudaDevice &device = cuda.devices[i];
            std::printf("  %zu: %s, compute capability %d.%d, %lld MiB\n", i, device.name.c_str(), device.compute_major,
                        device.compute_minor, static_cast<long long>(device.memory_bytes >> 20));
        }
    }
    return dispatch.error.empty();
}

}  // namespace msda_cli
