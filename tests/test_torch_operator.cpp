// msda's LibTorch operators (libmsda_torch.so) against a float64 reference
// that autograd differentiates: Deformable DETR's grid_sample decomposition
// of MSDA, and a gather for GKA. Forward and gradients within the SPEC's
// tolerances, every subset of inputs requiring grad, layouts, strided and
// permuted inputs read in place, half precision, and errors.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <string>
#include <vector>

#include <msda/diagnostics.hpp>
#include <msda/torch.hpp>

namespace {

namespace F = torch::nn::functional;

struct Level {
    int64_t height, width;
};

struct Problem {
    std::vector<Level> levels = {{5, 7}, {3, 4}, {1, 2}};
    int64_t batch = 2, queries = 6, heads = 3, channels = 5, points = 2;
    int64_t length() const {
        int64_t total = 0;
        for (const Level &level : levels) total += level.height * level.width;
        return total;
    }
    int64_t level_count() const { return static_cast<int64_t>(levels.size()); }
};

struct Inputs {
    torch::Tensor value, spatial_shapes, level_start_index, sampling_locations, attention_weights, grad_output;
};

// Locations spread beyond [0, 1] so that samples leave the maps on every side.
Inputs make_inputs(const Problem &problem, uint64_t seed, torch::Dtype dtype = torch::kFloat32,
                   torch::Dtype locations_dtype = torch::kFloat32, double location_low = -0.15,
                   double location_high = 1.15) {
    torch::manual_seed(seed);
    Inputs inputs;
    std::vector<int64_t> shapes, starts;
    int64_t start = 0;
    for (const Level &level : problem.levels) {
        shapes.insert(shapes.end(), {level.height, level.width});
        starts.push_back(start);
        start += level.height * level.width;
    }
    inputs.spatial_shapes = torch::tensor(shapes, torch::kInt64).view({problem.level_count(), 2});
    inputs.level_start_index = torch::tensor(starts, torch::kInt64);
    inputs.value = torch::randn({problem.batch, problem.length(), problem.heads, problem.channels}).to(dtype);
    inputs.sampling_locations =
        (torch::rand({problem.batch, problem.queries, problem.heads, problem.level_count(), problem.points, 2}) *
             (location_high - location_low) +
         location_low)
            .to(locations_dtype);
    inputs.attention_weights =
        torch::rand({problem.batch, problem.queries, problem.heads, problem.level_count(), problem.points}).to(dtype);
    inputs.grad_output = torch::randn({problem.batch, problem.queries, problem.heads * problem.channels}).to(dtype);
    return inputs;
}

struct Results {
    torch::Tensor output, grad_value, grad_sampling_locations, grad_attention_weights;
};

torch::Tensor as_leaf(const torch::Tensor &tensor, bool requires_grad) {
    return tensor.detach().clone().requires_grad_(requires_grad);
}

// Deformable DETR's ms_deform_attn_core_pytorch in float64, on the stored
// inputs: per level, grid_sample at 2 * location - 1.
Results msda_reference(const Problem &problem, const Inputs &inputs, bool align_corners = false,
                       bool border = false) {
    const torch::Tensor value = as_leaf(inputs.value.to(torch::kFloat64), true);
    const torch::Tensor locations = as_leaf(inputs.sampling_locations.to(torch::kFloat64), true);
    const torch::Tensor weights = as_leaf(inputs.attention_weights.to(torch::kFloat64), true);
    const int64_t b = problem.batch, q = problem.queries, h = problem.heads, c = problem.channels;
    auto options = F::GridSampleFuncOptions().mode(torch::kBilinear).align_corners(align_corners);
    if (border) {
        options.padding_mode(torch::kBorder);
    } else {
        options.padding_mode(torch::kZeros);
    }
    std::vector<torch::Tensor> sampled;
    int64_t start = 0;
    for (int64_t l = 0; l < problem.level_count(); ++l) {
        const Level level = problem.levels[l];
        const torch::Tensor value_l = value.narrow(1, start, level.height * level.width)
                                          .permute({0, 2, 3, 1})
                                          .reshape({b * h, c, level.height, level.width});
        const torch::Tensor grid_l = (2 * locations.select(3, l) - 1).transpose(1, 2).reshape({b * h, q, -1, 2});
        sampled.push_back(F::grid_sample(value_l, grid_l, options));  // (B*N_h, C_h, N_q, N_p)
        start += level.height * level.width;
    }
    const torch::Tensor attention = weights.transpose(1, 2).reshape({b * h, 1, q, problem.level_count(), -1});
    const torch::Tensor output = (torch::stack(sampled, 3) * attention)
                                     .sum({3, 4})
                                     .view({b, h, c, q})
                                     .permute({0, 3, 1, 2})
                                     .reshape({b, q, h * c});
    output.backward(inputs.grad_output.to(torch::kFloat64));
    return {output.detach(), value.grad(), locations.grad(), weights.grad()};
}

// GKA in float64: each sample reads the row at the rounded, clamped pixel.
Results gka_reference(const Problem &problem, const Inputs &inputs, bool nearest) {
    const torch::Tensor value = as_leaf(inputs.value.to(torch::kFloat64), true);
    const torch::Tensor weights = as_leaf(inputs.attention_weights.to(torch::kFloat64), true);
    const torch::Tensor locations = inputs.sampling_locations.to(torch::kFloat64);
    const int64_t b = problem.batch, q = problem.queries, h = problem.heads, c = problem.channels;
    torch::Tensor output = torch::zeros({b, q, h, c}, torch::kFloat64);
    int64_t start = 0;
    for (int64_t l = 0; l < problem.level_count(); ++l) {
        const Level level = problem.levels[l];
        const torch::Tensor x = locations.select(3, l).select(-1, 0), y = locations.select(3, l).select(-1, 1);
        const auto pixel = [&](const torch::Tensor &coordinate, int64_t extent) {
            return (nearest ? coordinate.round() : coordinate.floor()).clamp(0, extent - 1).to(torch::kInt64);
        };
        const torch::Tensor rows = start + pixel(y, level.height) * level.width + pixel(x, level.width);  // (B,Q,H,P)
        // value (B, L, H, C) gathered at rows -> (B, Q, H, P, C)
        const torch::Tensor index = rows.permute({0, 1, 3, 2}).reshape({b, -1, h, 1}).expand({b, -1, h, c});
        const torch::Tensor gathered =
            value.gather(1, index).view({b, q, problem.points, h, c}).permute({0, 1, 3, 2, 4});
        output = output + (gathered * weights.select(3, l).unsqueeze(-1)).sum(3);
        start += level.height * level.width;
    }
    output = output.reshape({b, q, h * c});
    output.backward(inputs.grad_output.to(torch::kFloat64));
    return {output.detach(), value.grad(), torch::Tensor(), weights.grad()};
}

// The SPEC's tolerance: relative to the tensor's largest magnitude.
double tolerance_of(torch::Dtype dtype) {
    return dtype == torch::kFloat32 ? 1e-5 : dtype == torch::kFloat16 ? 5e-3 : 2e-2;
}

void expect_close(const torch::Tensor &actual, const torch::Tensor &expected, double tolerance, const std::string &what) {
    ASSERT_TRUE(actual.defined()) << what << " is undefined";
    ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
    const torch::Tensor a = actual.detach().to(torch::kFloat64), e = expected.to(torch::kFloat64);
    const double scale = std::max(e.abs().max().item<double>(), 1e-30);
    const double error = (a - e).abs().max().item<double>();
    EXPECT_LE(error, tolerance * scale) << what << ": largest error " << error << ", largest magnitude " << scale;
}

// The operator with the inputs marked as requires_grad says, and the
// gradients its backward gave.
Results run_msda(const Inputs &inputs, std::array<bool, 3> requires_grad = {true, true, true},
                 const std::string &value_layout = "BLNC", const std::string &locations_layout = "BQHLP2",
                 bool align_corners = false, const std::string &padding_mode = "zeros",
                 const std::string &target = "cpu") {
    const torch::Tensor value = as_leaf(inputs.value, requires_grad[0]);
    const torch::Tensor locations = as_leaf(inputs.sampling_locations, requires_grad[1]);
    const torch::Tensor weights = as_leaf(inputs.attention_weights, requires_grad[2]);
    const torch::Tensor output =
        msda_torch::ms_deform_attn(value, inputs.spatial_shapes, inputs.level_start_index, locations, weights,
                                   value_layout, locations_layout, align_corners, padding_mode, target);
    if (output.requires_grad()) output.backward(inputs.grad_output);
    return {output.detach(), value.grad(), locations.grad(), weights.grad()};
}

bool same_bits(const torch::Tensor &a, const torch::Tensor &b) {
    return a.defined() && b.defined() && a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
           torch::equal(a.contiguous().view(torch::kByte), b.contiguous().view(torch::kByte));
}

TEST(TorchOperator, ForwardAndGradientsMatchTheFloat64GridSamplePath) {
    const Problem problem;
    for (uint64_t seed : {1, 2, 3}) {
        const Inputs inputs = make_inputs(problem, seed);
        const Results expected = msda_reference(problem, inputs);
        const Results actual = run_msda(inputs);
        expect_close(actual.output, expected.output, 1e-5, "output");
        expect_close(actual.grad_value, expected.grad_value, 1e-5, "grad_value");
        expect_close(actual.grad_sampling_locations, expected.grad_sampling_locations, 1e-5, "grad_sampling_locations");
        expect_close(actual.grad_attention_weights, expected.grad_attention_weights, 1e-5, "grad_attention_weights");
    }
}

// target "opencl": msda's OpenCL code on the CPU tensors (copied to the
// device and back), forward and the autograd backward, against the same
// float64 path; GKA too. SKIPPED where no OpenCL device can run.
TEST(TorchOperator, TheOpenClTargetMatchesTheFloat64Paths) {
    bool built = false;
    for (const msda::CompiledVariant &variant : msda::compiled_variants()) built = built || variant.family == "opencl";
    if (!built) GTEST_SKIP() << "this build has no OpenCL code (MSDA_OPENCL=OFF)";
    const msda::OpenClReport report = msda::opencl_devices();
    if (report.devices.empty()) GTEST_SKIP() << "no OpenCL device: " << report.error;
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 7);
    for (bool border : {false, true}) {
        const Results expected = msda_reference(problem, inputs, border, border);
        const Results actual =
            run_msda(inputs, {true, true, true}, "BLNC", "BQHLP2", border, border ? "border" : "zeros", "opencl");
        expect_close(actual.output, expected.output, 1e-5, "output");
        expect_close(actual.grad_value, expected.grad_value, 1e-5, "grad_value");
        expect_close(actual.grad_sampling_locations, expected.grad_sampling_locations, 1e-5, "grad_sampling_locations");
        expect_close(actual.grad_attention_weights, expected.grad_attention_weights, 1e-5, "grad_attention_weights");
    }
    const Inputs pixels = make_inputs(problem, 8, torch::kFloat32, torch::kFloat32, -1.0, 8.0);
    const Results gka_expected = gka_reference(problem, pixels, false);
    const torch::Tensor value = as_leaf(pixels.value, true), weights = as_leaf(pixels.attention_weights, true);
    const torch::Tensor output = msda_torch::geometric_kernel_attention(
        value, pixels.spatial_shapes, pixels.level_start_index, pixels.sampling_locations, weights, "floor", "opencl");
    output.backward(pixels.grad_output);
    expect_close(output, gka_expected.output, 1e-5, "GKA output");
    expect_close(value.grad(), gka_expected.grad_value, 1e-5, "GKA grad_value");
    expect_close(weights.grad(), gka_expected.grad_attention_weights, 1e-5, "GKA grad_attention_weights");
    // Half precision is refused on OpenCL, with msda's message.
    const Inputs half = make_inputs(problem, 9, torch::kFloat16);
    try {
        msda_torch::ms_deform_attn(half.value, half.spatial_shapes, half.level_start_index, half.sampling_locations,
                                   half.attention_weights, "BLNC", "BQHLP2", false, "zeros", "opencl");
        ADD_FAILURE() << "float16 ran on OpenCL";
    } catch (const c10::Error &e) {
        EXPECT_NE(std::string(e.what()).find("the OpenCL code computes float32 storage"), std::string::npos) << e.what();
    }
}

