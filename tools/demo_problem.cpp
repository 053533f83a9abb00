#include "demo_problem.h"

#include <algorithm>
#include <cmath>

namespace msda_cli {

namespace {

// SplitMix64: a tiny generator whose sequence is the same on every platform
// and standard library, so the demo's problem is too.
class SplitMix {
public:
    explicit SplitMix(std::uint64_t seed) : state_(seed) {}

    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform(double low, double high) {
        return low + (high - low) * static_cast<double>(next() >> 11) * 0x1.0p-53;
    }

private:
    std::uint64_t state_;
};

// Trained Deformable DETR offsets stay within a few pixels of the reference
// point, at each level's own pixel size.
constexpr double kOffsetPixels = 4.0;

std::vector<float> uniform_vector(SplitMix &random, std::int64_t count, double low, double high) {
    std::vector<float> values(static_cast<std::size_t>(count));
    for (float &v : values) v = static_cast<float>(random.uniform(low, high));
    return values;
}

// Each query's reference point: the normalized centre of its own pixel.
struct ReferencePoint {
    double x, y;
};

std::vector<ReferencePoint> reference_points(const DemoShape &shape) {
    std::vector<ReferencePoint> points;
    points.reserve(static_cast<std::size_t>(shape.queries()));
    for (const msda::reference::Level &level : shape.levels)
        for (std::int64_t y = 0; y < level.height; ++y)
            for (std::int64_t x = 0; x < level.width; ++x)
                points.push_back({(static_cast<double>(x) + 0.5) / static_cast<double>(level.width),
                                  (static_cast<double>(y) + 0.5) / static_cast<double>(level.height)});
    return points;
}

msda::TensorView view(const std::vector<float> &data, std::initializer_list<std::int64_t> shape) {
    return msda::TensorView::contiguous(data.data(), msda::DType::f32, shape);
}

}  // namespace

std::int64_t DemoShape::value_length() const {
    std::int64_t length = 0;
    for (const msda::reference::Level &level : levels) length += level.height * level.width;
    return length;
}

DemoShape detr_encoder_shape() { return {2, 8, 32, 4, {{100, 167}, {50, 84}, {25, 42}, {13, 21}}}; }

DemoProblem make_demo_problem(const DemoShape &shape, std::uint64_t seed) {
    SplitMix random(seed);
    DemoProblem problem;
    problem.shape = shape;
    const auto level_count = static_cast<std::int64_t>(shape.levels.size());
    std::int64_t start = 0;
    for (const msda::reference::Level &level : shape.levels) {
        problem.spatial_shapes.push_back(level.height);
        problem.spatial_shapes.push_back(level.width);
        problem.level_start_index.push_back(start);
        start += level.height * level.width;
    }

    const std::int64_t L = shape.value_length(), Q = shape.queries();
    problem.value = uniform_vector(random, shape.batch * L * shape.heads * shape.channels, -1.0, 1.0);

    const std::vector<ReferencePoint> centres = reference_points(shape);
    const std::int64_t samples_per_head = level_count * shape.points;
    problem.sampling_locations.reserve(static_cast<std::size_t>(shape.batch * Q * shape.heads * samples_per_head * 2));
    problem.attention_weights.reserve(static_cast<std::size_t>(shape.batch * Q * shape.heads * samples_per_head));
    std::vector<double> logits(static_cast<std::size_t>(samples_per_head));
    for (std::int64_t b = 0; b < shape.batch; ++b)
        for (std::int64_t q = 0; q < Q; ++q)
            for (std::int64_t h = 0; h < shape.heads; ++h) {
                for (const msda::reference::Level &level : shape.levels)
                    for (std::int64_t p = 0; p < shape.points; ++p) {
                        const double dx = random.uniform(-kOffsetPixels, kOffsetPixels) / static_cast<double>(level.width);
                        const double dy = random.uniform(-kOffsetPixels, kOffsetPixels) / static_cast<double>(level.height);
                        problem.sampling_locations.push_back(static_cast<float>(centres[q].x + dx));
                        problem.sampling_locations.push_back(static_cast<float>(centres[q].y + dy));
                    }
                // Softmax over (levels, points), as the model normalizes them.
                for (double &logit : logits) logit = random.uniform(-3.0, 3.0);
                const double largest = *std::ranges::max_element(logits);
                double total = 0.0;
                for (double &logit : logits) total += (logit = std::exp(logit - largest));
                for (double weight : logits) problem.attention_weights.push_back(static_cast<float>(weight / total));
            }

    problem.grad_output = uniform_vector(random, shape.batch * Q * shape.heads * shape.channels, -1.0, 1.0);
    return problem;
}

DemoResults make_results(const DemoProblem &problem) {
    return {std::vector<float>(problem.grad_output.size()), std::vector<float>(problem.value.size()),
            std::vector<float>(problem.sampling_locations.size()), std::vector<float>(problem.attention_weights.size())};
}

msda::ForwardArgs forward_args(const DemoProblem &problem, DemoResults &results) {
    const DemoShape &s = problem.shape;
    const auto N_l = static_cast<std::int64_t>(s.levels.size());
    const std::int64_t L = s.value_length(), Q = s.queries();
    msda::ForwardArgs args;
    args.value = view(problem.value, {s.batch, L, s.heads, s.channels});
    args.spatial_shapes = msda::TensorView::contiguous(problem.spatial_shapes.data(), msda::DType::i64, {N_l, 2});
    args.level_start_index = msda::TensorView::contiguous(problem.level_start_index.data(), msda::DType::i64, {N_l});
    args.sampling_locations = view(problem.sampling_locations, {s.batch, Q, s.heads, N_l, s.points, 2});
    args.attention_weights = view(problem.attention_weights, {s.batch, Q, s.heads, N_l, s.points});
    args.output = view(results.output, {s.batch, Q, s.heads * s.channels});
    return args;
}

msda::BackwardArgs backward_args(const DemoProblem &problem, DemoResults &results) {
    const msda::ForwardArgs inputs = forward_args(problem, results);
    msda::BackwardArgs args;
    args.value = inputs.value;
    args.spatial_shapes = inputs.spatial_shapes;
    args.level_start_index = inputs.level_start_index;
    args.sampling_locations = inputs.sampling_locations;
    args.attention_weights = inputs.attention_weights;
    args.grad_output = inputs.output;
    args.grad_output.data = const_cast<float *>(problem.grad_output.data());
    // Same shapes as the tensors they are the gradients of.
    args.grad_value = inputs.value;
    args.grad_value.data = results.grad_value.data();
    args.grad_sampling_locations = inputs.sampling_locations;
    args.grad_sampling_locations.data = results.grad_sampling_locations.data();
    args.grad_attention_weights = inputs.attention_weights;
    args.grad_attention_weights.data = results.grad_attention_weights.data();
    return args;
}

}  // namespace msda_cli
