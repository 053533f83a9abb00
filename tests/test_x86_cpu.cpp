// msda's choice of compiled x86-64 target, as a pure function of cpuid and
// xgetbv words: on words recorded on real CPUs and the QEMU models the
// emulated suite runs under (tests/cpuid/), on words an OS or hypervisor
// changed, and on the CPU this runs on.
#include <gtest/gtest.h>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "x86_cpu.h"

namespace {

namespace x86 = msda::detail::x86;
using x86::Target;

// A recorded file's words. Dumps that did not record XCR0 get the states
// leaf 0xd sub 0 reports the CPU supports, as Linux enables every user state
// the CPU supports (the tests below change XCR0 on their own).
x86::CpuWords recorded(const std::string &name) {
    std::ifstream file(std::string(MSDA_CPUID_DIR) + "/" + name);
    if (!file) throw std::runtime_error("cannot read tests/cpuid/" + name);
    std::stringstream text;
    text << file.rdbuf();
    x86::CpuWords words = x86::parse_words(text.str());
    const bool osxsave = (words.get(1).ecx >> 27) & 1;
    if (!words.xcr0 && osxsave) {
        const x86::CpuidLeaf states = words.get(0xd);
        words.xcr0 = (std::uint64_t{states.edx} << 32) | states.eax;
    }
    return words;
}

bool contains(const std::vector<std::string> &names, const std::string &name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

// The features a tier needs beyond those of the tier below it.
std::vector<std::string> tier_only(Target tier) {
    const Target below = static_cast<Target>(static_cast<int>(tier) - 1);
    std::vector<std::string> extra;
    for (const std::string &name : x86::required_features(tier)) {
        if (!contains(x86::required_features(below), name)) extra.push_back(name);
    }
    return extra;
}

// The lowest tier whose code may use a feature.
Target tier_of(const std::string &feature) {
    for (int t = 0; t < x86::kTargetCount; t++) {
        if (contains(x86::required_features(static_cast<Target>(t)), feature)) return static_cast<Target>(t);
    }
    throw std::runtime_error("no tier requires " + feature);
}

constexpr Target kBest = static_cast<Target>(x86::kTargetCount - 1);

struct RecordedCpu {
    const char *file;
    Target expected;
    // What the next tier up lacks, exactly (empty: not checked).
    std::vector<std::string> missing_above;
};

class Recorded : public testing::TestWithParam<RecordedCpu> {};

TEST_P(Recorded, PicksTheBestTargetWhoseFeaturesTheCpuHas) {
    const RecordedCpu &cpu = GetParam();
    const x86::CpuWords words = recorded(cpu.file);
    EXPECT_EQ(x86::target_name(x86::best_target(words)), std::string(x86::target_name(cpu.expected)))
        << x86::describe_cpu(words);
    for (int t = 0; t <= static_cast<int>(cpu.expected); t++) {
        EXPECT_TRUE(x86::missing_features(words, static_cast<Target>(t)).empty())
            << x86::target_name(static_cast<Target>(t));
    }
    if (cpu.expected != kBest) {
        const Target above = static_cast<Target>(static_cast<int>(cpu.expected) + 1);
        const std::vector<std::string> missing = x86::missing_features(words, above);
        EXPECT_FALSE(missing.empty());
        if (!cpu.missing_above.empty()) EXPECT_EQ(missing, cpu.missing_above);
    }
}

// A case's name: its file's, without .txt, every other character than a
// letter or digit made '_'.
std::string recorded_file_name(const testing::TestParamInfo<RecordedCpu> &info) {
    std::string name = info.param.file;
    name = name.substr(0, name.find(".txt"));
    std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
    return name;
}

// What a CPU of each tier below avx512_zen4 lacks of the next tier.
const std::vector<std::string> kSkylakeLacks = {"AVX512_IFMA",   "AVX512_VBMI",      "AVX512_VBMI2",
                                                "AVX512_VNNI",   "AVX512_BITALG",    "AVX512_VPOPCNTDQ",
                                                "AVX512_BF16",   "GFNI"};
const std::vector<std::string> kNoAvx512 = {"AVX512F", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512VL",
                                            "OS_ZMM_STATE"};

INSTANTIATE_TEST_SUITE_P(
    RealCpus, Recorded,
    testing::Values(RecordedCpu{"zen3-epyc-7763.txt", Target::avx2, kNoAvx512},
                    RecordedCpu{"zen3-epyc-kvm.txt", Target::avx2, kNoAvx512},
                    RecordedCpu{"zen4-epyc-9654.txt", Target::avx512_zen4, {}},
                    RecordedCpu{"zen5-epyc-kvm.txt", Target::avx512_zen4, {}},
                    // The Intel servers before Sapphire Rapids run avx512_skylake.
                    RecordedCpu{"skylake-sp-xeon-8160.txt", Target::avx512_skylake, kSkylakeLacks},
                    // Cascade Lake adds VNNI to Skylake-SP's.
                    RecordedCpu{"cascadelake-xeon-platinum-8280.txt", Target::avx512_skylake,
                                {"AVX512_IFMA", "AVX512_VBMI", "AVX512_VBMI2", "AVX512_BITALG", "AVX512_VPOPCNTDQ",
                                 "AVX512_BF16", "GFNI"}},
                    // Ice Lake and Tiger Lake have every AVX-512 subset of Zen 4 but BF16.
                    RecordedCpu{"icelake-server-xeon-8351n.txt", Target::avx512_skylake, {"AVX512_BF16"}},
                    RecordedCpu{"tigerlake-core-i7-1165g7.txt", Target::avx512_skylake, {"AVX512_BF16"}},
                    RecordedCpu{"sapphire-rapids-xeon-w9-3475x.txt", Target::avx512_zen4, {}},
                    RecordedCpu{"intel-xeon-kvm-spr-class.txt", Target::avx512_zen4, {}},
                    RecordedCpu{"haswell-ep-xeon-e5-2699v3.txt", Target::avx2, kNoAvx512},
                    RecordedCpu{"westmere-xeon-w3670.txt", Target::x86_64,
                                {"MOVBE", "LZCNT", "BMI1", "BMI2", "AVX", "AVX2", "FMA", "F16C", "OSXSAVE",
                                 "OS_YMM_STATE"}}),
    recorded_file_name);

INSTANTIATE_TEST_SUITE_P(
    QemuModels, Recorded,
    testing::Values(RecordedCpu{"qemu-haswell-v4.txt", Target::avx2, {}},
                    RecordedCpu{"qemu-epyc-milan-v1.txt", Target::avx2, {}},
                    RecordedCpu{"qemu-nehalem-v1.txt", Target::x86_64, {}}),
    recorded_file_name);

// A hypervisor or OS can leave a state off in XCR0 while cpuid still
// reports the instructions: their code would fault.
TEST(Xcr0, AvxFiveTwelveOffInTheOsMeansAvx2) {
    x86::CpuWords words = recorded("zen4-epyc-9654.txt");
    words.xcr0 = 0x7;  // x87, SSE, AVX: no opmask or ZMM state
    EXPECT_EQ(x86::best_target(words), Target::avx2);
    EXPECT_EQ(x86::missing_features(words, Target::avx512_zen4), std::vector<std::string>{"OS_ZMM_STATE"});
    EXPECT_EQ(x86::missing_features(words, Target::avx512_skylake), std::vector<std::string>{"OS_ZMM_STATE"});
    words = recorded("skylake-sp-xeon-8160.txt");
    words.xcr0 = 0x7;
    EXPECT_EQ(x86::best_target(words), Target::avx2);
}

TEST(Xcr0, EachZmmStateBitIsNeeded) {
    for (const char *file : {"sapphire-rapids-xeon-w9-3475x.txt", "skylake-sp-xeon-8160.txt"}) {
        for (std::uint64_t bit : {5, 6, 7}) {
            x86::CpuWords words = recorded(file);
            words.xcr0 = 0xe7 & ~(std::uint64_t{1} << bit);
            EXPECT_EQ(x86::best_target(words), Target::avx2) << file << ": XCR0 bit " << bit;
        }
    }
}

TEST(Xcr0, AvxStateOffMeansBaseline) {
    x86::CpuWords words = recorded("zen3-epyc-kvm.txt");
    words.xcr0 = 0x3;  // x87 and SSE only
    EXPECT_EQ(x86::best_target(words), Target::x86_64);
    EXPECT_EQ(x86::missing_features(words, Target::avx2), std::vector<std::string>{"OS_YMM_STATE"});
}

TEST(Xcr0, NoOsxsaveMeansNoXgetbvAndNoAvx) {
    x86::CpuWords words = recorded("zen4-epyc-9654.txt");
    for (x86::CpuidLeaf &leaf : words.leaves) {
        if (leaf.leaf == 1) leaf.ecx &= ~(1u << 27);
    }
    words.xcr0.reset();
    EXPECT_EQ(x86::best_target(words), Target::x86_64);
    EXPECT_EQ(x86::missing_features(words, Target::avx2),
              (std::vector<std::string>{"OSXSAVE", "OS_YMM_STATE"}));
}

// Each feature's bit matters on its own: clearing any one of a CPU's
// required bits drops it to the tier below that feature's.
TEST(Features, EveryRequiredBitIsChecked) {
    const x86::CpuWords full = recorded("sapphire-rapids-xeon-w9-3475x.txt");
    ASSERT_EQ(x86::best_target(full), Target::avx512_zen4);
    int cleared = 0;
    for (const x86::CpuidLeaf &source : full.leaves) {
        for (std::uint32_t x86::CpuidLeaf::*reg : {&x86::CpuidLeaf::eax, &x86::CpuidLeaf::ebx, &x86::CpuidLeaf::ecx,
                                                   &x86::CpuidLeaf::edx}) {
            if (source.leaf == 0 || source.leaf == 0x80000000u) continue;  // the highest leaves, not features
            for (int bit = 0; bit < 32; bit++) {
                if (!((source.*reg >> bit) & 1)) continue;
                x86::CpuWords words = full;
                for (x86::CpuidLeaf &leaf : words.leaves) {
                    if (leaf.leaf == source.leaf && leaf.subleaf == source.subleaf) leaf.*reg &= ~(1u << bit);
                }
                const std::vector<std::string> missing = x86::missing_features(words, Target::avx512_zen4);
                EXPECT_LE(missing.size(), 1u) << "leaf " << source.leaf << " bit " << bit;
                if (!missing.empty()) {
                    cleared++;
                    // Down to the tier below the feature's; a baseline
                    // feature leaves the baseline, which has none below it
                    // (the dispatch refuses to run it: cpu_dispatch.cpp).
                    const int tier = static_cast<int>(tier_of(missing[0]));
                    EXPECT_EQ(x86::target_name(x86::best_target(words)),
                              std::string(x86::target_name(static_cast<Target>(std::max(tier - 1, 0)))))
                        << missing[0];
                }
            }
        }
    }
    // Every cpuid-bit feature of the list (all but the two XCR0 states).
    EXPECT_EQ(cleared, static_cast<int>(x86::required_features(Target::avx512_zen4).size()) - 2);
}

TEST(Features, TiersIncludeTheTiersBelow) {
    for (int t = 1; t < x86::kTargetCount; t++) {
        const std::vector<std::string> below = x86::required_features(static_cast<Target>(t - 1));
        const std::vector<std::string> tier = x86::required_features(static_cast<Target>(t));
        for (const std::string &name : below) EXPECT_TRUE(contains(tier, name)) << name;
        EXPECT_GT(tier.size(), below.size()) << x86::target_name(static_cast<Target>(t));
    }
    // What each tier adds: AVX2's vector extensions; AVX-512's F, CD, BW, DQ
    // and VL (Skylake-SP's, and no more: those servers run avx512_skylake);
    // the later subsets Zen 4 and Sapphire Rapids have.
    for (const char *name : {"AVX", "AVX2", "FMA", "F16C"}) {
        EXPECT_TRUE(contains(tier_only(Target::avx2), name)) << name;
    }
    EXPECT_EQ(tier_only(Target::avx512_skylake), kNoAvx512);
    EXPECT_EQ(tier_only(Target::avx512_zen4), kSkylakeLacks);
}

// Above its highest leaf a CPU answers with other data: leaf 7 of a CPU
// whose highest basic leaf is 6 must read as zeros.
TEST(Leaves, AboveTheHighestLeafReadsZero) {
    x86::CpuWords words = recorded("zen4-epyc-9654.txt");
    for (x86::CpuidLeaf &leaf : words.leaves) {
        if (leaf.leaf == 0) leaf.eax = 6;
    }
    EXPECT_EQ(words.get(7).ebx, 0u);
    EXPECT_EQ(x86::best_target(words), Target::x86_64);
    for (x86::CpuidLeaf &leaf : words.leaves) {
        if (leaf.leaf == 0x80000000u) leaf.eax = 0x80000000u;
    }
    EXPECT_EQ(words.get(0x80000001u).ecx, 0u);
}

TEST(Words, FormatAndParseRoundTrip) {
    const x86::CpuWords words = recorded("zen3-epyc-kvm.txt");
    const x86::CpuWords again = x86::parse_words(x86::format_words(words));
    EXPECT_EQ(x86::format_words(again), x86::format_words(words));
    ASSERT_TRUE(again.xcr0.has_value());
    EXPECT_EQ(*again.xcr0, 0x207u);
}

TEST(Words, ABadLineIsNamed) {
    try {
        x86::parse_words("# fine\nleaf 0x00000001 sub 0: eax=1 ebx=2\n");
        FAIL() << "a line without ecx and edx was accepted";
    } catch (const std::invalid_argument &error) {
        EXPECT_NE(std::string(error.what()).find("line 2"), std::string::npos) << error.what();
    }
}

TEST(Words, DescribesVendorModelAndName) {
    EXPECT_EQ(x86::describe_cpu(recorded("qemu-epyc-milan-v1.txt")),
              "AuthenticAMD family 0x19 model 0x1 stepping 1: AMD EPYC-Milan Processor");
    EXPECT_EQ(x86::describe_cpu(recorded("zen4-epyc-9654.txt")), "AuthenticAMD family 0x19 model 0x11 stepping 1");
}

TEST(Names, ParseWhatTheyPrint) {
    for (int t = 0; t < x86::kTargetCount; t++) {
        const Target target = static_cast<Target>(t);
        EXPECT_EQ(x86::parse_target(x86::target_name(target)), target);
    }
    EXPECT_EQ(x86::kTargetCount, 4);
    EXPECT_EQ(x86::parse_target("avx512_skylake"), Target::avx512_skylake);
    EXPECT_FALSE(x86::parse_target("avx512").has_value());
}

// On this CPU: the library's report agrees with the decision on the words
// it read, and calls run the target it names (unless MSDA_X86_TARGET caps it).
TEST(ThisCpu, TheReportMatchesTheDecision) {
    const x86::CpuWords words = x86::read_this_cpu();
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    // Leaf 1's ebx holds the initial APIC ID of the core that ran cpuid
    // (bits 24-31): the library read its words once, perhaps on the other
    // core. Nothing else differs between cores.
    const auto without_apic_id = [](x86::CpuWords cpu) {
        for (x86::CpuidLeaf &leaf : cpu.leaves) {
            if (leaf.leaf == 1) leaf.ebx &= 0x00ffffffu;
        }
        return x86::format_words(cpu);
    };
    EXPECT_EQ(without_apic_id(words), without_apic_id(x86::parse_words(dispatch.cpuid)));
    EXPECT_EQ(x86::describe_cpu(words), dispatch.cpu);
    // The tiers this tree was built with, best first (MSDA_TEST_CPU_TIERS:
    // all four, or the baseline alone in a sanitizer tree).
    std::string built;
    for (const msda::CompiledTarget &target : dispatch.targets) built += (built.empty() ? "" : ",") + target.name;
    ASSERT_EQ(built, MSDA_TEST_CPU_TIERS);
    std::string runnable;  // the best built tier this CPU runs
    for (const msda::CompiledTarget &target : dispatch.targets) {
        const Target tier = *x86::parse_target(target.name);
        EXPECT_EQ(target.features, x86::required_features(tier));
        EXPECT_EQ(target.missing, x86::missing_features(words, tier));
        if (runnable.empty() && target.missing.empty()) runnable = target.name;
    }
    if (dispatch.cap.empty()) {
        EXPECT_EQ(dispatch.selected, runnable);
        if (static_cast<int>(dispatch.targets.size()) == x86::kTargetCount) {
            EXPECT_EQ(dispatch.selected, x86::target_name(x86::best_target(words)));
        }
        EXPECT_TRUE(dispatch.error.empty());
    }
}

}  // namespace
