// Linked into every test binary. When MSDA_EXPECT_X86_TARGET is set (the
// emulated suite sets it to what each QEMU CPU model must get), the whole
// run fails before its first test unless the library picked that target.
// When MSDA_TEST_DEVICE=opencl or cuda is set (the opencl and cuda labels),
// a build or machine without that device skips the run, saying which. When
// the cap (MSDA_X86_TARGET, MSDA_ARM_TARGET: the suites registered again
// under each cap set it) names a compiled target this CPU cannot run, the
// run is skipped, with what the CPU lacks as the reason; a cap that names
// no compiled target still fails every test. One variable: a second one in
// a gtest_discover_tests ENVIRONMENT list is lost (its PROPERTIES are a
// flat list, split at the ';'). GoogleTest counts the tests of a run skipped
// in its environment as passed, so a skipped run also prints kSkippedRun,
// which the suites' ctest registrations report as SKIPPED
// (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_util.h"

namespace {

// Why this run cannot run here, or empty when it can.
std::string why_skipped(const msda::CpuDispatch &dispatch) {
    if (!dispatch.cap.empty() && !dispatch.error.empty()) {
        for (const msda::CompiledTarget &target : dispatch.targets) {
            if (target.name == dispatch.cap && !target.missing.empty()) return dispatch.error;
        }
    }
    // The opencl and cuda labels' runs, where this build or this machine
    // has no OpenCL or CUDA.
    if (msda::testing::test_device() == msda::Device::opencl) return msda::testing::opencl_unavailable();
    if (msda::testing::test_device() == msda::Device::cuda) return msda::testing::cuda_unavailable();
    return "";
}

class ExpectedTarget : public ::testing::Environment {
public:
    void SetUp() override {
        const msda::CpuDispatch dispatch = msda::cpu_dispatch();
        if (const std::string why = why_skipped(dispatch); !why.empty()) {
            std::printf("%s%s\n", msda::testing::kSkippedRun, why.c_str());
            GTEST_SKIP() << why;
        }
        const char *expected = std::getenv("MSDA_EXPECT_X86_TARGET");
        if (expected == nullptr) return;
        ASSERT_EQ(dispatch.selected, expected) << "on " << dispatch.cpu << ": " << dispatch.reason << dispatch.error;
        std::printf("msda runs %s on %s\n", dispatch.selected.c_str(), dispatch.cpu.c_str());
    }
};

const ::testing::Environment *const registered = ::testing::AddGlobalTestEnvironment(new ExpectedTarget);

}  // namespace
