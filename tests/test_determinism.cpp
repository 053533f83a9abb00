// SPEC, Determinism: "Backward is bitwise reproducible by default: the same
// inputs give the same bits, whatever the thread count." Checked on problems
// built so that grad_value's scatter collides constantly (300 queries, 4
// points, levels of a handful of pixels), where any order-dependent
// accumulation would show. Also: the library is thread-safe, concurrent calls
// give the bits of serial calls, and one Plan serves several threads at once.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using msda::testing::bitwise_equal;
using msda::testing::LibraryTensors;
using msda::testing::Locations;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;

// Restores the default thread count however a test ends.
struct DefaultThreadsOnExit {
    ~DefaultThreadsOnExit() { msda::set_num_threads(0); }
};

ProblemSpec colliding_problem(std::int64_t channels, bool border, std::uint64_t seed,
                              msda::DType dtype = msda::DType::f32) {
    ProblemSpec spec;
    spec.dtype = dtype;
    spec.name = "colliding";
    spec.batch = 2;
    spec.queries = 300;
    spec.heads = 4;
    spec.channels = channels;
    spec.points = 4;
    spec.levels = {{2, 2}, {1, 3}, {3, 1}};  // 10 value rows per (batch, head)
    spec.options.padding_mode = border ? msda::PaddingMode::border : msda::PaddingMode::zeros;
    spec.options.value_layout = border ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
    spec.locations = Locations::outside;
    spec.seed = seed;
    spec.options.device = msda::testing::test_device();
    return spec;
}

// Raw storage of every output, in a fixed order.
struct Bits {
    std::vector<std::uint8_t> output, grad_value, grad_sampling_locations, grad_attention_weights;
};

Bits run_once(const ProblemData &data) {
    LibraryTensors tensors(data);
    msda::forward(tensors.forward_args(), data.spec.options);
    msda::backward(tensors.backward_args(), data.spec.options);
    return {tensors.output.bytes(), tensors.grad_value.bytes(), tensors.grad_sampling_locations.bytes(),
            tensors.grad_attention_weights.bytes()};
}

void expect_same_bits(const Bits &a, const Bits &b) {
    EXPECT_TRUE(bitwise_equal("output", a.output, b.output));
    EXPECT_TRUE(bitwise_equal("grad_value", a.grad_value, b.grad_value));
    EXPECT_TRUE(
        bitwise_equal("grad_sampling_locations", a.grad_sampling_locations, b.grad_sampling_locations));
    EXPECT_TRUE(bitwise_equal("grad_attention_weights", a.grad_attention_weights, b.grad_attention_weights));
}

// C_h, border mode, storage dtype (half storage sums grad_value in float32
// in a workspace, then rounds).
using DeterminismCase = std::tuple<std::int64_t, bool, msda::DType>;
class Determinism : public ::testing::TestWithParam<DeterminismCase> {};

