// The caches of one core of the CPU that runs the code, which the run-time
// policies size their working sets against (Options::relayout's automatic
// copy, Options::sample_order's automatic walk): Linux's sysfs description
// of cpu0's caches, read once; where it cannot be read, the sizes the
// policies were measured with (48 KiB L1d, 2 MiB L2).
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

// This process's CPU (cpu0), read once.
const CpuCaches &cpu_caches();

// The caches described under `directory` (sysfs' cpu/cpuN/cache: index*/
// with level, type and size files); each size not found there takes its
// default and `source` says so.
CpuCaches read_cpu_caches(const std::string &directory);

// A sysfs cache size ("48K", "2048K", "1M", "32768"): bytes, or nothing
// when the text is not one.
std::optional<std::int64_t> parse_cache_size(std::string_view text);

}  // namespace msda::detail
