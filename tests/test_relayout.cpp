// Options::relayout: value staged head-major in the plan's workspace (and
// grad_value summed head-major, then copied or rounded into the caller's
// layout) must give the same bits as the kernels reading the caller's layout,
// in every storage dtype, for both operators; the workspace holds exactly
// what the policy needs; and what the policy decides is what the comment in
// msda.hpp says.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core_grid.h"
#include "test_util.h"

namespace {

using msda::DType;
using msda::Relayout;
using msda::testing::canonical_results;
using msda::testing::expect_inputs_unchanged;
using msda::testing::expect_matches_reference;
using msda::testing::expect_nothing_written_outside_views;
using msda::testing::expect_same_bits;
using msda::testing::kSentinel;
using msda::testing::LibraryTensors;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;

const char *short_name(DType dtype) { return dtype == DType::f16 ? "f16" : dtype == DType::bf16 ? "bf16" : "f32"; }

double tolerance(DType dtype) { return dtype == DType::f16 ? 5e-3 : dtype == DType::bf16 ? 2e-2 : 1e-5; }

// A workspace that holds anything has 63 bytes more: its regions start at
// its first 64-byte boundary (msda.hpp, Plan::workspace_size).
constexpr std::size_t kAlignmentSlack = 63;

// Forward and backward through a plan with a workspace of exactly the size it
// asks for (so a region written past its end would show under ASan and in the
// guard of the next test's allocation).
// (GKA: no location gradient, its view absent.)
void run_planned(LibraryTensors &tensors, const msda::Options &options) {
    msda::BackwardArgs backward = tensors.backward_args();
    if (options.op == msda::Operator::gka) backward.grad_sampling_locations = {};
    const msda::Plan plan(msda::ProblemSize::of(backward, options), options);
    std::vector<std::byte> workspace(plan.workspace_size());
    plan.forward(tensors.forward_args(), workspace.data(), workspace.size());
    plan.backward(backward, workspace.data(), workspace.size());
}

// The core grid in each storage dtype (float32 locations).
std::vector<ProblemSpec> relayout_grid() {
    std::vector<ProblemSpec> cases;
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        for (ProblemSpec spec : msda::testing::grid()) {
            spec.dtype = dtype;
            spec.name += std::string("_") + short_name(dtype);
            cases.push_back(spec);
        }
    }
    return cases;
}

class RelayoutGrid : public ::testing::TestWithParam<ProblemSpec> {};

// Staged (always) against the caller's layout (never): the same bits, through
// the plan and the one-shot calls, and the reference's values.
TEST_P(RelayoutGrid, StagedMatchesUnstagedBitwise) {
    const ProblemSpec &spec = GetParam();
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    msda::Options never = spec.options, always = spec.options;
    never.relayout = Relayout::never;
    always.relayout = Relayout::always;

    LibraryTensors unstaged(data), staged(data), one_shot(data);
    ASSERT_NO_THROW(run_planned(unstaged, never));
    ASSERT_NO_THROW(run_planned(staged, always));
    ASSERT_NO_THROW(msda::forward(one_shot.forward_args(), always));
    ASSERT_NO_THROW(msda::backward(one_shot.backward_args(), always));
    expect_same_bits(staged, unstaged);
    expect_same_bits(one_shot, unstaged);
    expect_matches_reference(data, canonical_results(staged), tolerance(spec.dtype));
    expect_nothing_written_outside_views(staged);
    expect_inputs_unchanged(staged, data);
}

INSTANTIATE_TEST_SUITE_P(Grid, RelayoutGrid, ::testing::ValuesIn(relayout_grid()),
                         [](const ::testing::TestParamInfo<ProblemSpec> &info) { return info.param.name; });

// GKA reads and scatters through the same staging.
TEST(Relayout, GkaStagedMatchesUnstagedBitwise) {
    for (DType dtype : {DType::f32, DType::bf16}) {
        ProblemSpec spec;
        spec.name = "gka";
        spec.batch = 2;
        spec.queries = 40;
        spec.heads = 3;
        spec.channels = 32;
        spec.points = 3;
        spec.levels = {{6, 7}, {3, 4}};
        spec.padding = 1;
        spec.dtype = dtype;
        SCOPED_TRACE(spec.describe());
        const ProblemData data(spec);
        msda::Options never, always;
        never.op = always.op = msda::Operator::gka;
        never.relayout = Relayout::never;
        always.relayout = Relayout::always;
        LibraryTensors unstaged(data), staged(data);
        // Pixel coordinates: the normalized locations scaled past the levels'
        // sizes, so rows at the borders are read too.
        std::vector<float> pixels = data.sampling_locations;
        for (float &x : pixels) x *= 9.0f;
        unstaged.sampling_locations.set_canonical(pixels);
        staged.sampling_locations.set_canonical(pixels);
        ASSERT_NO_THROW(run_planned(unstaged, never));
        ASSERT_NO_THROW(run_planned(staged, always));
        expect_same_bits(staged, unstaged);
        EXPECT_FALSE(unstaged.grad_value.all_hold(kSentinel));
    }
}

