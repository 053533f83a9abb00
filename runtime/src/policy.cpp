#include "policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "buffers.h"
#include "cpu_caches.h"
#include "errors.h"
#include "validate.h"

namespace msda::detail {

Policy Policy::for_caches(const CpuCaches &caches) {
    Policy policy;
    policy.l2_bytes = caches.l2;
    return policy;
}

Policy with_overrides(Policy policy, const std::string &overrides) {
    struct Knob {
        const char *name;
        double low, high;
        bool whole;
    };
    static constexpr Knob kKnobs[] = {{"l2_bytes", 65536, 1 << 30, true},
                                      {"relayout_samples_per_row", 1, 1 << 20, true},
                                      {"probe_queries", 1, 1 << 20, true},
                                      {"probe_neighbourhood_pixels", 0, 1e6, false}};
    std::size_t at = 0;
    while (at < overrides.size()) {
        const std::size_t end = std::min(overrides.find(',', at), overrides.size());
        const std::string setting = overrides.substr(at, end - at);
        at = end + 1;
        const std::size_t equals = setting.find('=');
        const std::string name = setting.substr(0, equals);
        const Knob *knob = nullptr;
        for (const Knob &candidate : kKnobs) {
            if (name == candidate.name) knob = &candidate;
        }
        if (equals == std::string::npos || knob == nullptr) {
            fail("MSDA_POLICY", "expected knob=value,... of l2_bytes, relayout_samples_per_row, probe_queries, "
                                "probe_neighbourhood_pixels; got \"" + setting + "\"");
        }
        const std::string text = setting.substr(equals + 1);
        char *parsed_to = nullptr;
        const double value = text.empty() ? std::nan("") : std::strtod(text.c_str(), &parsed_to);
        if (parsed_to != text.c_str() + text.size() || !(value >= knob->low && value <= knob->high) ||
            (knob->whole && value != std::floor(value))) {
            fail("MSDA_POLICY", std::string(knob->name) + " must be " + (knob->whole ? "a whole number " : "") +
                                    "from " + std::to_string(static_cast<std::int64_t>(knob->low)) + " to " +
                                    std::to_string(static_cast<std::int64_t>(knob->high)) + ", got \"" + text + "\"");
        }
        if (name == "l2_bytes") policy.l2_bytes = static_cast<std::int64_t>(value);
        if (name == "relayout_samples_per_row") policy.relayout_samples_per_row = static_cast<std::int64_t>(value);
        if (name == "probe_queries") policy.probe_queries = static_cast<std::int64_t>(value);
        if (name == "probe_neighbourhood_pixels") policy.probe_neighbourhood_pixels = value;
    }
    return policy;
}

const Policy &process_policy() {
    static const Policy policy = [] {
        const char *overrides = std::getenv("MSDA_POLICY");
        return with_overrides(Policy::for_caches(cpu_caches()), overrides != nullptr ? overrides : "");
    }();
    return policy;
}

bool stages_value(const ProblemSize &size, const Options &options, TargetFamily family, const Policy &policy) {
    if (options.relayout == Relayout::never || options.value_layout != ValueLayout::BLNC || size.heads < 2 ||
        is_gpu(family)) {
        return false;  // the GPU family reads value as given
    }
    // The copy's head stride (L * C_h elements) must fit a Halide buffer's
    // 32-bit stride: past it the kernels read the caller's value, even with
    // Relayout::always.
    if (size.value_length * size.channels > std::numeric_limits<std::int32_t>::max()) return false;
    if (options.relayout == Relayout::always) return true;
    const std::int64_t bytes = size.batch * size.value_length * size.heads * size.channels *
                               static_cast<std::int64_t>(dtype_size(size.dtype));
    // Validated sizes: each factor fits 32 bits, so the product fits 64.
    const std::int64_t samples_per_head = size.queries * size.levels * size.points;
    return policy::value_outgrows_l2(bytes, policy.l2_bytes) &&
           samples_per_head >= policy.relayout_samples_per_row * size.value_length;
}

namespace {

// The automatic order's probe (Policy::probe_queries). A query with a
// non-finite level-0 location does not count as clustered. Reads float32
// BQHLP2 locations (a by-query variant exists for the call: its locations
// are float32 and dense).
bool queries_sample_neighbourhoods(const TensorView &locations, const ProblemSize &size, const LevelTable &levels,
                                   const Policy &policy) {
    const double height = levels.shapes[0], width = levels.shapes[1];
    const float *data = reinterpret_cast<const float *>(host_address(locations));
    const std::int64_t pairs = size.batch * size.queries;
    const std::int64_t probes = std::min(policy.probe_queries, pairs);
    std::int64_t clustered = 0;
    for (std::int64_t i = 0; i < probes; i++) {
        const std::int64_t pair = i * (pairs / probes);
        const std::int64_t b = pair / size.queries, q = pair % size.queries;
        double min_x = 0, max_x = 0, min_y = 0, max_y = 0;
        bool finite = true;
        for (std::int64_t h = 0; h < size.heads && finite; h++) {
            for (std::int64_t p = 0; p < size.points; p++) {
                const float *xy = data + b * locations.strides[0] + q * locations.strides[1] +
                                  h * locations.strides[2] + p * locations.strides[4];
                const double x = xy[0] * width, y = xy[locations.strides[5]] * height;
                if (!std::isfinite(x) || !std::isfinite(y)) {
                    finite = false;
                    break;
                }
                const bool first = h == 0 && p == 0;
                min_x = first ? x : std::min(min_x, x), max_x = first ? x : std::max(max_x, x);
                min_y = first ? y : std::min(min_y, y), max_y = first ? y : std::max(max_y, y);
            }
        }
        const double neighbourhood = policy.probe_neighbourhood_pixels;
        if (finite && max_x - min_x <= neighbourhood && max_y - min_y <= neighbourhood) clustered++;
    }
    return 2 * clustered > probes;
}

}  // namespace

bool chooses_by_query(const TensorView &locations, const Options &options, const ProblemSize &size,
                      const LevelTable &levels, const Policy &policy, bool any_level_size) {
    if (options.sample_order == SampleOrder::by_query) return true;
    if (options.sample_order == SampleOrder::by_level) return false;
    if (any_level_size) return queries_sample_neighbourhoods(locations, size, levels, policy);
    std::int64_t largest_level = 0;
    for (std::size_t l = 0; l < levels.starts.size(); l++) {
        largest_level = std::max<std::int64_t>(largest_level, std::int64_t{levels.shapes[2 * l]} * levels.shapes[2 * l + 1]);
    }
    return policy::level_outgrows_by_level_walk(largest_level, size.channels,
                                                static_cast<std::int64_t>(dtype_size(size.dtype)), policy.l2_bytes) &&
           queries_sample_neighbourhoods(locations, size, levels, policy);
}

}  // namespace msda::detail
