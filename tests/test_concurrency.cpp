// Many threads calling at once: eight threads, each running forward and
// backward on problems of different shapes, storage dtypes, variants,
// layouts and devices (the CPU, and OpenCL where there is a device), one
// shot or through plans, round after round, every result compared bit for
// bit with the same call made alone (which is held to the reference first).
// The sanitizer trees run it too: under ThreadSanitizer it is the check that
// msda's own state (caches, registries, the OpenCL queue and its lock, the
// error handler) is shared without races.
#include <gtest/gtest.h>

#include <msda/msda.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core_grid.h"
#include "test_util.h"

namespace {

using msda::testing::LibraryTensors;
using msda::testing::Locations;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;

struct Case {
    std::unique_ptr<ProblemData> data;
    bool through_a_plan = false;
};

// Twelve problems: float32, float16 and bfloat16; C_h 32 (a compile-time
// variant), 17 and 5; both layouts of each tensor, both paddings; one walked
// query by query; on OpenCL two of the float32 ones where a device is.
std::vector<Case> mixed_cases(bool opencl) {
    std::vector<Case> cases;
    const msda::DType dtypes[3] = {msda::DType::f32, msda::DType::f16, msda::DType::bf16};
    const std::int64_t channels[3] = {32, 17, 5};
    for (int i = 0; i < 12; ++i) {
        ProblemSpec spec;
        spec.name = "mixed_" + std::to_string(i);
        spec.batch = 1 + i % 2;
        spec.queries = 40 + 7 * i;
        spec.heads = 1 + i % 3;
        spec.channels = channels[i % 3];
        spec.points = 1 + i % 4;
        spec.levels = {{4, 5}, {2, 3}, {1, 1}};
        spec.dtype = dtypes[(i / 3) % 3];
        spec.options.value_layout = i % 2 ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
        spec.options.locations_layout = i % 3 ? msda::LocationsLayout::B2QHLP : msda::LocationsLayout::BQHLP2;
        spec.options.padding_mode = i % 5 == 1 ? msda::PaddingMode::border : msda::PaddingMode::zeros;
        spec.locations = Locations::outside;
        spec.seed = 700 + i;
        if (i == 9) {
            // Deformable DETR's sizes, walked query by query (the by-query
            // variants: C_h 32, N_l 4, N_p 4, dense (l, p) blocks).
            spec.levels.push_back({2, 2});
            spec.points = 4;
            spec.dense_sample_blocks = true;
            spec.options.sample_order = msda::SampleOrder::by_query;
        }
        if (opencl && (i == 1 || i == 10)) spec.options.device = msda::Device::opencl;
        cases.push_back({std::make_unique<ProblemData>(spec), i % 3 == 2});
    }
    return cases;
}

// One forward and backward of a case; the tensors with the results.
std::unique_ptr<LibraryTensors> run(const Case &c) {
    auto tensors = std::make_unique<LibraryTensors>(*c.data);
    const msda::Options &options = c.data->spec.options;
    if (!c.through_a_plan) {
        msda::forward(tensors->forward_args(), options);
        msda::backward(tensors->backward_args(), options);
        return tensors;
    }
    const msda::Plan plan(msda::ProblemSize::of(tensors->backward_args(), options), options);
    std::vector<std::byte> workspace(plan.workspace_size());
    plan.forward(tensors->forward_args(), workspace.data(), workspace.size());
    plan.backward(tensors->backward_args(), workspace.data(), workspace.size());
    return tensors;
}

TEST(Concurrency, EightThreadsOfMixedCallsGiveTheBitsOfCallsMadeAlone) {
    const bool opencl = msda::testing::opencl_unavailable().empty();
    const std::vector<Case> cases = mixed_cases(opencl);
    std::vector<std::unique_ptr<LibraryTensors>> alone;
    for (const Case &c : cases) {
        SCOPED_TRACE(c.data->spec.describe());
        ASSERT_NO_THROW(alone.push_back(run(c)));
        // SPEC's tolerance for the storage dtype.
        const msda::DType dtype = c.data->spec.dtype;
        const double tolerance = dtype == msda::DType::f16 ? 5e-3 : dtype == msda::DType::bf16 ? 2e-2 : 1e-5;
        msda::testing::expect_matches_reference(*c.data, msda::testing::canonical_results(*alone.back()), tolerance);
    }

    constexpr int kThreads = 8, kRounds = 8;
    std::vector<std::string> failures(kThreads);
    std::vector<std::vector<std::unique_ptr<LibraryTensors>>> together(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            try {
                // Each thread walks the cases from its own start, so every
                // round mixes them differently.
                for (int round = 0; round < kRounds; ++round) {
                    for (std::size_t k = 0; k < cases.size(); k += kThreads / 2) {
                        const std::size_t i = (t + round + k) % cases.size();
                        together[t].push_back(run(cases[i]));
                    }
                }
            } catch (const std::exception &e) {
                failures[t] = e.what();
            }
        });
    }
    for (std::thread &thread : threads) thread.join();

    for (int t = 0; t < kThreads; ++t) {
        SCOPED_TRACE("thread " + std::to_string(t));
        ASSERT_EQ(failures[t], "");
        std::size_t n = 0;
        for (int round = 0; round < kRounds; ++round) {
            for (std::size_t k = 0; k < cases.size(); k += kThreads / 2) {
                const std::size_t i = (t + round + k) % cases.size();
                SCOPED_TRACE(cases[i].data->spec.describe());
                msda::testing::expect_same_bits(*together[t][n++], *alone[i]);
            }
        }
    }
}

}  // namespace