TEST(TorchOperator, AlignCornersAndBorderPaddingMatchGridSample) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 4);
    for (bool align_corners : {false, true}) {
        for (bool border : {false, true}) {
            SCOPED_TRACE(std::string("align_corners ") + (align_corners ? "true" : "false") + ", padding " +
                         (border ? "border" : "zeros"));
            const Results expected = msda_reference(problem, inputs, align_corners, border);
            const Results actual = run_msda(inputs, {true, true, true}, "BLNC", "BQHLP2", align_corners,
                                            border ? "border" : "zeros");
            expect_close(actual.output, expected.output, 1e-5, "output");
            expect_close(actual.grad_value, expected.grad_value, 1e-5, "grad_value");
            expect_close(actual.grad_sampling_locations, expected.grad_sampling_locations, 1e-5,
                         "grad_sampling_locations");
            expect_close(actual.grad_attention_weights, expected.grad_attention_weights, 1e-5,
                         "grad_attention_weights");
        }
    }
}

// Only what requires grad gets a gradient, and each gradient has the same
// bits whichever others are computed beside it (the SPEC's determinism).
TEST(TorchOperator, EverySubsetOfInputsRequiringGrad) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 5);
    const Results all = run_msda(inputs);
    for (int mask = 0; mask < 8; ++mask) {
        const std::array<bool, 3> wanted = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
        SCOPED_TRACE("requires_grad (value, sampling_locations, attention_weights) = (" +
                     std::to_string(wanted[0]) + ", " + std::to_string(wanted[1]) + ", " + std::to_string(wanted[2]) +
                     ")");
        const Results some = run_msda(inputs, wanted);
        EXPECT_TRUE(same_bits(some.output, all.output));
        const torch::Tensor Results::*grads[3] = {&Results::grad_value, &Results::grad_sampling_locations,
                                                  &Results::grad_attention_weights};
        for (int i = 0; i < 3; ++i) {
            EXPECT_EQ((some.*grads[i]).defined(), wanted[i]) << "gradient " << i;
            if (wanted[i]) EXPECT_TRUE(same_bits(some.*grads[i], all.*grads[i])) << "gradient " << i;
        }
    }
}

