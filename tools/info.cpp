// `msda info`: the library's version, the compiled targets, the one this CPU
// runs and why, and the thread count.
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

}  // namespace

bool run_info(const InfoCommand &command) {
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    if (command.cpuid) {
        std::printf("# the CPU words read by msda %s (cpuid and xgetbv on x86-64, AT_HWCAP on ARM): %s\n%s", msda::version(), dispatch.cpu.c_str(),
                    dispatch.cpuid.c_str());
        return true;
    }
    std::printf("msda %s\n", msda::version());
    std::printf("cpu: %s\n", dispatch.cpu.c_str());
    std::printf("compiled targets, best first:\n");
    for (const msda::CompiledTarget &target : dispatch.targets) {
        std::printf("  %-12s %-40s %s\n", target.name.c_str(), target.halide_target.c_str(),
                    target.missing.empty() ? "this CPU has its features"
                                           : ("this CPU lacks " + joined(target.missing)).c_str());
        if (command.features) std::printf("               needs: %s\n", joined(target.features).c_str());
    }
    if (!dispatch.cap.empty()) std::printf("MSDA_X86_TARGET: %s\n", dispatch.cap.c_str());
    if (dispatch.error.empty()) {
        std::printf("runs: %s (%s)\n", dispatch.selected.c_str(), dispatch.reason.c_str());
    } else {
        std::printf("runs: nothing, every call fails: %s\n", dispatch.error.c_str());
    }
    std::printf("threads: %d (%s)\n", msda::num_threads(), thread_source().c_str());
    return dispatch.error.empty();
}

}  // namespace msda_cli
