// The C interface (msda.h): the same results as the C++ API bit for bit, the
// same validation reported as a status of its kind (MSDA_ERROR_VALUE, MSDA_ERROR_TYPE) with a per-thread message, and plans
// behind an opaque handle.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "c_api_views.h"
#include "msda/msda.h"
#include "msda/msda.hpp"

namespace {

using ::testing::HasSubstr;
using msda::testing::to_c;

msda_options to_c(const msda::Options &options) {
    msda_options result = msda_default_options();  // the fields not set here
    result.op = static_cast<msda_operator>(options.op);
    result.rounding = static_cast<msda_rounding>(options.rounding);
    result.value_layout = static_cast<msda_value_layout>(options.value_layout);
    result.locations_layout = static_cast<msda_locations_layout>(options.locations_layout);
    result.align_corners = options.align_corners;
    result.padding_mode = static_cast<msda_padding_mode>(options.padding_mode);
    result.grad_value = options.grad_value;
    result.grad_sampling_locations = options.grad_sampling_locations;
    result.grad_attention_weights = options.grad_attention_weights;
    result.relayout = static_cast<msda_relayout>(options.relayout);
    result.sample_order = static_cast<msda_sample_order>(options.sample_order);
    return result;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    // (memcmp's pointers must not be null, even for no bytes: an empty
    // vector's data() may be.)
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Buffers start out holding this, so a call that writes nothing is noticed.
constexpr float kUnwritten = -123.0f;

bool written(const std::vector<float> &values) {
    for (float value : values) {
        if (value != kUnwritten) return true;
    }
    return false;
}

// Two levels (3x4 and 2x2), f32 storage, canonical layouts. Some locations
// fall outside the levels so that padding matters.
struct Problem {
    static constexpr std::int64_t batch = 2, queries = 5, heads = 2, channels = 3, points = 2;
    static constexpr std::int64_t levels = 2, value_length = 3 * 4 + 2 * 2;

    std::vector<float> value, sampling_locations, attention_weights, grad_output;
    std::vector<std::int64_t> spatial_shapes{3, 4, 2, 2};
    std::vector<std::int64_t> level_start_index{0, 12};

    Problem() {
        std::mt19937 random(20240611);
        std::uniform_real_distribution<float> values(-1.0f, 1.0f);
        std::uniform_real_distribution<float> locations(-0.1f, 1.1f);
        value.resize(batch * value_length * heads * channels);
        sampling_locations.resize(batch * queries * heads * levels * points * 2);
        attention_weights.resize(batch * queries * heads * levels * points);
        grad_output.resize(batch * queries * heads * channels);
        for (float &x : value) x = values(random);
        for (float &x : sampling_locations) x = locations(random);
        for (float &x : attention_weights) x = values(random);
        for (float &x : grad_output) x = values(random);
    }

    msda::TensorView value_view() const {
        return msda::TensorView::contiguous(value.data(), msda::DType::f32,
                                            {batch, value_length, heads, channels});
    }
    msda::TensorView locations_view() const {
        return msda::TensorView::contiguous(sampling_locations.data(), msda::DType::f32,
                                            {batch, queries, heads, levels, points, 2});
    }
    msda::TensorView spatial_shapes_view() const {
        return msda::TensorView::contiguous(spatial_shapes.data(), msda::DType::i64, {levels, 2});
    }
    msda::TensorView level_start_index_view() const {
        return msda::TensorView::contiguous(level_start_index.data(), msda::DType::i64, {levels});
    }
    msda::TensorView weights_view() const {
        return msda::TensorView::contiguous(attention_weights.data(), msda::DType::f32,
                                            {batch, queries, heads, levels, points});
    }

    msda::ForwardArgs forward_args(std::vector<float> &output) const {
        output.assign(batch * queries * heads * channels, kUnwritten);
        msda::ForwardArgs args;
        args.value = value_view();
        args.spatial_shapes = spatial_shapes_view();
        args.level_start_index = level_start_index_view();
        args.sampling_locations = locations_view();
        args.attention_weights = weights_view();
        args.output = msda::TensorView::contiguous(output.data(), msda::DType::f32,
                                                   {batch, queries, heads * channels});
        return args;
    }

    struct Gradients {
        std::vector<float> value, sampling_locations, attention_weights;
    };

    // Gradients not asked for by `options` stay absent.
    msda::BackwardArgs backward_args(Gradients &grads, const msda::Options &options) const {
        msda::BackwardArgs args;
        args.value = value_view();
        args.spatial_shapes = spatial_shapes_view();
        args.level_start_index = level_start_index_view();
        args.sampling_locations = locations_view();
        args.attention_weights = weights_view();
        args.grad_output = msda::TensorView::contiguous(grad_output.data(), msda::DType::f32,
                                                        {batch, queries, heads * channels});
        if (options.grad_value) {
            grads.value.assign(value.size(), kUnwritten);
            args.grad_value = msda::TensorView::contiguous(
                grads.value.data(), msda::DType::f32, {batch, value_length, heads, channels});
        }
        if (options.grad_sampling_locations) {
            grads.sampling_locations.assign(sampling_locations.size(), kUnwritten);
            args.grad_sampling_locations = msda::TensorView::contiguous(
                grads.sampling_locations.data(), msda::DType::f32,
                {batch, queries, heads, levels, points, 2});
        }
        if (options.grad_attention_weights) {
            grads.attention_weights.assign(attention_weights.size(), kUnwritten);
            args.grad_attention_weights = msda::TensorView::contiguous(
                grads.attention_weights.data(), msda::DType::f32,
                {batch, queries, heads, levels, points});
        }
        return args;
    }

    static msda_problem_size c_size() {
        msda_problem_size size;
        size.batch = batch;
        size.value_length = value_length;
        size.heads = heads;
        size.channels = channels;
        size.levels = levels;
        size.queries = queries;
        size.points = points;
        size.dtype = MSDA_F32;
        size.locations_dtype = MSDA_F32;
        return size;
    }
};

std::vector<msda::Options> option_cases() {
    std::vector<msda::Options> cases(3);
    cases[1].align_corners = true;
    cases[2].padding_mode = msda::PaddingMode::border;
    cases[2].grad_sampling_locations = false;
    cases[2].relayout = msda::Relayout::always;
    return cases;
}

TEST(CApi, DefaultOptionsAreThoseOfTheCppApi) {
    const msda_options c_defaults = msda_default_options();
    const msda_options cpp_defaults = to_c(msda::Options{});
    EXPECT_EQ(c_defaults.op, cpp_defaults.op);
    EXPECT_EQ(c_defaults.rounding, cpp_defaults.rounding);
    EXPECT_EQ(c_defaults.value_layout, cpp_defaults.value_layout);
    EXPECT_EQ(c_defaults.locations_layout, cpp_defaults.locations_layout);
    EXPECT_EQ(c_defaults.align_corners, cpp_defaults.align_corners);
    EXPECT_EQ(c_defaults.padding_mode, cpp_defaults.padding_mode);
    EXPECT_EQ(c_defaults.grad_value, 1);
    EXPECT_EQ(c_defaults.grad_sampling_locations, 1);
    EXPECT_EQ(c_defaults.grad_attention_weights, 1);
    EXPECT_EQ(c_defaults.relayout, cpp_defaults.relayout);
    EXPECT_EQ(c_defaults.relayout, MSDA_RELAYOUT_AUTOMATIC);
    EXPECT_EQ(c_defaults.sample_order, cpp_defaults.sample_order);
    EXPECT_EQ(c_defaults.sample_order, MSDA_SAMPLE_ORDER_AUTOMATIC);
}

TEST(CApi, ContiguousGivesRowMajorStrides) {
    float data[2 * 3 * 4] = {};
    const std::int64_t shape[3] = {2, 3, 4};
    const msda_tensor tensor = msda_contiguous(data, MSDA_F16, 3, shape);
    const msda::TensorView view = msda::TensorView::contiguous(data, msda::DType::f16, {2, 3, 4});
    EXPECT_EQ(tensor.data, static_cast<void *>(data));
    EXPECT_EQ(tensor.dtype, MSDA_F16);
    EXPECT_EQ(tensor.rank, 3);
    for (int axis = 0; axis < 3; ++axis) {
        EXPECT_EQ(tensor.shape[axis], shape[axis]) << "axis " << axis;
        EXPECT_EQ(tensor.strides[axis], view.strides[axis]) << "axis " << axis;
    }
    EXPECT_EQ(tensor.strides[0], 12);
    EXPECT_EQ(tensor.strides[1], 4);
    EXPECT_EQ(tensor.strides[2], 1);
}

TEST(CApi, ForwardEqualsTheCppApiBitForBit) {
    const Problem problem;
    for (const msda::Options &options : option_cases()) {
        std::vector<float> cpp_output, c_output;
        msda::forward(problem.forward_args(cpp_output), options);
        const msda_forward_args args = to_c(problem.forward_args(c_output));
        const msda_options c_options = to_c(options);
        ASSERT_EQ(msda_forward(&args, &c_options), MSDA_OK) << msda_last_error();
        EXPECT_STREQ(msda_last_error(), "");
        EXPECT_TRUE(written(c_output));
        EXPECT_TRUE(same_bits(c_output, cpp_output))
            << "align_corners " << options.align_corners << ", padding "
            << static_cast<int>(options.padding_mode);
    }
}

TEST(CApi, OptionsReachTheComputation) {
    const Problem problem;
    std::vector<float> default_output, aligned_output;
    const msda_forward_args default_args = to_c(problem.forward_args(default_output));
    const msda_forward_args aligned_args = to_c(problem.forward_args(aligned_output));
    msda_options options = msda_default_options();
    ASSERT_EQ(msda_forward(&default_args, &options), MSDA_OK) << msda_last_error();
    options.align_corners = 1;
    ASSERT_EQ(msda_forward(&aligned_args, &options), MSDA_OK) << msda_last_error();
    EXPECT_FALSE(same_bits(default_output, aligned_output));
}

TEST(CApi, BackwardEqualsTheCppApiBitForBit) {
    const Problem problem;
    for (const msda::Options &options : option_cases()) {
        Problem::Gradients cpp_grads, c_grads;
        msda::backward(problem.backward_args(cpp_grads, options), options);
        const msda_backward_args args = to_c(problem.backward_args(c_grads, options));
        const msda_options c_options = to_c(options);
        ASSERT_EQ(msda_backward(&args, &c_options), MSDA_OK) << msda_last_error();
        EXPECT_STREQ(msda_last_error(), "");
        EXPECT_TRUE(written(c_grads.value));
        EXPECT_TRUE(written(c_grads.attention_weights));
        EXPECT_EQ(written(c_grads.sampling_locations), options.grad_sampling_locations);
        EXPECT_TRUE(same_bits(c_grads.value, cpp_grads.value));
        EXPECT_TRUE(same_bits(c_grads.sampling_locations, cpp_grads.sampling_locations));
        EXPECT_TRUE(same_bits(c_grads.attention_weights, cpp_grads.attention_weights));
    }
}

TEST(CApi, ForwardErrorNamesTheTensorAndLeavesTheOutputAlone) {
    const Problem problem;
    std::vector<float> output;
    msda_forward_args args = to_c(problem.forward_args(output));
    args.sampling_locations.shape[3] = 3;  // N_l = 3 against two levels
    const std::vector<float> before = output;
    const msda_options options = msda_default_options();
    EXPECT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("sampling_locations"));
    EXPECT_TRUE(same_bits(output, before));
}

TEST(CApi, BackwardErrorNamesTheTensorAndLeavesTheGradientsAlone) {
    const Problem problem;
    const msda::Options defaults;
    Problem::Gradients grads;
    msda_backward_args args = to_c(problem.backward_args(grads, defaults));
    args.grad_value.dtype = MSDA_F64;
    const Problem::Gradients before = grads;
    const msda_options options = msda_default_options();
    EXPECT_EQ(msda_backward(&args, &options), MSDA_ERROR_TYPE);
    EXPECT_THAT(msda_last_error(), HasSubstr("grad_value"));
    EXPECT_TRUE(same_bits(grads.value, before.value));
    EXPECT_TRUE(same_bits(grads.sampling_locations, before.sampling_locations));
    EXPECT_TRUE(same_bits(grads.attention_weights, before.attention_weights));
}

TEST(CApi, SuccessClearsTheLastError) {
    const Problem problem;
    std::vector<float> output;
    msda_forward_args args = to_c(problem.forward_args(output));
    const msda_options options = msda_default_options();
    args.attention_weights.rank = 4;
    ASSERT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("attention_weights"));
    args.attention_weights.rank = 5;
    ASSERT_EQ(msda_forward(&args, &options), MSDA_OK) << msda_last_error();
    EXPECT_STREQ(msda_last_error(), "");
}

