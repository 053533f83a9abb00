// The plan and workspace API allocates nothing behind the caller's back once
// warm: every heap allocation the process makes (malloc, calloc, realloc,
// the aligned ones, and operator new, which calls malloc) is counted while a
// plan's calls run, and the results are then held to the reference, so the
// counted calls did the work.
//
// The counting replaces the C library's allocator entry points, which the
// sanitizers replace too: in the sanitizer trees the tests report SKIPPED.
#include <gtest/gtest.h>

#include <msda/msda.hpp>

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "core_grid.h"
#include "test_util.h"

#ifndef MSDA_NO_ALLOCATION_COUNT
extern "C" {
void *__libc_malloc(std::size_t);
void *__libc_calloc(std::size_t, std::size_t);
void *__libc_realloc(void *, std::size_t);
void *__libc_memalign(std::size_t, std::size_t);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void note() {
    if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void *malloc(std::size_t bytes) {
    note();
    return __libc_malloc(bytes);
}
void *calloc(std::size_t count, std::size_t bytes) {
    note();
    return __libc_calloc(count, bytes);
}
void *realloc(void *block, std::size_t bytes) {
    note();
    return __libc_realloc(block, bytes);
}
void *memalign(std::size_t alignment, std::size_t bytes) {
    note();
    return __libc_memalign(alignment, bytes);
}
void *aligned_alloc(std::size_t alignment, std::size_t bytes) {
    note();
    return __libc_memalign(alignment, bytes);
}
int posix_memalign(void **block, std::size_t alignment, std::size_t bytes) {
    note();
    *block = __libc_memalign(alignment, bytes);
    return *block == nullptr ? 12 /* ENOMEM */ : 0;
}
}
#endif

namespace {

using msda::testing::LibraryTensors;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;

#ifdef MSDA_NO_ALLOCATION_COUNT
#define MSDA_SKIP_WITHOUT_COUNTING()                                                                             \
    GTEST_SKIP() << "this tree's sanitizer replaces the allocator entry points the test counts through"
#else
#define MSDA_SKIP_WITHOUT_COUNTING() (void)0
#endif

// The heap allocations `work` makes.
template <typename Work>
long allocations_of(Work &&work) {
#ifdef MSDA_NO_ALLOCATION_COUNT
    work();
    return 0;
#else
    allocations = 0;
    counting = true;
    work();
    counting = false;
    return allocations.load();
#endif
}

// Threads for the generated code while a test runs; the default again after.
struct Threads {
    explicit Threads(int threads) { msda::set_num_threads(threads); }
    ~Threads() { msda::set_num_threads(0); }
};

struct Problem {
    std::string what;
    ProblemSpec spec;
};

std::vector<Problem> problems() {
    std::vector<Problem> list;
    auto add = [&](const std::string &what, msda::DType dtype, std::int64_t channels, auto &&adjust) {
        ProblemSpec spec;
        spec.name = what;
        spec.batch = 2;
        spec.queries = 70;
        spec.heads = 2;
        spec.channels = channels;
        spec.points = 4;
        spec.levels = {{12, 9}, {6, 5}, {3, 3}, {2, 1}};
        spec.dtype = dtype;
        spec.seed = 4100 + list.size();
        adjust(spec);
        list.push_back({what, spec});
    };
    auto same = [](ProblemSpec &) {};
    add("float32, C_h 32 (compile-time variant)", msda::DType::f32, 32, same);
    add("float32, C_h 17 (generic variant)", msda::DType::f32, 17, same);
    add("float32, C_h 64, value staged head-major", msda::DType::f32, 64,
        [](ProblemSpec &s) { s.options.relayout = msda::Relayout::always; });
    add("float16, C_h 32 (float32 sums in the workspace)", msda::DType::f16, 32, same);
    add("bfloat16, C_h 8, BNLC value", msda::DType::bf16, 8,
        [](ProblemSpec &s) { s.options.value_layout = msda::ValueLayout::BNLC; });
    add("float32, Deformable DETR's sizes walked by query", msda::DType::f32, 32, [](ProblemSpec &s) {
        s.dense_sample_blocks = true;
        s.options.sample_order = msda::SampleOrder::by_query;
    });
    return list;
}

double tolerance(msda::DType dtype) {
    return dtype == msda::DType::f16 ? 5e-3 : dtype == msda::DType::bf16 ? 2e-2 : 1e-5;
}

// One thread: after a plan's first forward and first backward, its calls
// allocate nothing, whichever gradients they ask for.
TEST(PlanAllocations, OneThreadAllocatesNothingAfterTheFirstCalls) {
    MSDA_SKIP_WITHOUT_COUNTING();
    Threads one(1);
    for (const Problem &problem : problems()) {
        SCOPED_TRACE(problem.spec.describe());
        const ProblemData data(problem.spec);
        LibraryTensors tensors(data);
        const msda::Options &options = problem.spec.options;
        const msda::ForwardArgs forward = tensors.forward_args();
        const msda::BackwardArgs backward = tensors.backward_args();
        msda::BackwardArgs value_only = backward;
        value_only.grad_sampling_locations = {};
        value_only.grad_attention_weights = {};
        msda::BackwardArgs samples_only = backward;
        samples_only.grad_value = {};
        msda::Options value_options = options, samples_options = options;
        value_options.grad_sampling_locations = value_options.grad_attention_weights = false;
        samples_options.grad_value = false;

        const msda::ProblemSize size = msda::ProblemSize::of(backward, options);
        const msda::Plan plan(size, options), value_plan(size, value_options), samples_plan(size, samples_options);
        std::vector<std::byte> workspace(plan.workspace_size());
        ASSERT_GE(workspace.size(), value_plan.workspace_size());
        ASSERT_GE(workspace.size(), samples_plan.workspace_size());
        void *const ws = workspace.data();
        const std::size_t bytes = workspace.size();
        auto calls = [&] {
            plan.forward(forward, ws, bytes);
            value_plan.backward(value_only, ws, bytes);
            samples_plan.backward(samples_only, ws, bytes);
            plan.backward(backward, ws, bytes);
        };
        calls();

        const long counted = allocations_of([&] {
            for (int i = 0; i < 5; ++i) calls();
        });
        EXPECT_EQ(counted, 0) << "heap allocations in 5 rounds of forward and three backward calls";
        msda::testing::expect_matches_reference(data, msda::testing::canonical_results(tensors),
                                                tolerance(problem.spec.dtype));
    }
}

// Several threads: a call allocates only when more of its tasks run at
// once than in any call before, which stops happening once the plan is
// warm; most calls allocate nothing, and none allocates per task.
TEST(PlanAllocations, SeveralThreadsStopAllocatingOnceWarm) {
    MSDA_SKIP_WITHOUT_COUNTING();
    Threads four(4);
    const Problem problem = problems()[0];
    SCOPED_TRACE(problem.spec.describe());
    const ProblemData data(problem.spec);
    LibraryTensors tensors(data);
    const msda::Options &options = problem.spec.options;
    const msda::Plan plan(msda::ProblemSize::of(tensors.backward_args(), options), options);
    std::vector<std::byte> workspace(plan.workspace_size());
    auto call = [&] {
        plan.forward(tensors.forward_args(), workspace.data(), workspace.size());
        plan.backward(tensors.backward_args(), workspace.data(), workspace.size());
    };
    for (int i = 0; i < 5; ++i) call();
    constexpr int kCalls = 30;
    int calls_that_allocated = 0;
    long total = 0;
    for (int i = 0; i < kCalls; ++i) {
        const long counted = allocations_of(call);
        calls_that_allocated += counted > 0;
        total += counted;
    }
    // Each call runs tens of tasks, several scratch blocks each: allocating
    // per task would be hundreds of allocations per call.
    EXPECT_LE(calls_that_allocated, kCalls / 5) << total << " allocations in all";
    EXPECT_LE(total, 4 * 16) << "more than a few blocks per thread";
    msda::testing::expect_matches_reference(data, msda::testing::canonical_results(tensors),
                                            tolerance(problem.spec.dtype));
}

}  // namespace
