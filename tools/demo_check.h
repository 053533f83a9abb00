// The demo's spot checks: the library's results against the float64
// reference (reference/), computed on the same float32 inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "demo_problem.h"

namespace msda_cli {

// SPEC: f32 results within 1e-5 of the reference, relative to the largest
// magnitude in the reference tensor.
constexpr double kFloat32Tolerance = 1e-5;

struct Comparison {
    std::string tensor;
    std::string scope;  // what part was compared, e.g. "64 queries"
    double max_relative_error = 0.0;

    bool passed() const { return max_relative_error <= kFloat32Tolerance; }
};

// output depends only on a query's own inputs (and all of value), so a
// reference forward restricted to a random sample of queries checks it at a
// fraction of the cost.
Comparison check_sampled_output(const DemoProblem &problem, const DemoResults &results, std::int64_t sample_size,
                                std::uint64_t seed);

// grad_value gathers from every query, so it needs the reference backward on
// the whole problem (about 1.5e9 multiply-adds on the demo's, a few seconds);
// as it gives all three gradients, each is compared over the whole tensor.
std::vector<Comparison> check_all_gradients(const DemoProblem &problem, const DemoResults &results);

}  // namespace msda_cli
