// The caches the run-time policies size against (runtime/src/cpu_caches.h):
// sysfs' size strings, whole and partial cache descriptions written here as
// sysfs lays them out, and what this machine's description gives.
#include <gtest/gtest.h>

#include <msda/msda.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "cpu_caches.h"

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

// What cpu_dispatch reports is this machine's description, read the same way.
TEST(CpuCaches, ThisMachinesAreReported) {
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    const msda::detail::CpuCaches caches = read_cpu_caches("/sys/devices/system/cpu/cpu0/cache");
    EXPECT_EQ(dispatch.l1_data_cache_bytes, caches.l1_data);
    EXPECT_EQ(dispatch.l2_cache_bytes, caches.l2);
    EXPECT_EQ(dispatch.caches, caches.source);
    EXPECT_GE(dispatch.l1_data_cache_bytes, 4 << 10);
    EXPECT_GE(dispatch.l2_cache_bytes, dispatch.l1_data_cache_bytes);
}

}  // namespace
