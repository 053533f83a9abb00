// Tensors past 2^31 elements, end to end (SPEC: index arithmetic is 64-bit
// wherever a tensor can exceed 2^31 elements), within this machine's memory:
// - a value of 2^31 + 2^21 elements in one batch element, a view into a
//   sparse mapping (only the rows the samples read are ever committed), read
//   past element 2^31 by the forward and every gradient, and grad_value (8
//   GiB, the one tensor here that is written whole) scattered into there;
// - 2^31 + 2^20 samples, sampling_locations and attention_weights broadcast
//   over the queries (stride 0): the forward, grad_value's 2^31 + 2^20
//   contributions, and a float16 grad_attention_weights of 2^31 + 2^20
//   elements (4 GiB);
// - the GPU families, whose kernels index with 32-bit integers, refuse both
//   by name (OpenCL where a device is; CUDA where there is one).
// The expected values come from the samples' own arithmetic: each sample
// sits on a pixel centre (one corner, weight 1) or halfway between four
// pixels (four corners, weight 1/4 each), with small integer values, so
// every expected sum is exact. Registered RUN_SERIAL (tests/huge_tensors.cmake):
// it commits up to 8 GiB.
#include <gtest/gtest.h>

#include <msda/half.hpp>
#include <msda/msda.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sparse_memory.h"
#include "test_util.h"

namespace {

using msda::DType;
using msda::TensorView;
using msda::testing::SparseMemory;

// A backward call's inputs: the forward call's.
msda::BackwardArgs backward_inputs(const msda::ForwardArgs &forward) {
    msda::BackwardArgs backward;
    backward.value = forward.value;
    backward.spatial_shapes = forward.spatial_shapes;
    backward.level_start_index = forward.level_start_index;
    backward.sampling_locations = forward.sampling_locations;
    backward.attention_weights = forward.attention_weights;
    return backward;
}

struct Level {
    std::int64_t height, width, start;
};

// One sample of the huge-value problem: where it reads and with what weight.
struct Sample {
    std::int64_t query, head, level, x, y;  // the pixel (x, y), or the top-left of four
    bool between = false;                   // halfway between (x, y) and (x + 1, y + 1)
    float weight;
};

// The value rows the huge-value problem reads, their values and where they
// are. 2^30 + 2^20 rows of two heads, one channel: 2^31 + 2^21 elements.
class HugeValue : public ::testing::Test {
protected:
    static constexpr std::int64_t kHeads = 2, kQueries = 4, kPoints = 2;
    const std::vector<Level> levels = {{32768, 16384, 0}, {32768, 16384, 1 << 29}, {1024, 1024, 1 << 30}};
    const std::int64_t length = (std::int64_t{1} << 30) + (1 << 20);
    const std::int64_t elements = length * kHeads;

    std::int64_t row(std::int64_t level, std::int64_t x, std::int64_t y) const {
        return levels[level].start + y * levels[level].width + x;
    }
    // value is BLNC, one channel: row r of head h is element 2 r + h.
    std::int64_t element(std::int64_t level, std::int64_t x, std::int64_t y, std::int64_t head) const {
        return row(level, x, y) * kHeads + head;
    }

    // Every (query, head, level, point): pixels at the far corners of the
    // big levels (rows past 2^29, elements past 2^31 in the last two levels)
    // and at the start.
    std::vector<Sample> samples() const {
        std::vector<Sample> out;
        for (std::int64_t q = 0; q < kQueries; ++q) {
            for (std::int64_t h = 0; h < kHeads; ++h) {
                for (std::int64_t l = 0; l < 3; ++l) {
                    for (std::int64_t p = 0; p < kPoints; ++p) {
                        const Level &level = levels[l];
                        Sample s{q, h, l, 0, 0, false, 0.25f * static_cast<float>(1 + q + p)};
                        if (p == 0) {  // the last pixel but a few
                            s.x = level.width - 2 - q;
                            s.y = level.height - 1 - h;
                        } else {  // between four pixels near the start, or the end for the last level
                            s.between = true;
                            s.x = l == 2 ? level.width - 3 : q;
                            s.y = l == 2 ? level.height - 2 - h : 1 + h;
                        }
                        out.push_back(s);
                    }
                }
            }
        }
        return out;
    }