// A problem the automatic policy stages (value of 5 MiB, 4 samples per value
// row and head): the same bits as never, and the workspace it asked for.
TEST(Relayout, AutomaticStagesDenseLargeProblems) {
    ProblemSpec spec;
    spec.name = "dense";
    spec.queries = 2560;
    spec.heads = 8;
    spec.channels = 32;
    spec.points = 4;
    spec.levels = {{64, 64}, {32, 32}};  // L = 5120 rows of 8 x 32 float32: 5 MiB
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    msda::Options automatic, never;
    never.relayout = Relayout::never;
    LibraryTensors unstaged(data), staged(data);
    const msda::ProblemSize size = msda::ProblemSize::of(staged.backward_args(), automatic);
    const std::size_t value_bytes = 5120 * 8 * 32 * sizeof(float);
    EXPECT_EQ(msda::Plan(size, automatic).workspace_size(), 2 * value_bytes + kAlignmentSlack);
    ASSERT_NO_THROW(run_planned(unstaged, never));
    ASSERT_NO_THROW(run_planned(staged, automatic));
    expect_same_bits(staged, unstaged);
    expect_matches_reference(data, canonical_results(staged));
}

// What each policy reserves, from sizes alone.
TEST(Relayout, WorkspaceHoldsWhatThePolicyNeeds) {
    msda::ProblemSize size;
    size.batch = 2;
    size.value_length = 22223;
    size.heads = 8;
    size.channels = 32;
    size.levels = 4;
    size.points = 4;
    size.queries = 22223;
    const std::size_t elements = 2 * 22223 * 8 * 32;
    const auto bytes = [&](Relayout relayout, bool grad_value = true,
                           msda::ValueLayout layout = msda::ValueLayout::BLNC) {
        msda::Options options;
        options.relayout = relayout;
        options.grad_value = grad_value;
        options.value_layout = layout;
        return msda::Plan(size, options).workspace_size();
    };
    // float32: the copy of value (64-byte multiple) and the float32 sums,
    // and the slack that lets them start on a 64-byte boundary.
    const std::size_t copy32 = (elements * 4 + 63) / 64 * 64;
    EXPECT_EQ(bytes(Relayout::automatic), copy32 + elements * 4 + kAlignmentSlack);
    EXPECT_EQ(bytes(Relayout::always), copy32 + elements * 4 + kAlignmentSlack);
    EXPECT_EQ(bytes(Relayout::automatic, false), copy32 + kAlignmentSlack);
    EXPECT_EQ(bytes(Relayout::never), 0u);
    EXPECT_EQ(bytes(Relayout::always, true, msda::ValueLayout::BNLC), 0u);  // already head-major
    // A decoder (N_q * N_l * N_p < 4 L) is not staged automatically.
    size.queries = 900;
    EXPECT_EQ(bytes(Relayout::automatic), 0u);
    EXPECT_EQ(bytes(Relayout::always), copy32 + elements * 4 + kAlignmentSlack);
    size.queries = 22223;
    // Nor is a value that fits a core's L2 (the running CPU's,
    // msda::cpu_dispatch()), or one head. A row of all heads of both batch
    // elements is 2 x 8 x 32 float32, 2 KiB.
    const std::int64_t l2_rows = msda::cpu_dispatch().l2_cache_bytes / (2 * 8 * 32 * 4);
    size.value_length = 2 * l2_rows;  // twice the L2 (4 MiB with 2 MiB)
    EXPECT_GT(bytes(Relayout::automatic), 0u);
    size.value_length = l2_rows;  // the L2
    EXPECT_EQ(bytes(Relayout::automatic), 0u);
    size.value_length = 22223;
    size.heads = 1;
    EXPECT_EQ(bytes(Relayout::always), 0u);
    size.heads = 8;
    // Half precision: a copy of value in its dtype; the float32 sums whether
    // staged or not.
    size.dtype = DType::bf16;
    const std::size_t copy16 = (elements * 2 + 63) / 64 * 64;
    EXPECT_EQ(bytes(Relayout::automatic), copy16 + elements * 4 + kAlignmentSlack);
    EXPECT_EQ(bytes(Relayout::never), elements * 4 + kAlignmentSlack);
}

