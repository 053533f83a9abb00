// No memory is lost across 10^4 calls: small forward and backward calls
// through every entry (the C++ one-shot calls, a C++ plan, the C API's
// one-shot calls and plans, GKA, float16, and calls refused with an error),
// checked two ways.
// - The heap's bytes in use after the calls are those before them, within
//   what the caches may keep (the generated code's scratch pool, the
//   one-shot calls' workspace, both released before measuring).
// - In the AddressSanitizer tree, LeakSanitizer checks at exit (and the test
//   runs a leak check of its own before returning), which also finds a block
//   lost while the heap's bytes stay level.
#include <gtest/gtest.h>

#include <msda/msda.h>
#include <msda/msda.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "c_api_views.h"
#include "core_grid.h"
#include "test_util.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MSDA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MSDA_ASAN 1
#endif

#ifdef MSDA_ASAN
#include <sanitizer/allocator_interface.h>
#include <sanitizer/lsan_interface.h>
#else
#include <malloc.h>
#endif

namespace {

using msda::testing::LibraryTensors;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;

std::size_t heap_bytes_in_use() {
#ifdef MSDA_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    return mallinfo2().uordblks;
#endif
}

ProblemSpec small(msda::DType dtype, std::uint64_t seed) {
    ProblemSpec spec;
    spec.name = "small";
    spec.batch = 1;
    spec.queries = 5;
    spec.heads = 2;
    spec.channels = 4;
    spec.points = 2;
    spec.levels = {{3, 2}, {1, 2}};
    spec.dtype = dtype;
    spec.seed = seed;
    return spec;
}

TEST(ManyCalls, TenThousandCallsLoseNoMemory) {
    const ProblemData f32(small(msda::DType::f32, 91)), f16(small(msda::DType::f16, 92));
    LibraryTensors a(f32), b(f16);
    msda::Options gka;
    gka.op = msda::Operator::gka;
    gka.grad_sampling_locations = false;
    const msda::Plan plan(msda::ProblemSize::of(a.backward_args()));
    std::vector<std::byte> workspace(plan.workspace_size());

    const msda_forward_args c_forward = msda::testing::to_c(b.forward_args());
    const msda_backward_args c_backward = msda::testing::to_c(b.backward_args());
    const msda_options c_options = msda_default_options();
    msda_problem_size c_size{};
    c_size.batch = 1;
    c_size.value_length = 8;
    c_size.heads = 2;
    c_size.channels = 4;
    c_size.levels = 2;
    c_size.queries = 5;
    c_size.points = 2;
    c_size.dtype = MSDA_F16;
    c_size.locations_dtype = MSDA_F32;
    msda::BackwardArgs gka_backward = a.backward_args();
    gka_backward.grad_sampling_locations = {};
    msda::BackwardArgs wrong = a.backward_args();
    wrong.grad_output.shape[2] += 1;  // refused: grad_output's last axis is not N_h * C_h

    int wrong_calls = 0, refused = 0, c_failures = 0;
    // One round of each kind of call; the first runs before measuring, so
    // the caches and Halide's thread pool exist.
    auto round = [&](int i) {
        switch (i % 6) {
        case 0:
            msda::forward(a.forward_args());
            msda::backward(a.backward_args());
            break;
        case 1:
            plan.forward(a.forward_args(), workspace.data(), workspace.size());
            plan.backward(a.backward_args(), workspace.data(), workspace.size());
            break;
        case 2:
            c_failures += msda_forward(&c_forward, &c_options) != MSDA_OK;
            c_failures += msda_backward(&c_backward, &c_options) != MSDA_OK;
            break;
        case 3: {
            msda_plan *c_plan = nullptr;
            c_failures += msda_plan_create(&c_size, &c_options, &c_plan) != MSDA_OK;
            std::vector<std::byte> c_workspace(msda_plan_workspace_size(c_plan));
            c_failures += msda_plan_backward(c_plan, &c_backward, c_workspace.data(), c_workspace.size()) != MSDA_OK;
            msda_plan_destroy(c_plan);
            break;
        }
        case 4:
            msda::forward(a.forward_args(), gka);
            msda::backward(gka_backward, gka);
            break;
        case 5:
            wrong_calls++;
            try {
                msda::backward(wrong);
            } catch (const msda::Error &) {
                refused++;
            }
            break;
        }
    };
    for (int i = 0; i < 6; ++i) round(i);
    msda::release_cached_workspace();
    const std::size_t before = heap_bytes_in_use();
    constexpr int kCalls = 10000;
    for (int i = 0; i < kCalls; ++i) round(i);
    msda::release_cached_workspace();
    const std::size_t after = heap_bytes_in_use();

    EXPECT_EQ(c_failures, 0) << msda_last_error();
    EXPECT_EQ(refused, wrong_calls) << "every wrong call is refused";
    // A lost block per call would be 10^4 blocks; allow what malloc's own
    // bookkeeping and a thread's first use may leave (under 64 KiB).
    EXPECT_LE(after, before + 64 * 1024) << "heap bytes in use: " << before << " before, " << after << " after "
                                         << kCalls << " calls";
#ifdef MSDA_ASAN
    EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "LeakSanitizer found blocks no pointer reaches";
#endif
    // The last rounds still compute: hold the float32 results to the reference.
    msda::forward(a.forward_args());
    msda::backward(a.backward_args());
    msda::testing::expect_matches_reference(f32, msda::testing::canonical_results(a), 1e-5);
}

}  // namespace