    // The value at an element: a small integer where a sample reads, 0
    // (an untouched page) elsewhere.
    static float value_at(std::int64_t element) { return static_cast<float>(element % 7) - 3.0f; }

    // The corners a sample reads, each with its weight.
    std::vector<std::pair<std::int64_t, double>> corners(const Sample &s) const {
        if (!s.between) return {{element(s.level, s.x, s.y, s.head), 1.0}};
        std::vector<std::pair<std::int64_t, double>> out;
        for (std::int64_t dy = 0; dy < 2; ++dy) {
            for (std::int64_t dx = 0; dx < 2; ++dx) out.push_back({element(s.level, s.x + dx, s.y + dy, s.head), 0.25});
        }
        return out;
    }

    // Normalised location of a sample (align_corners = false): a pixel
    // centre is (x + 0.5) / W; halfway to the next is (x + 1) / W. Exact in
    // float32 for power-of-two sizes.
    std::pair<float, float> location(const Sample &s) const {
        const double shift = s.between ? 1.0 : 0.5;
        return {static_cast<float>((s.x + shift) / levels[s.level].width),
                static_cast<float>((s.y + shift) / levels[s.level].height)};
    }
};

TEST_F(HugeValue, ForwardAndBackwardReadAndWritePastElement2To31) {
    SparseMemory value_memory(elements * sizeof(float)), grad_value_memory(elements * sizeof(float), true);
    ASSERT_NE(value_memory.as<float>(), nullptr) << "could not reserve the sparse mapping";
    ASSERT_NE(grad_value_memory.as<float>(), nullptr) << "could not reserve the sparse mapping";
    float *value = value_memory.as<float>();
    const std::vector<Sample> all = samples();
    for (const Sample &s : all) {
        for (const auto &[e, w] : corners(s)) value[e] = value_at(e);
    }

    const std::int64_t n_l = 3;
    std::vector<float> locations(kQueries * kHeads * n_l * kPoints * 2), weights(kQueries * kHeads * n_l * kPoints);
    std::vector<float> grad_output(kQueries * kHeads), output(kQueries * kHeads, -1.0f);
    std::vector<float> grad_locations(locations.size(), -1.0f), grad_weights(weights.size(), -1.0f);
    for (std::size_t i = 0; i < grad_output.size(); ++i) grad_output[i] = 1.0f + static_cast<float>(i % 3);
    auto sample_index = [&](const Sample &s) { return ((s.query * kHeads + s.head) * n_l + s.level) * kPoints; };
    std::vector<std::int64_t> point_of(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        const std::int64_t at = sample_index(all[i]) + static_cast<std::int64_t>(i % kPoints);
        const auto [u, v] = location(all[i]);
        locations[at * 2] = u;
        locations[at * 2 + 1] = v;
        weights[at] = all[i].weight;
        point_of[i] = at;
    }
    std::int64_t shapes[6], starts[3];
    for (int l = 0; l < 3; ++l) {
        shapes[2 * l] = levels[l].height;
        shapes[2 * l + 1] = levels[l].width;
        starts[l] = levels[l].start;
    }

    msda::ForwardArgs forward;
    forward.value = TensorView::contiguous(value, DType::f32, {1, length, kHeads, 1});
    forward.spatial_shapes = TensorView::contiguous(shapes, DType::i64, {3, 2});
    forward.level_start_index = TensorView::contiguous(starts, DType::i64, {3});
    forward.sampling_locations =
        TensorView::contiguous(locations.data(), DType::f32, {1, kQueries, kHeads, n_l, kPoints, 2});
    forward.attention_weights = TensorView::contiguous(weights.data(), DType::f32, {1, kQueries, kHeads, n_l, kPoints});
    forward.output = TensorView::contiguous(output.data(), DType::f32, {1, kQueries, kHeads});
    ASSERT_NO_THROW(msda::forward(forward));

    msda::BackwardArgs backward = backward_inputs(forward);
    backward.grad_output = TensorView::contiguous(grad_output.data(), DType::f32, {1, kQueries, kHeads});
    backward.grad_value = TensorView::contiguous(grad_value_memory.as<float>(), DType::f32, {1, length, kHeads, 1});
    backward.grad_sampling_locations = TensorView::contiguous(grad_locations.data(), DType::f32,
                                                              {1, kQueries, kHeads, n_l, kPoints, 2});
    backward.grad_attention_weights =
        TensorView::contiguous(grad_weights.data(), DType::f32, {1, kQueries, kHeads, n_l, kPoints});
    ASSERT_NO_THROW(msda::backward(backward));

    // The expected results, in double, from the samples' corners.
    std::vector<double> expected_output(output.size(), 0.0);
    std::map<std::int64_t, double> expected_grad_value;
    for (std::size_t i = 0; i < all.size(); ++i) {
        const Sample &s = all[i];
        const double g = grad_output[s.query * kHeads + s.head];
        double sampled = 0;
        for (const auto &[e, w] : corners(s)) {
            sampled += w * value_at(e);
            expected_grad_value[e] += g * s.weight * w;
        }
        expected_output[s.query * kHeads + s.head] += s.weight * sampled;
        EXPECT_EQ(grad_weights[point_of[i]], g * sampled) << "grad_attention_weights of sample " << i;
        // d/du of the bilinear sample, times W (and d/dv, times H): the
        // right column minus the left (the lower row minus the upper),
        // weighted by the other axis' fraction (0 at a pixel centre, 1/2
        // halfway).
        const Level &level = levels[s.level];
        // A corner outside the level reads 0 (padding zeros).
        auto v = [&](std::int64_t ox, std::int64_t oy) -> double {
            const std::int64_t x = s.x + ox, y = s.y + oy;
            return x < level.width && y < level.height ? value[element(s.level, x, y, s.head)] : 0.0;
        };
        const double wx = s.between ? 0.5 : 0.0, wy = wx;  // the corners' fractions
        const double dx = (1 - wy) * (v(1, 0) - v(0, 0)) + wy * (v(1, 1) - v(0, 1));
        const double dy = (1 - wx) * (v(0, 1) - v(0, 0)) + wx * (v(1, 1) - v(1, 0));
        EXPECT_EQ(grad_locations[point_of[i] * 2], g * s.weight * dx * level.width) << "x of sample " << i;
        EXPECT_EQ(grad_locations[point_of[i] * 2 + 1], g * s.weight * dy * level.height) << "y of sample " << i;
    }
    for (std::size_t i = 0; i < output.size(); ++i) EXPECT_EQ(output[i], expected_output[i]) << "output " << i;
    // grad_value: the expected sums where samples read, zero everywhere else
    // (all 2^31 + 2^21 elements read back).
    const float *grad_value = grad_value_memory.as<float>();
    for (const auto &[e, sum] : expected_grad_value) {
        EXPECT_GT(e, 0);
        EXPECT_EQ(grad_value[e], sum) << "grad_value element " << e;
    }
    std::int64_t unexpected = 0, first = -1;
    for (std::int64_t e = 0; e < elements; ++e) {
        if (grad_value[e] != 0.0f && expected_grad_value.count(e) == 0) {
            if (first < 0) first = e;
            ++unexpected;
        }
    }
    EXPECT_EQ(unexpected, 0) << "grad_value elements no sample reads are nonzero, the first " << first;
    EXPECT_GT(expected_grad_value.rbegin()->first, std::int64_t{1} << 31) << "the test reads past element 2^31";

    // The GPU families refuse the call by name, before reading anything.
    for (const msda::Device device : {msda::Device::opencl, msda::Device::cuda}) {
        const std::string unavailable = device == msda::Device::opencl ? msda::testing::opencl_unavailable()
                                                                       : msda::testing::cuda_unavailable();
        if (!unavailable.empty()) continue;  // nothing to refuse with
        msda::Options options;
        options.device = device;
        try {
            msda::forward(forward, options);
            ADD_FAILURE() << "a value past 2^31 elements ran on a GPU family";
        } catch (const msda::Error &e) {
            EXPECT_NE(std::string(e.what()).find("msda: value: spans 2149580800 elements"), std::string::npos)
                << e.what();
            EXPECT_NE(std::string(e.what()).find("32-bit integers"), std::string::npos) << e.what();
        }
    }
}

// 2^31 + 2^20 samples: 2^20 queries of one head and level, 2049 points
// each, on a 64 x 64 level, the points' locations and weights broadcast over
// the queries.
class ManySamples : public ::testing::Test {
protected:
    static constexpr std::int64_t kQueries = std::int64_t{1} << 20, kPoints = 2049, kSide = 64;
    static constexpr std::int64_t kSamples = kQueries * kPoints;
    static_assert(kSamples > (std::int64_t{1} << 31));

