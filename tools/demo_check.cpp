#include "demo_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

namespace msda_cli {

namespace {

using msda::reference::max_relative_error;

// The rows of a (B, N_q, per_query...) tensor that belong to `queries`, in
// that order, as type T: a (B, queries.size(), per_query...) tensor.
template <typename T>
std::vector<T> gather_queries(const std::vector<float> &tensor, const DemoShape &shape, const std::vector<std::int64_t> &queries) {
    const std::int64_t per_query = static_cast<std::int64_t>(tensor.size()) / (shape.batch * shape.queries());
    std::vector<T> gathered;
    gathered.reserve(static_cast<std::size_t>(shape.batch * static_cast<std::int64_t>(queries.size()) * per_query));
    for (std::int64_t b = 0; b < shape.batch; ++b)
        for (std::int64_t q : queries) {
            const auto first = tensor.begin() + (b * shape.queries() + q) * per_query;
            gathered.insert(gathered.end(), first, first + per_query);
        }
    return gathered;
}

std::vector<double> to_double(const std::vector<float> &values) { return {values.begin(), values.end()}; }

msda::reference::Problem reference_problem(const DemoProblem &problem, const std::vector<std::int64_t> &queries) {
    const DemoShape &shape = problem.shape;
    msda::reference::Problem reference;
    reference.batch = shape.batch;
    reference.queries = static_cast<std::int64_t>(queries.size());
    reference.heads = shape.heads;
    reference.channels = shape.channels;
    reference.points = shape.points;
    reference.levels = shape.levels;
    reference.value = to_double(problem.value);
    reference.sampling_locations = gather_queries<double>(problem.sampling_locations, shape, queries);
    reference.attention_weights = gather_queries<double>(problem.attention_weights, shape, queries);
    return reference;
}

// `count` distinct queries, sorted, chosen with a fixed seed.
std::vector<std::int64_t> sample_queries(std::int64_t total, std::int64_t count, std::uint64_t seed) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(total));
    std::iota(all.begin(), all.end(), 0);
    if (count >= total) return all;
    // A partial Fisher-Yates shuffle driven by a 64-bit LCG (Knuth's MMIX
    // constants): reproducible everywhere, and plenty for picking queries.
    std::uint64_t state = seed;
    for (std::int64_t i = 0; i < count; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const auto j = i + static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(total - i));
        std::swap(all[i], all[j]);
    }
    all.resize(static_cast<std::size_t>(count));
    std::ranges::sort(all);
    return all;
}

}  // namespace

Comparison check_sampled_output(const DemoProblem &problem, const DemoResults &results, std::int64_t sample_size,
                                std::uint64_t seed) {
    const DemoShape &shape = problem.shape;
    const std::vector<std::int64_t> queries = sample_queries(shape.queries(), sample_size, seed);
    const std::vector<double> expected = msda::reference::forward(reference_problem(problem, queries));
    return {"output", std::to_string(queries.size()) + " random queries",
            max_relative_error(gather_queries<float>(results.output, shape, queries), expected)};
}

std::vector<Comparison> check_all_gradients(const DemoProblem &problem, const DemoResults &results) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(problem.shape.queries()));
    std::iota(all.begin(), all.end(), 0);
    const msda::reference::Gradients gradients =
        msda::reference::backward(reference_problem(problem, all), to_double(problem.grad_output));
    return {
        {"grad_value", "full tensor", max_relative_error(results.grad_value, gradients.value)},
        {"grad_sampling_locations", "full tensor",
         max_relative_error(results.grad_sampling_locations, gradients.sampling_locations)},
        {"grad_attention_weights", "full tensor",
         max_relative_error(results.grad_attention_weights, gradients.attention_weights)},
    };
}

}  // namespace msda_cli