TEST_P(Determinism, RepeatedRunsAndThreadCountsGiveTheSameBits) {
    DefaultThreadsOnExit restore;
    const auto [channels, border, dtype] = GetParam();
    const ProblemData data(colliding_problem(channels, border, 31 + channels, dtype));
    SCOPED_TRACE(data.spec.describe());

    msda::set_num_threads(1);
    Bits first;
    ASSERT_NO_THROW(first = run_once(data));
    // 300 queries x 3 levels x 4 points scatter into 10 value rows per
    // (batch, head): hundreds of contributions per row. The run did write.
    ASSERT_FALSE(LibraryTensors(data).grad_value.bytes() == first.grad_value);

    for (int repeat = 0; repeat < 3; repeat++) {
        SCOPED_TRACE(::testing::Message() << "1 thread, repeat " << repeat);
        Bits again;
        ASSERT_NO_THROW(again = run_once(data));
        expect_same_bits(first, again);
    }
    for (int threads : {2, 8, 0}) {
        msda::set_num_threads(threads);
        for (int repeat = 0; repeat < 3; repeat++) {
            SCOPED_TRACE(::testing::Message() << threads << " threads (0: one per core), repeat " << repeat);
            Bits again;
            ASSERT_NO_THROW(again = run_once(data));
            expect_same_bits(first, again);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Colliding, Determinism,
                         ::testing::Combine(::testing::Values(std::int64_t{32}, std::int64_t{17}),
                                            ::testing::Bool(),
                                            ::testing::Values(msda::DType::f32, msda::DType::f16,
                                                              msda::DType::bf16)),
                         [](const ::testing::TestParamInfo<DeterminismCase> &info) {
                             return "c" + std::to_string(std::get<0>(info.param)) +
                                    (std::get<1>(info.param) ? "_border_" : "_zeros_") +
                                    msda::dtype_name(std::get<2>(info.param));
                         });

// Four threads at once, each on its own problem (different C_h, so different
// generated variants), several rounds each: the same bits as serial calls.
TEST(ThreadSafety, ConcurrentCallsMatchSerialCalls) {
    DefaultThreadsOnExit restore;
    msda::set_num_threads(2);
    std::vector<ProblemData> problems;
    const std::int64_t channels[] = {32, 17, 64, 3};
    for (int i = 0; i < 4; i++) {
        ProblemSpec spec = colliding_problem(channels[i], i % 2 == 1, 500 + i);
        spec.queries = 120;
        spec.options.align_corners = i >= 2;
        spec.options.locations_layout = i % 2 ? msda::LocationsLayout::B2QHLP : msda::LocationsLayout::BQHLP2;
        problems.emplace_back(spec);
    }
    std::vector<Bits> serial(problems.size());
    for (std::size_t i = 0; i < problems.size(); i++) ASSERT_NO_THROW(serial[i] = run_once(problems[i]));

    constexpr int kRounds = 5;
    std::vector<std::vector<Bits>> concurrent(problems.size(), std::vector<Bits>(kRounds));
    std::vector<std::string> failures(problems.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < problems.size(); i++) {
        threads.emplace_back([&, i] {
            try {
                for (int round = 0; round < kRounds; round++) concurrent[i][round] = run_once(problems[i]);
            } catch (const std::exception &error) {
                failures[i] = error.what();
            }
        });
    }
    for (std::thread &thread : threads) thread.join();

    for (std::size_t i = 0; i < problems.size(); i++) {
        SCOPED_TRACE(problems[i].spec.describe());
        ASSERT_EQ(failures[i], "");
        for (int round = 0; round < kRounds; round++) {
            SCOPED_TRACE(::testing::Message() << "round " << round);
            expect_same_bits(serial[i], concurrent[i][round]);
        }
    }
}

// SPEC of Plan: immutable, may be run from several threads at once. One plan,
// four threads (each with its own workspace), four different inputs of the
// plan's sizes; in bfloat16, whose backward uses the workspace.
TEST(ThreadSafety, OnePlanSharedByFourThreads) {
    DefaultThreadsOnExit restore;
    msda::set_num_threads(2);
    std::vector<ProblemData> problems;
    for (int i = 0; i < 4; i++) problems.emplace_back(colliding_problem(32, false, 900 + i, msda::DType::bf16));
    std::vector<Bits> serial(problems.size());
    for (std::size_t i = 0; i < problems.size(); i++) ASSERT_NO_THROW(serial[i] = run_once(problems[i]));

    LibraryTensors sizes_from(problems[0]);
    const msda::Plan plan(msda::ProblemSize::of(sizes_from.backward_args(), problems[0].spec.options),
                          problems[0].spec.options);
    std::vector<Bits> concurrent(problems.size());
    std::vector<std::string> failures(problems.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < problems.size(); i++) {
        threads.emplace_back([&, i] {
            try {
                std::vector<std::byte> workspace(plan.workspace_size());
                for (int round = 0; round < 3; round++) {
                    LibraryTensors tensors(problems[i]);
                    plan.forward(tensors.forward_args(), workspace.data(), workspace.size());
                    plan.backward(tensors.backward_args(), workspace.data(), workspace.size());
                    Bits bits{tensors.output.bytes(), tensors.grad_value.bytes(),
                              tensors.grad_sampling_locations.bytes(),
                              tensors.grad_attention_weights.bytes()};
                    if (round == 0) {
                        concurrent[i] = bits;
                    } else if (!bitwise_equal("grad_value", bits.grad_value, concurrent[i].grad_value)) {
                        failures[i] = "round " + std::to_string(round) + " differs from round 0";
                    }
                }
            } catch (const std::exception &error) {
                failures[i] = error.what();
            }
        });
    }
    for (std::thread &thread : threads) thread.join();

    for (std::size_t i = 0; i < problems.size(); i++) {
        SCOPED_TRACE(::testing::Message() << "thread " << i);
        ASSERT_EQ(failures[i], "");
        expect_same_bits(serial[i], concurrent[i]);
    }
}

}  // namespace
