// The cache boundaries of the automatic policies (docs/policies.md), each
// defined once, as functions of the L2 they are measured against: the
// dispatch decides with the running CPU's (cpu_caches()), and the tests
// compute their expectations with the same functions, on the running CPU's
// caches and on recorded ones (tests/cpu_caches/).
#pragma once

#include <cstdint>

namespace msda::detail::policy {

// Options::relayout (automatic): value is staged head-major only when it
// holds more bytes than a core's L2; a value that fits is read from there
// whatever its layout.
constexpr bool value_outgrows_l2(std::int64_t value_bytes, std::int64_t l2_bytes) {
    return value_bytes > l2_bytes;
}

// Options::sample_order (automatic), for the forward and the per-sample
// gradients: a by-level walk keeps one level of one head as its working
// set, and where that fits in half a core's L2 it beats by_query even for
// clustered samples (G's 60 x 40 levels, 2 MiB L2). These are the most
// bytes a head's largest level may hold and still walk by level.
constexpr std::int64_t by_level_slice_limit(std::int64_t l2_bytes) { return l2_bytes / 2; }

// Whether one head's largest level (largest_level_pixels = H x W of the
// level with the most pixels, over every level) outgrows a by-level walk:
// by_query may then win, if the queries' samples cluster.
constexpr bool level_outgrows_by_level_walk(std::int64_t largest_level_pixels, std::int64_t channels,
                                            std::int64_t element_bytes, std::int64_t l2_bytes) {
    return largest_level_pixels * channels * element_bytes > by_level_slice_limit(l2_bytes);
}

}  // namespace msda::detail::policy
