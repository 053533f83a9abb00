// `msda demo`: time forward and backward on one Deformable DETR encoder
// layer, then spot-check the results against the float64 reference.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "demo_check.h"
#include "demo_problem.h"

namespace msda_cli {

namespace {

constexpr std::uint64_t kProblemSeed = 20201008;  // any fixed seed: the demo must reproduce
constexpr std::int64_t kSampledQueries = 64;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// One untimed warm-up call (first touch of the outputs, thread pool start),
// then the median of `repeats` timed calls.
template <typename Call>
double median_milliseconds(int repeats, Call call) {
    call();
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
        const Clock::time_point start = Clock::now();
        call();
        times.push_back(1e3 * seconds_since(start));
    }
    std::ranges::sort(times);
    const std::size_t middle = times.size() / 2;
    return times.size() % 2 ? times[middle] : 0.5 * (times[middle - 1] + times[middle]);
}

// Compulsory traffic: every tensor read or written exactly once, float32.
//   forward:  4 * (|value| + |sampling_locations| + |attention_weights| + |output|)
//   backward: 4 * (|value| + |sampling_locations| + |attention_weights| + |grad_output|
//                  + |grad_value| + |grad_sampling_locations| + |grad_attention_weights|)
// |t| is t's element count; spatial_shapes and level_start_index (a few
// dozen bytes) are left out. Gradients have their tensor's size.
// (output has grad_output's size.)
double forward_bytes(const DemoProblem &p) {
    return 4.0 * static_cast<double>(p.value.size() + p.sampling_locations.size() + p.attention_weights.size() +
                                     p.grad_output.size());
}
double backward_bytes(const DemoProblem &p) {
    return forward_bytes(p) + 4.0 * static_cast<double>(p.value.size() + p.sampling_locations.size() +
                                                        p.attention_weights.size());
}

void print_problem(const DemoShape &shape, const DemoCommand &command) {
    std::printf("msda demo: one Deformable DETR encoder layer, float32\n");
    std::printf("  batch %lld, %lld heads x %lld channels, %lld points, levels", static_cast<long long>(shape.batch),
                static_cast<long long>(shape.heads), static_cast<long long>(shape.channels),
                static_cast<long long>(shape.points));
    for (const msda::reference::Level &level : shape.levels)
        std::printf(" %lldx%lld", static_cast<long long>(level.height), static_cast<long long>(level.width));
    std::printf("\n  N_q = L = %lld (every pixel of every level is a query)\n",
                static_cast<long long>(shape.value_length()));
    std::printf("  threads: %d%s\n", msda::num_threads(), command.threads > 0 ? "" : " (one per core)");
}

// The compiled code this CPU runs, or the reason no call can run (before
// the problem is built).
void print_target() {
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    if (!dispatch.error.empty()) throw msda::Error(dispatch.error);
    std::printf("  code: %s on %s\n", dispatch.selected.c_str(), dispatch.cpu.c_str());
}

void print_timing(const char *name, double milliseconds, double bytes, int repeats) {
    std::printf("%-9s median %9.3f ms over %d calls, %7.2f GB/s effective (%.1f MB compulsory)\n", name,
                milliseconds, repeats, bytes / (milliseconds * 1e-3) / 1e9, bytes / 1e6);
}

bool print_comparisons(const std::vector<Comparison> &comparisons) {
    bool all_passed = true;
    for (const Comparison &c : comparisons) {
        std::printf("  %-24s %-18s max rel error %.3e  %s\n", c.tensor.c_str(), c.scope.c_str(),
                    c.max_relative_error, c.passed() ? "PASS" : "FAIL");
        all_passed = all_passed && c.passed();
    }
    return all_passed;
}

}  // namespace

bool run_demo(const DemoCommand &command) {
    const DemoShape shape = detr_encoder_shape();
    print_problem(shape, command);
    print_target();

    const DemoProblem problem = make_demo_problem(shape, kProblemSeed);
    DemoResults results = make_results(problem);
    const msda::ForwardArgs forward = forward_args(problem, results);
    const msda::BackwardArgs backward = backward_args(problem, results);
    // One plan serves both operators: the default options ask for every gradient.
    const msda::Plan plan(msda::ProblemSize::of(forward), msda::Options{});
    std::vector<std::byte> workspace(plan.workspace_size());

    const double forward_ms = median_milliseconds(
        command.repeats, [&] { plan.forward(forward, workspace.data(), workspace.size()); });
    print_timing("forward", forward_ms, forward_bytes(problem), command.repeats);
    const double backward_ms = median_milliseconds(
        command.repeats, [&] { plan.backward(backward, workspace.data(), workspace.size()); });
    print_timing("backward", backward_ms, backward_bytes(problem), command.repeats);

    std::printf("check against the float64 reference (pass: max error <= %.0e of the tensor's largest magnitude):\n",
                kFloat32Tolerance);
    const Clock::time_point check_start = Clock::now();
    std::vector<Comparison> comparisons = {check_sampled_output(problem, results, kSampledQueries, kProblemSeed)};
    for (const Comparison &c : check_all_gradients(problem, results)) comparisons.push_back(c);
    const bool passed = print_comparisons(comparisons);
    std::printf("checks took %.1f s\n%s\n", seconds_since(check_start), passed ? "PASS" : "FAIL");
    return passed;
}

}  // namespace msda_cli
