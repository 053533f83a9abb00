// Linked into every test binary. When MSDA_EXPECT_X86_TARGET is set (the
// emulated suite sets it to what each QEMU CPU model must get), the whole
// run fails before its first test unless the library picked that target.
// When MSDA_TEST_DEVICE=opencl is set (the opencl label), a build or machine
// without OpenCL skips the run, saying which. When MSDA_SKIP_ABOVE_THIS_CPU is set (the suites registered again under
// each MSDA_X86_TARGET cap), a cap this CPU cannot run skips the run, with
// what the CPU lacks as the reason.
#include <gtest/gtest.h>

#include <msda/msda.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_util.h"

namespace {

class ExpectedTarget : public ::testing::Environment {
public:
    void SetUp() override {
        const msda::CpuDispatch dispatch = msda::cpu_dispatch();
        if (std::getenv("MSDA_SKIP_ABOVE_THIS_CPU") != nullptr && !dispatch.error.empty()) {
            GTEST_SKIP() << dispatch.error;
        }
        // The opencl label's runs: skipped, with the reason, where this build
        // or this machine has no OpenCL.
        if (msda::testing::test_device() == msda::Device::opencl) {
            if (const std::string why = msda::testing::opencl_unavailable(); !why.empty()) GTEST_SKIP() << why;
        }
        const char *expected = std::getenv("MSDA_EXPECT_X86_TARGET");
        if (expected == nullptr) return;
        ASSERT_EQ(dispatch.selected, expected) << "on " << dispatch.cpu << ": " << dispatch.reason << dispatch.error;
        std::printf("msda runs %s on %s\n", dispatch.selected.c_str(), dispatch.cpu.c_str());
    }
};

const ::testing::Environment *const registered = ::testing::AddGlobalTestEnvironment(new ExpectedTarget);

}  // namespace
