// The caches the run-time policies size against (runtime/src/cpu_caches.h):
// sysfs' size strings, whole and partial cache descriptions written here as
// sysfs lays them out, what this machine's description (or MSDA_CPU_CACHES')
// gives, and the policies' boundaries (policy.h) on recorded cores.
#include <gtest/gtest.h>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include "cpu_caches.h"
#include "policy.h"

namespace {

using msda::detail::parse_cache_size;
using msda::detail::read_cpu_caches;

TEST(CpuCaches, SysfsSizesAreParsed) {
    EXPECT_EQ(parse_cache_size("48K"), 48 << 10);
    EXPECT_EQ(parse_cache_size("2048K"), 2 << 20);
    EXPECT_EQ(parse_cache_size("1M"), 1 << 20);
    EXPECT_EQ(parse_cache_size("32768"), 32768);
    EXPECT_EQ(parse_cache_size("491520K"), std::int64_t{491520} << 10);
    for (const char *bad : {"", "K", "12Q", "-4K", "4 K", "0K", "99999999999999K"}) {
        EXPECT_EQ(parse_cache_size(bad), std::nullopt) << '"' << bad << '"';
    }
}

// A directory laid out as /sys/devices/system/cpu/cpuN/cache.
class FakeSysfs : public ::testing::Test {
protected:
    void SetUp() override {
        directory_ = std::filesystem::temp_directory_path() /
                     ("msda_cpu_caches_" + std::to_string(::getpid()) + "_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(directory_);
        std::filesystem::create_directories(directory_);
    }
    void TearDown() override { std::filesystem::remove_all(directory_); }
    void add(int index, const char *level, const char *type, const char *size) {
        const std::filesystem::path entry = directory_ / ("index" + std::to_string(index));
        std::filesystem::create_directories(entry);
        std::ofstream(entry / "level") << level << "\n";
        std::ofstream(entry / "type") << type << "\n";
        std::ofstream(entry / "size") << size << "\n";
    }
    std::string directory() const { return directory_.string(); }

private:
    std::filesystem::path directory_;
};

TEST_F(FakeSysfs, ACoresDataCachesAreRead) {
    add(0, "1", "Data", "64K");
    add(1, "1", "Instruction", "32K");
    add(2, "2", "Unified", "1024K");
    add(3, "3", "Unified", "32768K");
    const msda::detail::CpuCaches caches = read_cpu_caches(directory());
    EXPECT_EQ(caches.l1_data, 64 << 10);
    EXPECT_EQ(caches.l2, 1 << 20);
    EXPECT_EQ(caches.source, directory());
}

TEST_F(FakeSysfs, WhatIsNotDescribedTakesTheDefaults) {
    add(0, "1", "Data", "32K");
    add(1, "2", "Unified", "garbled");
    const msda::detail::CpuCaches caches = read_cpu_caches(directory());
    EXPECT_EQ(caches.l1_data, 32 << 10);
    EXPECT_EQ(caches.l2, 2 << 20);
    EXPECT_EQ(caches.source, "L2 not described under " + directory() + ": msda's default 2 MiB L2");

    const msda::detail::CpuCaches none = read_cpu_caches(directory() + "/absent");
    EXPECT_EQ(none.l1_data, 48 << 10);
    EXPECT_EQ(none.l2, 2 << 20);
    EXPECT_NE(none.source.find("L1d and L2 not described under"), std::string::npos) << none.source;
    EXPECT_NE(none.source.find("48 KiB L1d, 2 MiB L2"), std::string::npos) << none.source;
}

// What cpu_dispatch reports is this machine's description (or the one
// MSDA_CPU_CACHES names), read the same way.
TEST(CpuCaches, ThisMachinesAreReported) {
    const char *emulated = std::getenv("MSDA_CPU_CACHES");
    EXPECT_EQ(msda::detail::cpu_caches_directory(), emulated != nullptr && *emulated != '\0'
                                                         ? std::string(emulated)
                                                         : std::string("/sys/devices/system/cpu/cpu0/cache"));
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    const msda::detail::CpuCaches caches = read_cpu_caches(msda::detail::cpu_caches_directory());
    EXPECT_EQ(dispatch.l1_data_cache_bytes, caches.l1_data);
    EXPECT_EQ(dispatch.l2_cache_bytes, caches.l2);
    EXPECT_EQ(dispatch.caches, caches.source);
    EXPECT_GE(dispatch.l1_data_cache_bytes, 4 << 10);
    EXPECT_GE(dispatch.l2_cache_bytes, dispatch.l1_data_cache_bytes);
}

// The recorded cores (tests/cpu_caches/README.md): what each folder
// describes, and where the automatic policies' boundaries (policy.h) fall
// on it, worked out here by hand.
struct RecordedCore {
    const char *folder;
    std::int64_t l1_data, l2;
    // A float32 level of 32 channels is 128 bytes a pixel: the most pixels
    // its largest level may have and still walk by level (half the L2).
    std::int64_t by_level_pixels;
};
const RecordedCore kRecordedCores[] = {
    {"zen3-epyc-kvm", 32 << 10, 512 << 10, 2048},
    {"zen4-epyc-9654", 32 << 10, 1 << 20, 4096},
    {"xeon-kvm-spr-class", 48 << 10, 2 << 20, 8192},
    {"neoverse-n1-graviton2", 64 << 10, 1 << 20, 4096},
    {"cortex-a76-bcm2712", 64 << 10, 512 << 10, 2048},
};

std::string recorded(const char *folder) { return std::string(MSDA_RECORDED_CACHES_DIR) + "/" + folder; }

TEST(RecordedCaches, AreReadAsTheirCoresDescribeThem) {
    for (const RecordedCore &core : kRecordedCores) {
        SCOPED_TRACE(core.folder);
        const msda::detail::CpuCaches caches = read_cpu_caches(recorded(core.folder));
        EXPECT_EQ(caches.l1_data, core.l1_data);
        EXPECT_EQ(caches.l2, core.l2);
        EXPECT_EQ(caches.source, recorded(core.folder));
    }
    // Every recorded folder is in the table above.
    std::size_t folders = 0;
    for (const auto &entry : std::filesystem::directory_iterator(MSDA_RECORDED_CACHES_DIR)) {
        folders += entry.is_directory() ? 1 : 0;
    }
    EXPECT_EQ(folders, std::size(kRecordedCores));
}

TEST(RecordedCaches, SampleOrderBoundary) {
    using msda::detail::policy::level_outgrows_by_level_walk;
    for (const RecordedCore &core : kRecordedCores) {
        SCOPED_TRACE(core.folder);
        const std::int64_t l2 = read_cpu_caches(recorded(core.folder)).l2;
        const std::int64_t pixels = core.by_level_pixels;
        EXPECT_FALSE(level_outgrows_by_level_walk(pixels, 32, 4, l2));
        EXPECT_TRUE(level_outgrows_by_level_walk(pixels + 1, 32, 4, l2));
        // Half precision: twice the pixels; 64 channels: half of them.
        EXPECT_FALSE(level_outgrows_by_level_walk(2 * pixels, 32, 2, l2));
        EXPECT_TRUE(level_outgrows_by_level_walk(2 * pixels + 1, 32, 2, l2));
        EXPECT_FALSE(level_outgrows_by_level_walk(pixels / 2, 64, 4, l2));
        EXPECT_TRUE(level_outgrows_by_level_walk(pixels / 2 + 1, 64, 4, l2));
    }
}

TEST(RecordedCaches, RelayoutBoundary) {
    using msda::detail::policy::value_outgrows_l2;
    for (const RecordedCore &core : kRecordedCores) {
        SCOPED_TRACE(core.folder);
        const std::int64_t l2 = read_cpu_caches(recorded(core.folder)).l2;
        EXPECT_FALSE(value_outgrows_l2(core.l2, l2));
        EXPECT_TRUE(value_outgrows_l2(core.l2 + 1, l2));
    }
}

// MSDA_POLICY: the run-time knobs (docs/knobs.md) over a CPU's defaults.
TEST(PolicyKnobs, OverridesSetTheNamedKnobsOnly) {
    msda::detail::Policy defaults;
    defaults.l2_bytes = 1 << 20;
    const msda::detail::Policy policy = msda::detail::with_overrides(
        defaults, "relayout_samples_per_row=8,probe_neighbourhood_pixels=2.5,probe_queries=64");
    EXPECT_EQ(policy.l2_bytes, 1 << 20);
    EXPECT_EQ(policy.relayout_samples_per_row, 8);
    EXPECT_EQ(policy.probe_queries, 64);
    EXPECT_EQ(policy.probe_neighbourhood_pixels, 2.5);
    EXPECT_EQ(msda::detail::with_overrides(defaults, "l2_bytes=524288").l2_bytes, 524288);
    EXPECT_EQ(msda::detail::with_overrides(defaults, "").probe_queries, defaults.probe_queries);
}

TEST(PolicyKnobs, BadOverridesNameTheVariableAndTheKnob) {
    const std::pair<const char *, const char *> cases[] = {
        {"probe_queries=0", "msda: MSDA_POLICY: probe_queries must be a whole number from 1 to 1048576, got \"0\""},
        {"l2_bytes=100000.5", "msda: MSDA_POLICY: l2_bytes must be a whole number from 65536 to 1073741824, got "
                              "\"100000.5\""},
        {"relayout_samples_per_row=", "msda: MSDA_POLICY: relayout_samples_per_row must be a whole number from 1 to "
                                      "1048576, got \"\""},
        {"probe_neighbourhood_pixels=nan", "msda: MSDA_POLICY: probe_neighbourhood_pixels must be from 0 to 1000000, "
                                           "got \"nan\""},
        {"query_tile=8", "msda: MSDA_POLICY: expected knob=value,... of l2_bytes, relayout_samples_per_row, "
                         "probe_queries, probe_neighbourhood_pixels; got \"query_tile=8\""},
        {"probe_queries", "msda: MSDA_POLICY: expected knob=value,... of l2_bytes, relayout_samples_per_row, "
                          "probe_queries, probe_neighbourhood_pixels; got \"probe_queries\""},
    };
    for (const auto &[overrides, message] : cases) {
        try {
            msda::detail::with_overrides(msda::detail::Policy{}, overrides);
            ADD_FAILURE() << overrides << " was accepted";
        } catch (const msda::Error &error) {
            EXPECT_STREQ(error.what(), message) << overrides;
        }
    }
}

}  // namespace
