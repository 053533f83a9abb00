// Which ARM target a CPU gets (runtime/src/arm_cpu.h), decided from its
// AT_HWCAP words: the words qemu-aarch64's CPU models give a process
// (tests/hwcap/, read with msda info --cpuid), every required capability on
// its own, and the words of this machine when it is one.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include "arm_cpu.h"

namespace {

using msda::detail::arm::CpuWords;
using msda::detail::arm::Target;
namespace arm = msda::detail::arm;

CpuWords recorded(const std::string &name) {
    std::ifstream file(std::string(MSDA_HWCAP_DIR) + "/" + name + ".txt");
    EXPECT_TRUE(file) << "no tests/hwcap/" << name << ".txt";
    std::stringstream text;
    text << file.rdbuf();
    return arm::parse_words(text.str());
}

struct Model {
    const char *name;
    Target expected;
    std::vector<std::string> lacks_for_fp16;
};

TEST(ArmCpu, QemuModelsGetTheBestTargetTheirCapabilitiesAllow) {
    const Model models[] = {
        {"qemu-max", Target::arm_fp16, {}},
        {"qemu-neoverse-n1", Target::arm_fp16, {}},
        {"qemu-a64fx", Target::arm_fp16, {}},
        {"qemu-cortex-a57", Target::arm_64, {"fphp", "asimdhp"}},
    };
    for (const Model &model : models) {
        SCOPED_TRACE(model.name);
        const CpuWords words = recorded(model.name);
        EXPECT_TRUE(words.read);
        EXPECT_EQ(arm::best_target(words), model.expected);
        EXPECT_EQ(arm::missing_features(words, Target::arm_fp16), model.lacks_for_fp16);
        EXPECT_TRUE(arm::missing_features(words, Target::arm_64).empty());
    }
}

// Each capability a tier needs decides on its own: without it, the tier is
// out and the capability is named.
TEST(ArmCpu, EveryRequiredCapabilityIsChecked) {
    const CpuWords all = recorded("qemu-max");
    const struct {
        const char *name;
        int bit;
        Target best_without;
    } capabilities[] = {{"fp", 0, Target::arm_fp16}, {"asimd", 1, Target::arm_fp16}, {"fphp", 9, Target::arm_64},
                        {"asimdhp", 10, Target::arm_64}};
    for (const auto &capability : capabilities) {
        SCOPED_TRACE(capability.name);
        CpuWords without = all;
        without.hwcap &= ~(std::uint64_t{1} << capability.bit);
        const Target tier = capability.bit < 2 ? Target::arm_64 : Target::arm_fp16;
        EXPECT_EQ(arm::missing_features(without, tier), std::vector<std::string>{capability.name});
        if (capability.bit >= 2) EXPECT_EQ(arm::best_target(without), Target::arm_64);
    }
    EXPECT_EQ(arm::required_features(Target::arm_64), (std::vector<std::string>{"fp", "asimd"}));
    EXPECT_EQ(arm::required_features(Target::arm_fp16), (std::vector<std::string>{"fp", "asimd", "fphp", "asimdhp"}));
}

TEST(ArmCpu, NamesAndRecordedFormat) {
    EXPECT_EQ(arm::parse_target("arm_fp16"), Target::arm_fp16);
    EXPECT_EQ(arm::parse_target("arm-64"), Target::arm_64);
    EXPECT_FALSE(arm::parse_target("neon").has_value());
    const CpuWords words = recorded("qemu-neoverse-n1");
    EXPECT_EQ(words.hwcap, 0x119ffbu);
    const CpuWords again = arm::parse_words(arm::format_words(words));
    EXPECT_EQ(again.hwcap, words.hwcap);
    EXPECT_EQ(again.hwcap2, words.hwcap2);
    EXPECT_THROW(arm::parse_words("hwcap 12\n"), std::invalid_argument);
    EXPECT_THROW(arm::parse_words("cpuid 0x1\n"), std::invalid_argument);
    EXPECT_EQ(arm::describe_cpu(CpuWords{}), "not a 64-bit ARM Linux CPU (no AT_HWCAP)");
    EXPECT_EQ(arm::describe_cpu(words), "aarch64, hwcap 0x119ffb (fp asimd fphp asimdhp)");
}

// On an ARM machine (or under qemu-aarch64) the library runs what this
// CPU's words allow; elsewhere there are no words to read.
TEST(ArmCpu, ThisCpu) {
    const CpuWords words = arm::read_this_cpu();
#if defined(__aarch64__)
    ASSERT_TRUE(words.read);
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    if (std::getenv("MSDA_ARM_TARGET") == nullptr) {
        EXPECT_EQ(dispatch.selected, arm::target_name(arm::best_target(words))) << dispatch.cpu;
    }
    std::printf("this CPU: %s, runs %s\n", arm::describe_cpu(words).c_str(), dispatch.selected.c_str());
#else
    EXPECT_FALSE(words.read);
#endif
}

}  // namespace