TEST(CApi, CodesOutsideTheEnumsAreErrors) {
    const Problem problem;
    std::vector<float> output;
    const msda_options defaults = msda_default_options();

    msda_forward_args args = to_c(problem.forward_args(output));
    args.attention_weights.dtype = static_cast<msda_dtype>(42);
    EXPECT_EQ(msda_forward(&args, &defaults), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("attention_weights"));

    args = to_c(problem.forward_args(output));
    msda_options options = defaults;
    options.value_layout = static_cast<msda_value_layout>(7);
    EXPECT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("value_layout"));

    options = defaults;
    options.padding_mode = static_cast<msda_padding_mode>(-1);
    EXPECT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("padding_mode"));

    options = defaults;
    options.relayout = static_cast<msda_relayout>(3);
    EXPECT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("relayout"));
}

TEST(CApi, TheLastErrorBelongsToItsThread) {
    const Problem problem;
    std::vector<float> output;
    msda_forward_args bad = to_c(problem.forward_args(output));
    bad.value.rank = 3;
    const msda_options options = msda_default_options();
    ASSERT_EQ(msda_forward(&bad, &options), MSDA_ERROR_VALUE);
    const std::string main_message = msda_last_error();
    ASSERT_THAT(main_message, HasSubstr("value"));

    std::string other_before, other_after_error, other_after_success;
    std::thread other([&] {
        other_before = msda_last_error();
        msda_forward(nullptr, &options);
        other_after_error = msda_last_error();
        std::vector<float> other_output;
        const msda_forward_args good = to_c(problem.forward_args(other_output));
        msda_forward(&good, &options);
        other_after_success = msda_last_error();
    });
    other.join();

    EXPECT_EQ(other_before, "");
    EXPECT_THAT(other_after_error, HasSubstr("args"));
    EXPECT_EQ(other_after_success, "");
    EXPECT_EQ(std::string(msda_last_error()), main_message);
}