TEST(TorchOperator, TheBackwardOperatorComputesOnlyTheMaskedGradients) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 6);
    const Results expected = msda_reference(problem, inputs);
    const auto [grad_value, grad_locations, grad_weights] = msda_torch::ms_deform_attn_backward(
        inputs.grad_output, inputs.value, inputs.spatial_shapes, inputs.level_start_index,
        inputs.sampling_locations, inputs.attention_weights, "BLNC", "BQHLP2", false, "zeros", {false, true, false});
    EXPECT_FALSE(grad_value.defined());
    EXPECT_FALSE(grad_weights.defined());
    expect_close(grad_locations, expected.grad_sampling_locations, 1e-5, "grad_sampling_locations");
}

// The other layouts are permutations of the canonical ones; gradients come
// back in the layout (and sizes) of their input.
TEST(TorchOperator, OtherLayoutsMatchTheCanonicalOnes) {
    const Problem problem;
    const Inputs canonical = make_inputs(problem, 7);
    const Results expected = msda_reference(problem, canonical);
    Inputs permuted = canonical;
    permuted.value = canonical.value.permute({0, 2, 1, 3}).contiguous();                        // BNLC
    permuted.sampling_locations = canonical.sampling_locations.permute({0, 5, 1, 2, 3, 4}).contiguous();  // B2QHLP
    const Results actual = run_msda(permuted, {true, true, true}, "BNLC", "B2QHLP");
    expect_close(actual.output, expected.output, 1e-5, "output");
    expect_close(actual.grad_value.permute({0, 2, 1, 3}), expected.grad_value, 1e-5, "grad_value");
    expect_close(actual.grad_sampling_locations.permute({0, 2, 3, 4, 5, 1}), expected.grad_sampling_locations, 1e-5,
                 "grad_sampling_locations");
    expect_close(actual.grad_attention_weights, expected.grad_attention_weights, 1e-5, "grad_attention_weights");
}