    std::vector<float> locations = std::vector<float>(kPoints * 2);
    std::int32_t shapes[2] = {kSide, kSide}, starts[1] = {0};

    // Point p on the centre of pixel (p % 64, p / 64): 2049 distinct pixels.
    ManySamples() {
        for (std::int64_t p = 0; p < kPoints; ++p) {
            locations[p * 2] = static_cast<float>((p % kSide + 0.5) / kSide);
            locations[p * 2 + 1] = static_cast<float>((p / kSide + 0.5) / kSide);
        }
    }
    static float value_at(std::int64_t row) { return static_cast<float>(row % 5) - 2.0f; }

    // (B, N_q, N_h, N_l, N_p[, 2]) views whose query stride is 0.
    TensorView broadcast_locations() {
        return TensorView::strided(locations.data(), DType::f32, {1, kQueries, 1, 1, kPoints, 2},
                                   {0, 0, 0, 0, 2, 1});
    }
    static TensorView broadcast_weights(void *data, DType dtype) {
        return TensorView::strided(data, dtype, {1, kQueries, 1, 1, kPoints}, {0, 0, 0, 0, 1});
    }
    msda::ForwardArgs args(void *value, void *weights, void *output, DType dtype) {
        msda::ForwardArgs a;
        a.value = TensorView::contiguous(value, dtype, {1, kSide * kSide, 1, 1});
        a.spatial_shapes = TensorView::contiguous(shapes, DType::i32, {1, 2});
        a.level_start_index = TensorView::contiguous(starts, DType::i32, {1});
        a.sampling_locations = broadcast_locations();
        a.attention_weights = broadcast_weights(weights, dtype);
        a.output = TensorView::contiguous(output, dtype, {1, kQueries, 1});
        return a;
    }
    // Each query's output: the sum of its points' pixels (weights 1).
    static double expected_output() {
        double sum = 0;
        for (std::int64_t p = 0; p < kPoints; ++p) sum += value_at(p);
        return sum;
    }
};

TEST_F(ManySamples, ForwardAndGradValueCountEverySample) {
    std::vector<float> value(kSide * kSide), weights(kPoints, 1.0f), output(kQueries, -1.0f);
    for (std::int64_t r = 0; r < kSide * kSide; ++r) value[r] = value_at(r);
    const msda::ForwardArgs forward = args(value.data(), weights.data(), output.data(), DType::f32);
    ASSERT_NO_THROW(msda::forward(forward));
    std::int64_t wrong = 0;
    for (float x : output) wrong += x != expected_output();
    EXPECT_EQ(wrong, 0) << "of " << kQueries << " outputs differ from " << expected_output() << ", e.g. "
                        << output[0] << ", " << output[kQueries - 1];

    // grad_value: every point's pixel gets grad_output * weight = 1 from
    // each of the 2^20 queries (an exact float32 sum), the other pixels 0.
    std::vector<float> grad_output(kQueries, 1.0f), grad_value(kSide * kSide, -1.0f);
    msda::BackwardArgs backward = backward_inputs(forward);
    backward.grad_output = TensorView::contiguous(grad_output.data(), DType::f32, {1, kQueries, 1});
    backward.grad_value = TensorView::contiguous(grad_value.data(), DType::f32, {1, kSide * kSide, 1, 1});
    msda::Options options;
    options.grad_sampling_locations = false;
    options.grad_attention_weights = false;
    ASSERT_NO_THROW(msda::backward(backward, options));
    for (std::int64_t r = 0; r < kSide * kSide; ++r) {
        EXPECT_EQ(grad_value[r], r < kPoints ? static_cast<float>(kQueries) : 0.0f) << "grad_value row " << r;
    }

    // The GPU families refuse the sample count by name.
    for (const msda::Device device : {msda::Device::opencl, msda::Device::cuda}) {
        const std::string unavailable = device == msda::Device::opencl ? msda::testing::opencl_unavailable()
                                                                       : msda::testing::cuda_unavailable();
        if (!unavailable.empty()) continue;
        msda::Options on_device;
        on_device.device = device;
        try {
            msda::forward(forward, on_device);
            ADD_FAILURE() << "2^31 + 2^20 samples ran on a GPU family";
        } catch (const msda::Error &e) {
            EXPECT_NE(std::string(e.what()).find("msda: sampling_locations: holds 2148532224 samples"),
                      std::string::npos)
                << e.what();
        }
    }
}

// grad_attention_weights of 2^31 + 2^20 elements, in float16 (4 GiB): each
// is grad_output (1) times its point's pixel, exactly.
TEST_F(ManySamples, AFloat16GradAttentionWeightsPast2To31Elements) {
    std::vector<std::uint16_t> value(kSide * kSide), weights(kPoints, msda::float_to_f16(1.0f));
    std::vector<std::uint16_t> grad_output(kQueries, msda::float_to_f16(1.0f));
    for (std::int64_t r = 0; r < kSide * kSide; ++r) value[r] = msda::float_to_f16(value_at(r));
    SparseMemory grad_weights_memory(kSamples * sizeof(std::uint16_t), true);
    ASSERT_NE(grad_weights_memory.as<std::uint16_t>(), nullptr) << "could not reserve the mapping";
    std::vector<std::uint16_t> output(kQueries);
    const msda::ForwardArgs forward = args(value.data(), weights.data(), output.data(), DType::f16);
    msda::BackwardArgs backward = backward_inputs(forward);
    backward.grad_output = TensorView::contiguous(grad_output.data(), DType::f16, {1, kQueries, 1});
    backward.grad_attention_weights = TensorView::contiguous(grad_weights_memory.as<std::uint16_t>(), DType::f16,
                                                             {1, kQueries, 1, 1, kPoints});
    msda::Options options;
    options.grad_value = false;
    options.grad_sampling_locations = false;
    ASSERT_NO_THROW(msda::backward(backward, options));
    std::uint16_t expected[kPoints];
    for (std::int64_t p = 0; p < kPoints; ++p) expected[p] = msda::float_to_f16(value_at(p));
    const std::uint16_t *grads = grad_weights_memory.as<std::uint16_t>();
    std::int64_t wrong = 0, first = -1;
    for (std::int64_t q = 0; q < kQueries; ++q) {
        if (std::memcmp(grads + q * kPoints, expected, sizeof expected) != 0) {
            if (first < 0) first = q;
            ++wrong;
        }
    }
    EXPECT_EQ(wrong, 0) << "queries' grad_attention_weights differ from their pixels, the first " << first;
}

// Relayout::always stages value head-major, except where a head's copy
// (L * C_h elements) would need a stride past 2^31 - 1, which a Halide
// buffer cannot hold: there the kernels read value as given and the
// workspace holds no copy (it held one, addressed through a truncated
// stride). Sizes only: nothing is allocated.
TEST(HugeWorkspace, NoHeadMajorCopyWhoseHeadStrideWouldPass2To31) {
    msda::ProblemSize size;
    size.batch = 1;
    size.value_length = (std::int64_t{1} << 30) + (1 << 20);
    size.heads = 2;
    size.levels = 1;
    size.queries = 1;
    size.points = 1;
    msda::Options options;
    options.relayout = msda::Relayout::always;
    options.grad_value = false;
    size.channels = 1;  // a head: 2^30 + 2^20 elements, staged
    EXPECT_GE(msda::Plan(size, options).workspace_size(), std::size_t(size.value_length * size.heads * 4));
    size.channels = 2;  // a head: 2^31 + 2^21 elements, not staged
    EXPECT_EQ(msda::Plan(size, options).workspace_size(), 0u);
}

}  // namespace