TEST(CApi, PlanRunsLikeTheOneShotCalls) {
    const Problem problem;
    const msda_problem_size size = Problem::c_size();
    const msda_options options = msda_default_options();
    msda_plan *plan = nullptr;
    ASSERT_EQ(msda_plan_create(&size, &options, &plan), MSDA_OK) << msda_last_error();
    ASSERT_NE(plan, nullptr);

    std::vector<float> one_shot_output;
    const msda::ForwardArgs cpp_forward = problem.forward_args(one_shot_output);
    const msda::Plan cpp_plan(msda::ProblemSize::of(cpp_forward), msda::Options{});
    const std::size_t workspace_bytes = msda_plan_workspace_size(plan);
    EXPECT_STREQ(msda_last_error(), "");
    EXPECT_EQ(workspace_bytes, cpp_plan.workspace_size());
    std::vector<unsigned char> workspace(workspace_bytes);
    void *workspace_data = workspace_bytes == 0 ? nullptr : workspace.data();

    msda::forward(cpp_forward, msda::Options{});
    std::vector<float> plan_output;
    const msda_forward_args forward_args = to_c(problem.forward_args(plan_output));
    ASSERT_EQ(msda_plan_forward(plan, &forward_args, workspace_data, workspace_bytes), MSDA_OK)
        << msda_last_error();
    EXPECT_TRUE(same_bits(plan_output, one_shot_output));

    const msda::Options all_gradients;
    Problem::Gradients one_shot_grads, plan_grads;
    msda::backward(problem.backward_args(one_shot_grads, all_gradients), all_gradients);
    const msda_backward_args backward_args = to_c(problem.backward_args(plan_grads, all_gradients));
    ASSERT_EQ(msda_plan_backward(plan, &backward_args, workspace_data, workspace_bytes), MSDA_OK)
        << msda_last_error();
    EXPECT_TRUE(same_bits(plan_grads.value, one_shot_grads.value));
    EXPECT_TRUE(same_bits(plan_grads.sampling_locations, one_shot_grads.sampling_locations));
    EXPECT_TRUE(same_bits(plan_grads.attention_weights, one_shot_grads.attention_weights));

    msda_plan_destroy(plan);
}