// Counts the CPU allocations torch makes (every CPU tensor's memory).
class CountingAllocator final : public c10::Allocator {
public:
    explicit CountingAllocator(c10::Allocator *base) : base_(base) {}
    c10::DataPtr allocate(size_t bytes) const override {
        ++count_;
        return base_->allocate(bytes);
    }
    c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }
    int count() const { return count_; }

private:
    c10::Allocator *base_;
    mutable std::atomic<int> count_{0};
};

CountingAllocator &counting_allocator() {
    static CountingAllocator *allocator = [] {
        auto *counting = new CountingAllocator(c10::GetCPUAllocator());
        c10::SetCPUAllocator(counting, /*priority=*/100);
        return counting;
    }();
    return *allocator;
}

// Strided and permuted tensors whose channels are contiguous are read where
// they lie: the only CPU allocation a forward makes is its output.
TEST(TorchOperator, StridedAndPermutedInputsAreReadInPlace) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 8);
    const Results expected = msda_reference(problem, inputs);
    // value stored head-major but passed as BLNC; locations a strided slice
    // of a larger tensor; weights stored (B, N_h, N_q, N_l, N_p).
    const torch::Tensor value = inputs.value.permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3});
    const torch::Tensor wide_locations = torch::zeros({problem.batch, problem.queries, problem.heads,
                                                       problem.level_count(), problem.points, 5});
    wide_locations.narrow(-1, 1, 2).copy_(inputs.sampling_locations);
    const torch::Tensor locations = wide_locations.narrow(-1, 1, 2);
    const torch::Tensor weights = inputs.attention_weights.transpose(1, 2).contiguous().transpose(1, 2);
    ASSERT_FALSE(value.is_contiguous());
    ASSERT_FALSE(locations.is_contiguous());
    ASSERT_FALSE(weights.is_contiguous());
    for (const auto &[tensor, name] : {std::pair{value, "value"}, std::pair{locations, "sampling_locations"},
                                       std::pair{weights, "attention_weights"}}) {
        const msda::TensorView view = msda_torch::tensor_view(tensor, name);
        EXPECT_EQ(view.data, tensor.data_ptr()) << name;
        for (int d = 0; d < view.rank; ++d) EXPECT_EQ(view.strides[d], tensor.stride(d)) << name << " dim " << d;
    }

    CountingAllocator &allocator = counting_allocator();
    const int before = allocator.count();
    const torch::Tensor output = msda_torch::ms_deform_attn(value, inputs.spatial_shapes, inputs.level_start_index,
                                                            locations, weights);
    EXPECT_EQ(allocator.count() - before, 1) << "a forward on strided inputs allocated more than its output";
    expect_close(output, expected.output, 1e-5, "output");

    const int before_backward = allocator.count();
    const auto grads = msda_torch::ms_deform_attn_backward(inputs.grad_output, value, inputs.spatial_shapes,
                                                           inputs.level_start_index, locations, weights);
    EXPECT_EQ(allocator.count() - before_backward, 3) << "a backward allocated more than its three gradients";
    expect_close(std::get<0>(grads), expected.grad_value, 1e-5, "grad_value");
    expect_close(std::get<1>(grads), expected.grad_sampling_locations, 1e-5, "grad_sampling_locations");
    expect_close(std::get<2>(grads), expected.grad_attention_weights, 1e-5, "grad_attention_weights");
}