TEST(Relayout, TooSmallWorkspaceIsRejectedAndNothingIsWritten) {
    ProblemSpec spec;
    spec.queries = 5;
    spec.heads = 2;
    spec.channels = 4;
    spec.levels = {{3, 3}};
    const ProblemData data(spec);
    LibraryTensors tensors(data);
    msda::Options options;
    options.relayout = Relayout::always;
    const msda::Plan plan(msda::ProblemSize::of(tensors.backward_args(), options), options);
    ASSERT_GT(plan.workspace_size(), 0u);
    std::vector<std::byte> workspace(plan.workspace_size() - 1);
    for (int call = 0; call < 3; call++) {
        try {
            if (call == 0) plan.forward(tensors.forward_args(), workspace.data(), workspace.size());
            if (call == 1) plan.backward(tensors.backward_args(), workspace.data(), workspace.size());
            if (call == 2) plan.forward(tensors.forward_args());
            ADD_FAILURE() << "call " << call << ": a short workspace was accepted";
        } catch (const msda::Error &error) {
            EXPECT_NE(std::string(error.what()).find("workspace"), std::string::npos) << error.what();
        }
    }
    EXPECT_TRUE(tensors.output.all_hold(kSentinel));
    EXPECT_TRUE(tensors.grad_value.all_hold(kSentinel));
    EXPECT_TRUE(tensors.grad_attention_weights.all_hold(kSentinel));
}

TEST(Relayout, UnknownPolicyIsRejected) {
    msda::ProblemSize size;
    size.value_length = size.heads = size.channels = size.levels = size.points = 1;
    msda::Options options;
    options.relayout = static_cast<Relayout>(3);
    try {
        msda::Plan plan(size, options);
        ADD_FAILURE() << "relayout 3 was accepted";
    } catch (const msda::Error &error) {
        EXPECT_NE(std::string(error.what()).find("relayout"), std::string::npos) << error.what();
    }
}

// A problem the always policy stages, of the given size.
ProblemSpec staged_problem(const std::string &name, std::int64_t queries, std::int64_t side) {
    ProblemSpec spec;
    spec.name = name;
    spec.batch = 2;
    spec.queries = queries;
    spec.heads = 3;
    spec.channels = 32;
    spec.points = 2;
    spec.levels = {{side, side + 1}, {side / 2, side / 2 + 1}};
    spec.padding = 1;
    return spec;
}

// The workspace a call of `spec` asks for: forward, the staged copy of value;
// backward, the copy and the float32 sums.
std::size_t staged_bytes(const ProblemSpec &spec, bool backward) {
    const std::size_t elements = static_cast<std::size_t>(spec.batch * spec.value_length() * spec.heads *
                                                          spec.channels);
    const std::size_t copy = (elements * sizeof(float) + 63) / 64 * 64;
    return (backward ? copy + elements * sizeof(float) : copy) + kAlignmentSlack;
}

// Two problems the always policy stages, and their results through unstaged
// plans: what every staged call on them must reproduce bitwise.
struct StagedPair {
    ProblemData first, second;
    LibraryTensors first_expected, second_expected;
    msda::Options always;

    StagedPair(const ProblemSpec &first_spec, const ProblemSpec &second_spec)
        : first(first_spec), second(second_spec), first_expected(first), second_expected(second) {
        msda::Options never;
        never.relayout = Relayout::never;
        always.relayout = Relayout::always;
        run_planned(first_expected, never);
        run_planned(second_expected, never);
    }
};