TEST(CApi, APlanRejectsTensorsOfOtherSizes) {
    msda_problem_size size = Problem::c_size();
    size.queries = Problem::queries + 1;
    const msda_options options = msda_default_options();
    msda_plan *plan = nullptr;
    ASSERT_EQ(msda_plan_create(&size, &options, &plan), MSDA_OK) << msda_last_error();

    const Problem problem;
    std::vector<float> output;
    const msda_forward_args args = to_c(problem.forward_args(output));
    const std::vector<float> before = output;
    std::vector<unsigned char> workspace(msda_plan_workspace_size(plan));
    EXPECT_EQ(msda_plan_forward(plan, &args, workspace.empty() ? nullptr : workspace.data(),
                                workspace.size()),
              MSDA_ERROR_VALUE);
    EXPECT_STRNE(msda_last_error(), "");
    EXPECT_TRUE(same_bits(output, before));
    msda_plan_destroy(plan);
}

TEST(CApi, AFailedPlanCreateGivesNoPlan) {
    const msda_options options = msda_default_options();
    msda_plan *plan = reinterpret_cast<msda_plan *>(&plan);  // not null before the call

    msda_problem_size size = Problem::c_size();
    size.dtype = static_cast<msda_dtype>(99);
    EXPECT_EQ(msda_plan_create(&size, &options, &plan), MSDA_ERROR_VALUE);
    EXPECT_EQ(plan, nullptr);
    EXPECT_THAT(msda_last_error(), HasSubstr("dtype"));

    size = Problem::c_size();
    size.heads = 0;
    plan = reinterpret_cast<msda_plan *>(&plan);
    EXPECT_EQ(msda_plan_create(&size, &options, &plan), MSDA_ERROR_VALUE);
    EXPECT_EQ(plan, nullptr);
    EXPECT_STRNE(msda_last_error(), "");
}