// What msda cannot read in place (value's channels not contiguous, a
// grad_output broadcast from a sum) is copied, and computes the same.
TEST(TorchOperator, ChannelStridedValueAndBroadcastGradOutput) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 9);
    const torch::Tensor value = as_leaf(inputs.value.transpose(2, 3).contiguous(), true);
    const torch::Tensor value_blnc = value.transpose(2, 3);
    ASSERT_NE(value_blnc.stride(3), 1);
    const torch::Tensor output = msda_torch::ms_deform_attn(value_blnc, inputs.spatial_shapes, inputs.level_start_index,
                                                            inputs.sampling_locations, inputs.attention_weights);
    output.sum().backward();  // grad_output is all ones with stride 0
    Inputs ones = inputs;
    ones.grad_output = torch::ones_like(inputs.grad_output);
    const Results expected = msda_reference(problem, ones);
    expect_close(output, expected.output, 1e-5, "output");
    expect_close(value.grad().transpose(2, 3), expected.grad_value, 1e-5, "grad_value");
}

TEST(TorchOperator, HalfPrecisionWithinTheSpecsTolerances) {
    const Problem problem;
    for (torch::Dtype dtype : {torch::kFloat16, torch::kBFloat16}) {
        for (torch::Dtype locations_dtype : {dtype, torch::kFloat32}) {
            SCOPED_TRACE(std::string(c10::toString(dtype)) + " storage, " + c10::toString(locations_dtype) +
                         " locations");
            const Inputs inputs = make_inputs(problem, 10, dtype, locations_dtype);
            const Results expected = msda_reference(problem, inputs);
            const Results actual = run_msda(inputs);
            const double tolerance = tolerance_of(dtype);
            EXPECT_EQ(actual.output.scalar_type(), dtype);
            EXPECT_EQ(actual.grad_value.scalar_type(), dtype);
            EXPECT_EQ(actual.grad_sampling_locations.scalar_type(), locations_dtype);
            EXPECT_EQ(actual.grad_attention_weights.scalar_type(), dtype);
            expect_close(actual.output, expected.output, tolerance, "output");
            expect_close(actual.grad_value, expected.grad_value, tolerance, "grad_value");
            expect_close(actual.grad_sampling_locations, expected.grad_sampling_locations,
                         tolerance_of(locations_dtype == torch::kFloat32 ? dtype : locations_dtype),
                         "grad_sampling_locations");
            expect_close(actual.grad_attention_weights, expected.grad_attention_weights, tolerance,
                         "grad_attention_weights");
        }
    }
}