// One-shot calls keep the largest workspace a finished call used and lend it
// to the next call it is large enough for: what the cache holds after each
// call, and the same bits as unstaged plans whatever the lent block held
// before (a larger problem's copy and sums included).
TEST(Relayout, OneShotCallsReuseTheLargestWorkspace) {
    const ProblemSpec small = staged_problem("small", 30, 6), large = staged_problem("large", 50, 12);
    const StagedPair pair(small, large);
    const ProblemData &small_data = pair.first, &large_data = pair.second;
    const LibraryTensors &small_expected = pair.first_expected, &large_expected = pair.second_expected;
    const msda::Options &always = pair.always;
    msda::Options never;
    never.relayout = Relayout::never;

    const auto run_one_shot = [&](const ProblemData &data, const LibraryTensors &expected) {
        LibraryTensors tensors(data);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), always));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), always));
        expect_same_bits(tensors, expected);
    };
    msda::release_cached_workspace();
    EXPECT_EQ(msda::cached_workspace_bytes(), 0u);
    {
        LibraryTensors tensors(small_data);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), always));
        EXPECT_EQ(msda::cached_workspace_bytes(), staged_bytes(small, false));
    }
    run_one_shot(small_data, small_expected);
    EXPECT_EQ(msda::cached_workspace_bytes(), staged_bytes(small, true));
    run_one_shot(large_data, large_expected);
    EXPECT_EQ(msda::cached_workspace_bytes(), staged_bytes(large, true));
    run_one_shot(small_data, small_expected);  // in the large block
    EXPECT_EQ(msda::cached_workspace_bytes(), staged_bytes(large, true));
    // A call needing no workspace leaves the cache as it is.
    {
        LibraryTensors tensors(small_data);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), never));
        EXPECT_EQ(msda::cached_workspace_bytes(), staged_bytes(large, true));
    }
    msda::release_cached_workspace();
    EXPECT_EQ(msda::cached_workspace_bytes(), 0u);
    run_one_shot(large_data, large_expected);
    msda::release_cached_workspace();
}

// Two threads making one-shot calls at once: one of them finds the cached
// block lent out and allocates its own; every result is still the plan's.
TEST(Relayout, ConcurrentOneShotCallsGetTheirOwnWorkspace) {
    const ProblemSpec first = staged_problem("first", 40, 10), second = staged_problem("second", 30, 8);
    const StagedPair pair(first, second);
    const msda::Options &always = pair.always;

    constexpr int kCalls = 12;
    std::vector<LibraryTensors> first_results, second_results;
    first_results.reserve(kCalls);
    second_results.reserve(kCalls);
    for (int call = 0; call < kCalls; call++) {
        first_results.emplace_back(pair.first);
        second_results.emplace_back(pair.second);
    }
    const auto run = [&](std::vector<LibraryTensors> *results) {
        for (LibraryTensors &tensors : *results) {
            msda::forward(tensors.forward_args(), always);
            msda::backward(tensors.backward_args(), always);
        }
    };
    msda::release_cached_workspace();
    std::thread other([&] { EXPECT_NO_THROW(run(&second_results)); });
    EXPECT_NO_THROW(run(&first_results));
    other.join();
    for (const LibraryTensors &tensors : first_results) expect_same_bits(tensors, pair.first_expected);
    for (const LibraryTensors &tensors : second_results) expect_same_bits(tensors, pair.second_expected);
    // The larger of the two problems' workspaces is what stays.
    EXPECT_EQ(msda::cached_workspace_bytes(), std::max(staged_bytes(first, true), staged_bytes(second, true)));
    msda::release_cached_workspace();
}

// The workspace may start anywhere: its regions start at its first 64-byte
// boundary, inside the workspace_size() bytes given, whatever the offset;
// results are the same bits, and the bytes around the workspace untouched.
TEST(Relayout, AnyWorkspaceAlignmentGivesTheSameBitsAndStaysInside) {
    const ProblemSpec spec = staged_problem("aligned", 20, 6);
    const ProblemData data(spec);
    msda::Options always, never;
    always.relayout = Relayout::always;
    never.relayout = Relayout::never;
    LibraryTensors expected(data);
    ASSERT_NO_THROW(run_planned(expected, never));
    LibraryTensors tensors(data);
    const msda::Plan plan(msda::ProblemSize::of(tensors.backward_args(), always), always);
    const std::size_t bytes = plan.workspace_size();
    ASSERT_GT(bytes, 0u);
    constexpr std::size_t kGuard = 128;
    constexpr unsigned char kPattern = 0xA5;
    for (std::size_t offset : {0, 1, 4, 17, 32, 63}) {
        SCOPED_TRACE("offset " + std::to_string(offset));
        // 64-byte aligned storage, so `offset` is the workspace's alignment.
        std::vector<std::byte> storage(bytes + 2 * kGuard + 64);
        std::byte *aligned = storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64;
        std::byte *workspace = aligned + kGuard + offset;
        std::fill(storage.begin(), storage.end(), std::byte{kPattern});
        LibraryTensors result(data);
        ASSERT_NO_THROW(plan.forward(result.forward_args(), workspace, bytes));
        ASSERT_NO_THROW(plan.backward(result.backward_args(), workspace, bytes));
        expect_same_bits(result, expected);
        for (const std::byte *at = storage.data(); at < workspace; at++) ASSERT_EQ(*at, std::byte{kPattern});
        for (const std::byte *at = workspace + bytes; at < storage.data() + storage.size(); at++) {
            ASSERT_EQ(*at, std::byte{kPattern});
        }
    }
}

}  // namespace