TEST(CApi, NullPointersAreReportedByName) {
    const Problem problem;
    std::vector<float> output;
    const msda_forward_args forward_args = to_c(problem.forward_args(output));
    const msda::Options defaults;
    Problem::Gradients grads;
    const msda_backward_args backward_args = to_c(problem.backward_args(grads, defaults));
    const msda_options options = msda_default_options();
    const msda_problem_size size = Problem::c_size();

    EXPECT_EQ(msda_forward(nullptr, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("args"));
    EXPECT_EQ(msda_forward(&forward_args, nullptr), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("options"));
    EXPECT_EQ(msda_backward(nullptr, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("args"));
    EXPECT_EQ(msda_backward(&backward_args, nullptr), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("options"));

    msda_plan *plan = nullptr;
    EXPECT_EQ(msda_plan_create(nullptr, &options, &plan), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("size"));
    EXPECT_EQ(msda_plan_create(&size, nullptr, &plan), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("options"));
    EXPECT_EQ(msda_plan_create(&size, &options, nullptr), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("plan"));
    EXPECT_EQ(plan, nullptr);

    EXPECT_EQ(msda_plan_forward(nullptr, &forward_args, nullptr, 0), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("plan"));
    EXPECT_EQ(msda_plan_backward(nullptr, &backward_args, nullptr, 0), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("plan"));
    EXPECT_EQ(msda_plan_workspace_size(nullptr), 0u);
    EXPECT_THAT(msda_last_error(), HasSubstr("plan"));
    msda_plan_destroy(nullptr);

    ASSERT_EQ(msda_plan_create(&size, &options, &plan), MSDA_OK) << msda_last_error();
    EXPECT_EQ(msda_plan_forward(plan, nullptr, nullptr, 0), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("args"));
    EXPECT_EQ(msda_plan_backward(plan, nullptr, nullptr, 0), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("args"));
    msda_plan_destroy(plan);

    // A present tensor without data is named too.
    msda_forward_args no_value = forward_args;
    no_value.value.data = nullptr;
    EXPECT_EQ(msda_forward(&no_value, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("value"));
}

TEST(CApi, ThreadCountDoesNotChangeResults) {
    // The backward is the operator whose accumulation could depend on it.
    const Problem problem;
    const msda::Options all_gradients;
    Problem::Gradients many_threads, one_thread;
    const msda_backward_args many_args = to_c(problem.backward_args(many_threads, all_gradients));
    const msda_backward_args one_args = to_c(problem.backward_args(one_thread, all_gradients));
    const msda_options options = msda_default_options();
    ASSERT_EQ(msda_backward(&many_args, &options), MSDA_OK) << msda_last_error();
    msda_set_num_threads(1);
    EXPECT_STREQ(msda_last_error(), "");
    ASSERT_EQ(msda_backward(&one_args, &options), MSDA_OK) << msda_last_error();
    msda_set_num_threads(0);
    EXPECT_TRUE(same_bits(one_thread.value, many_threads.value));
    EXPECT_TRUE(same_bits(one_thread.sampling_locations, many_threads.sampling_locations));
    EXPECT_TRUE(same_bits(one_thread.attention_weights, many_threads.attention_weights));
}

// The one-shot calls' workspace cache, seen from C: a staged call leaves its
// workspace there (the C++ calls' cache: the same one), release frees it.
TEST(CApi, OneShotWorkspaceCacheCanBeReadAndReleased) {
    const Problem problem;
    msda::Options staged;
    staged.relayout = msda::Relayout::always;
    std::vector<float> output;
    const msda_forward_args args = to_c(problem.forward_args(output));
    const msda_options c_options = to_c(staged);
    msda_release_cached_workspace();
    EXPECT_EQ(msda_cached_workspace_bytes(), 0u);
    ASSERT_EQ(msda_forward(&args, &c_options), MSDA_OK) << msda_last_error();
    const msda::ProblemSize size = msda::ProblemSize::of(problem.forward_args(output), staged);
    msda::Options forward_only = staged;
    forward_only.grad_value = false;  // the forward needs the copy of value only
    EXPECT_EQ(msda_cached_workspace_bytes(), msda::Plan(size, forward_only).workspace_size());
    EXPECT_EQ(msda_cached_workspace_bytes(), msda::cached_workspace_bytes());
    msda_release_cached_workspace();
    EXPECT_EQ(msda_cached_workspace_bytes(), 0u);
    EXPECT_STREQ(msda_last_error(), "");
}

// Versioned structs (msda.h): a caller built against an older msda.h passes
// structs whose struct_size ends before the fields added since. The
// library reads only what struct_size covers (the bytes past it, here
// garbage, are never read) and gives the rest their defaults, and the
// argument structs' tensors sit one after the other at value.struct_size.
// These layouts are the first versioned one cut short: an options struct
// that ends before device_context, tensors that end before device_type
// (both as such a caller's would be, whatever follows them in memory).
TEST(CApiVersions, AnOptionsStructOfAnOlderSizeStillWorks) {
    const Problem problem;
    std::vector<float> expected, output;
    const msda_forward_args full = to_c(problem.forward_args(expected));
    const msda_options defaults = msda_default_options();
    ASSERT_EQ(msda_forward(&full, &defaults), MSDA_OK) << msda_last_error();

    const msda_forward_args args = to_c(problem.forward_args(output));
    msda_options older;
    std::memset(&older, 0xA5, sizeof older);  // what lies past the older struct
    std::memcpy(&older, &defaults, offsetof(msda_options, device_context));
    older.struct_size = offsetof(msda_options, device_context);
    ASSERT_EQ(msda_forward(&args, &older), MSDA_OK) << msda_last_error();
    EXPECT_TRUE(same_bits(output, expected));
}

TEST(CApiVersions, TensorsOfAnOlderSizeStillWork) {
    const Problem problem;
    const msda::Options defaults;
    Problem::Gradients expected, grads;
    const msda_backward_args full = to_c(problem.backward_args(expected, defaults));
    const msda_options options = msda_default_options();
    ASSERT_EQ(msda_backward(&full, &options), MSDA_OK) << msda_last_error();

    const msda_backward_args current = to_c(problem.backward_args(grads, defaults));
    const msda_tensor *tensors = &current.value;
    constexpr std::size_t kOlder = offsetof(msda_tensor, device_type);
    constexpr std::size_t kCount = sizeof(msda_backward_args) / sizeof(msda_tensor);
    std::vector<unsigned char> older(kCount * kOlder + sizeof(msda_tensor), 0xA5);
    for (std::size_t i = 0; i < kCount; i++) {
        std::memcpy(older.data() + i * kOlder, &tensors[i], kOlder);
        std::memcpy(older.data() + i * kOlder, &kOlder, sizeof kOlder);  // struct_size
    }
    ASSERT_EQ(msda_backward(reinterpret_cast<const msda_backward_args *>(older.data()), &options), MSDA_OK)
        << msda_last_error();
    EXPECT_TRUE(same_bits(grads.value, expected.value));
    EXPECT_TRUE(same_bits(grads.sampling_locations, expected.sampling_locations));
    EXPECT_TRUE(same_bits(grads.attention_weights, expected.attention_weights));
}

TEST(CApiVersions, ZeroedStructsAreThisLayout) {
    const Problem problem;
    std::vector<float> expected, output;
    msda_forward_args args = to_c(problem.forward_args(expected));
    msda_options options = msda_default_options();
    ASSERT_EQ(msda_forward(&args, &options), MSDA_OK) << msda_last_error();
    args = to_c(problem.forward_args(output));
    ASSERT_EQ(args.value.struct_size, 0u);  // to_c zeroes the struct
    options.struct_size = 0;
    ASSERT_EQ(msda_forward(&args, &options), MSDA_OK) << msda_last_error();
    EXPECT_TRUE(same_bits(output, expected));
}

TEST(CApiVersions, StructsOfANewerHeaderAreRefusedAndNothingIsWritten) {
    const Problem problem;
    std::vector<float> output;
    msda_forward_args args = to_c(problem.forward_args(output));
    msda_options options = msda_default_options();
    options.struct_size = sizeof(msda_options) + 8;
    EXPECT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("msda: options.struct_size: is " +
                                             std::to_string(sizeof(msda_options) + 8) + ", larger than the"));
    options = msda_default_options();
    args.value.struct_size = sizeof(msda_tensor) + 8;
    EXPECT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("msda: value.struct_size: is "));
    args.value.struct_size = sizeof(msda_tensor);
    args.output.struct_size = 8;
    EXPECT_EQ(msda_forward(&args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("msda: output.struct_size: is 8, but value's is"));
    EXPECT_FALSE(written(output));
    EXPECT_EQ(msda_abi_version(), 1);
}

}  // namespace