TEST(TorchOperator, GeometricKernelAttentionMatchesTheFloat64Gather) {
    Problem problem;
    for (bool nearest : {false, true}) {
        SCOPED_TRACE(nearest ? "rounding nearest" : "rounding floor");
        Inputs inputs = make_inputs(problem, 11, torch::kFloat32, torch::kFloat32, -2.0, 9.0);
        const Results expected = gka_reference(problem, inputs, nearest);
        const torch::Tensor value = as_leaf(inputs.value, true);
        const torch::Tensor locations = as_leaf(inputs.sampling_locations, true);
        const torch::Tensor weights = as_leaf(inputs.attention_weights, true);
        const torch::Tensor output = msda_torch::geometric_kernel_attention(
            value, inputs.spatial_shapes, inputs.level_start_index, locations, weights, nearest ? "nearest" : "floor");
        output.backward(inputs.grad_output);
        expect_close(output, expected.output, 1e-5, "output");
        expect_close(value.grad(), expected.grad_value, 1e-5, "grad_value");
        expect_close(weights.grad(), expected.grad_attention_weights, 1e-5, "grad_attention_weights");
        EXPECT_FALSE(locations.grad().defined()) << "GKA has no location gradient";
    }
}

std::string message_of(const c10::Error &error) { return error.what_without_backtrace(); }
std::string message_of(const std::exception &error) { return error.what(); }

template <class Exception, class Call>
void expect_error(Call &&call, const std::string &expected_text) {
    try {
        call();
        ADD_FAILURE() << "no error; expected one saying \"" << expected_text << "\"";
    } catch (const Exception &error) {
        const std::string message = message_of(error);
        EXPECT_NE(message.find(expected_text), std::string::npos) << message;
    } catch (const std::exception &error) {
        ADD_FAILURE() << "an error of another type: " << error.what();
    }
}

