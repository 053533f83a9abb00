// The caches of one core of the CPU that runs the code, which the run-time
// policies size their working sets against (Options::relayout's automatic
// copy, Options::sample_order's automatic walk; policy.h): Linux's sysfs
// description of cpu0's caches, read once; where it cannot be read, the
// sizes the policies were measured with (48 KiB L1d, 2 MiB L2).
// MSDA_CPU_CACHES, where set, names a directory laid out as sysfs'
// cpu/cpuN/cache to read instead: the policies then decide as on the CPU it
// describes (the tests emulate recorded CPUs with it, tests/cpu_caches/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace msda::detail {

struct CpuCaches {
    std::int64_t l1_data = 0;  // bytes of a core's level-1 data cache
    std::int64_t l2 = 0;       // bytes of a core's level-2 cache
    std::string source;        // where the sizes came from
};

// The directory cpu_caches() reads: MSDA_CPU_CACHES where set and not
// empty, else /sys/devices/system/cpu/cpu0/cache.
std::string cpu_caches_directory();

// This process's CPU (cpu0, or what MSDA_CPU_CACHES describes), read once.
const CpuCaches &cpu_caches();

// The caches described under `directory` (sysfs' cpu/cpuN/cache: index*/
// with level, type and size files); each size not found there takes its
// default and `source` says so.
CpuCaches read_cpu_caches(const std::string &directory);

// A sysfs cache size ("48K", "2048K", "1M", "32768"): bytes, or nothing
// when the text is not one.
std::optional<std::int64_t> parse_cache_size(std::string_view text);

}  // namespace msda::detail