TEST(TorchOperator, ErrorsAreTorchErrorsCarryingMsdasMessage) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 12);
    const auto call = [&](const torch::Tensor &value, const torch::Tensor &locations, const torch::Tensor &weights,
                          const std::string &value_layout = "BLNC") {
        return msda_torch::ms_deform_attn(value, inputs.spatial_shapes, inputs.level_start_index, locations, weights,
                                          value_layout);
    };
    expect_error<c10::TypeError>([&] { call(inputs.value.to(torch::kFloat64), inputs.sampling_locations, inputs.attention_weights); },
                                 "msda: attention_weights: expected dtype");
    expect_error<c10::TypeError>([&] { call(inputs.value.to(torch::kInt32), inputs.sampling_locations, inputs.attention_weights); },
                                 "value is Int");
    expect_error<c10::TypeError>([&] { call(inputs.value, inputs.sampling_locations.to(torch::kFloat64), inputs.attention_weights); },
                                 "msda: sampling_locations: expected dtype float32 or the dtype of value (float32), got float64");
    expect_error<c10::ValueError>([&] { call(inputs.value, inputs.sampling_locations, inputs.attention_weights, "NLBC"); },
                                  "value_layout must be \"BLNC\" or \"BNLC\", got \"NLBC\"");
    expect_error<c10::ValueError>([&] { call(inputs.value, inputs.sampling_locations, inputs.attention_weights.narrow(1, 0, 2)); },
                             "msda: attention_weights and sampling_locations: disagree on N_q");
    expect_error<c10::TypeError>([&] { call(inputs.value, inputs.sampling_locations, inputs.attention_weights.to(torch::kFloat16)); },
                             "msda: attention_weights");
    expect_error<c10::ValueError>(
        [&] {
            msda_torch::ms_deform_attn(inputs.value, inputs.spatial_shapes, inputs.level_start_index + 1,
                                       inputs.sampling_locations, inputs.attention_weights);
        },
        "msda: level_start_index");
    expect_error<c10::ValueError>(
        [&] {
            msda_torch::geometric_kernel_attention(inputs.value, inputs.spatial_shapes, inputs.level_start_index,
                                                   inputs.sampling_locations, inputs.attention_weights, "up");
        },
        "rounding must be \"floor\" or \"nearest\", got \"up\"");
    expect_error<c10::ValueError>(
        [&] {
            msda_torch::ms_deform_attn(inputs.value, inputs.spatial_shapes, inputs.level_start_index,
                                       inputs.sampling_locations, inputs.attention_weights, "BLNC", "BQHLP2", false,
                                       "zeros", "gpu");
        },
        "target must be \"cpu\", \"opencl\" or \"cuda\", got \"gpu\"");
    // Meta tensors get the output's sizes and dtype (the Meta kernel), and
    // the checks that need no data.
    const torch::Tensor meta = call(inputs.value.to(torch::kMeta), inputs.sampling_locations.to(torch::kMeta),
                                    inputs.attention_weights.to(torch::kMeta));
    EXPECT_TRUE(meta.is_meta());
    EXPECT_EQ(meta.sizes(), (std::vector<int64_t>{problem.batch, problem.queries, problem.heads * problem.channels}));
    expect_error<c10::TypeError>([&] { call(inputs.value.to(torch::kMeta), inputs.sampling_locations.to(torch::kMeta),
                                            inputs.attention_weights.to(torch::kMeta).to(torch::kFloat16)); },
                                 "msda: attention_weights");
}

TEST(TorchOperator, DoubleBackwardFailsWithAMessage) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 13);
    const torch::Tensor value = as_leaf(inputs.value, true);
    const torch::Tensor output = msda_torch::ms_deform_attn(value, inputs.spatial_shapes, inputs.level_start_index,
                                                            inputs.sampling_locations, inputs.attention_weights);
    const torch::Tensor grad_output = as_leaf(inputs.grad_output, true);
    const auto grads = torch::autograd::grad({output}, {value}, {grad_output}, /*retain_graph=*/true,
                                             /*create_graph=*/true);
    ASSERT_TRUE(grads[0].requires_grad());
    // The autograd engine reports the node's failure as a std::runtime_error.
    expect_error<std::runtime_error>([&] { grads[0].sum().backward(); },
                                     "msda::ms_deform_attn: msda's backward is not differentiable");
}

TEST(TorchOperator, RunsOnTorchsThreadCount) {
    const Problem problem;
    const Inputs inputs = make_inputs(problem, 14);
    const int before = torch::get_num_threads();
    for (int threads : {1, 2}) {
        torch::set_num_threads(threads);
        msda_torch::ms_deform_attn(inputs.value, inputs.spatial_shapes, inputs.level_start_index,
                                   inputs.sampling_locations, inputs.attention_weights);
        EXPECT_EQ(msda::num_threads(), threads);
    }
    torch::set_num_threads(before);
}

}  // namespace
