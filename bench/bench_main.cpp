// msda_bench: msda's forward and backward on the canonical shapes and
// location distributions, beside the peers (peers.h), all in one run, with
// counters against the machine's floor (floor.h). See bench/README.md.
//
// Benchmarks are named op/shape/distribution/implementation, for example
// forward/M0/local/msda, and registered so that each shape's problem is
// generated once and the grid_sample peer runs before msda (its time feeds
// msda's speedup_vs_grid_sample counter).
//
// Options (before Google Benchmark's own):
//   --threads N          threads for msda and every peer (default 2)
//   --shapes S0,M0,...   a subset of the canonical shapes
//   --distributions local,uniform
//   --ops forward,backward,forward_backward
//   --peers grid_sample,cuda_port | none
//   --check-only         run the agreement check and exit
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "floor.h"
#include "msda/msda.hpp"
#include "peers.h"
#include "problem.h"

namespace msda_bench {
namespace {

struct Settings {
    int threads = 2;
    std::set<std::string> shapes, distributions, ops;
    std::set<std::string> peers = {"grid_sample", "cuda_port"};
    bool check_only = false;
};

std::set<std::string> split_list(const std::string &list) {
    std::set<std::string> items;
    std::stringstream stream(list);
    for (std::string item; std::getline(stream, item, ',');)
        if (!item.empty()) items.insert(item);
    return items;
}

// Takes this program's options out of argv, leaving Google Benchmark's.
Settings parse_settings(int &argc, char **argv) {
    Settings settings;
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](const char *name) -> std::optional<std::string> {
            const std::string prefix = std::string(name) + "=";
            if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
            if (arg == name && i + 1 < argc) return std::string(argv[++i]);
            return std::nullopt;
        };
        if (auto v = value("--threads")) {
            settings.threads = std::max(1, std::atoi(v->c_str()));
        } else if (auto v = value("--shapes")) {
            settings.shapes = split_list(*v);
        } else if (auto v = value("--distributions")) {
            settings.distributions = split_list(*v);
        } else if (auto v = value("--ops")) {
            settings.ops = split_list(*v);
        } else if (auto v = value("--peers")) {
            settings.peers = *v == "none" ? std::set<std::string>{} : split_list(*v);
        } else if (arg == "--check-only") {
            settings.check_only = true;
        } else {
            argv[kept++] = argv[i];
        }
    }
    argc = kept;
    return settings;
}

bool selected(const std::set<std::string> &subset, const std::string &name) {
    return subset.empty() || subset.count(name) > 0;
}

// ---------------------------------------------------------------------------
// msda on a Problem, in the Problem's layouts, with the peers' options.

class MsdaRunner {
public:
    explicit MsdaRunner(const Problem &problem) : problem_(problem) {
        const Shape &s = problem.shape;
        const std::int64_t levels = static_cast<std::int64_t>(s.levels.size());
        results_.output.resize(problem.grad_output.size());
        results_.grad_value.resize(problem.value.size());
        results_.grad_sampling_locations.resize(problem.sampling_locations.size());
        results_.grad_attention_weights.resize(problem.attention_weights.size());
        using msda::DType;
        using msda::TensorView;
        const TensorView value = TensorView::contiguous(problem.value.data(), DType::f32,
                                                        {s.batch, s.value_length(), s.heads, s.channels});
        const TensorView shapes = TensorView::contiguous(problem.spatial_shapes.data(), DType::i32, {levels, 2});
        const TensorView starts = TensorView::contiguous(problem.level_start_index.data(), DType::i32, {levels});
        const TensorView locations = TensorView::contiguous(problem.sampling_locations.data(), DType::f32,
                                                            {s.batch, s.queries, s.heads, levels, s.points, 2});
        const TensorView attention = TensorView::contiguous(problem.attention_weights.data(), DType::f32,
                                                            {s.batch, s.queries, s.heads, levels, s.points});
        auto per_query = [&](const float *data) {
            return TensorView::contiguous(data, DType::f32, {s.batch, s.queries, s.heads * s.channels});
        };
        forward_ = {value, shapes, starts, locations, attention, per_query(results_.output.data())};
        backward_ = {value,
                     shapes,
                     starts,
                     locations,
                     attention,
                     per_query(problem.grad_output.data()),
                     TensorView::contiguous(results_.grad_value.data(), DType::f32,
                                            {s.batch, s.value_length(), s.heads, s.channels}),
                     TensorView::contiguous(results_.grad_sampling_locations.data(), DType::f32,
                                            {s.batch, s.queries, s.heads, levels, s.points, 2}),
                     TensorView::contiguous(results_.grad_attention_weights.data(), DType::f32,
                                            {s.batch, s.queries, s.heads, levels, s.points})};
        plan_.emplace(msda::ProblemSize::of(forward_), msda::Options{});
        workspace_.resize(plan_->workspace_size());
    }
    void forward() { plan_->forward(forward_, workspace_.data(), workspace_.size()); }
    void backward() { plan_->backward(backward_, workspace_.data(), workspace_.size()); }
    const Results &results() const { return results_; }

private:
    const Problem &problem_;
    Results results_;
    msda::ForwardArgs forward_;
    msda::BackwardArgs backward_;
    std::optional<msda::Plan> plan_;
    std::vector<std::byte> workspace_;
};

// ---------------------------------------------------------------------------
// The agreement check: every peer computes what msda computes.

double max_relative_difference(const std::vector<float> &actual, const std::vector<float> &expected) {
    if (actual.size() != expected.size()) return INFINITY;
    double largest = 0.0, worst = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        largest = std::max(largest, static_cast<double>(std::abs(expected[i])));
        const double difference = std::abs(static_cast<double>(actual[i]) - expected[i]);
        worst = std::isnan(difference) ? INFINITY : std::max(worst, difference);
    }
    return largest > 0.0 ? worst / largest : worst;
}

std::vector<std::unique_ptr<Peer>> make_peers(const Problem &problem, const Settings &settings) {
    std::vector<std::unique_ptr<Peer>> peers;
#ifdef MSDA_BENCH_HAVE_TORCH
    if (settings.peers.count("grid_sample")) peers.push_back(make_grid_sample_peer(problem, settings.threads));
#endif
    if (settings.peers.count("cuda_port")) peers.push_back(make_cuda_port_peer(problem, settings.threads));
    return peers;
}

constexpr double kAgreementTolerance = 1e-4;

bool check_agreement(const Shape &shape, Distribution distribution, const Settings &settings) {
    const Problem problem = make_problem(shape, distribution, 7);
    MsdaRunner msda_runner(problem);
    msda_runner.forward();
    msda_runner.backward();
    const Results &expected = msda_runner.results();
    bool agreed = true;
    for (const std::unique_ptr<Peer> &peer : make_peers(problem, settings)) {
        peer->forward();
        const std::vector<float> output = peer->results().output;
        peer->prepare_backward();
        peer->backward();
        const Results got = peer->results();
        const std::pair<const char *, double> differences[] = {
            {"output", max_relative_difference(output, expected.output)},
            {"grad_value", max_relative_difference(got.grad_value, expected.grad_value)},
            {"grad_sampling_locations",
             max_relative_difference(got.grad_sampling_locations, expected.grad_sampling_locations)},
            {"grad_attention_weights",
             max_relative_difference(got.grad_attention_weights, expected.grad_attention_weights)}};
        std::printf("agreement %s/%s %-11s", shape.id.c_str(), distribution_name(distribution), peer->name());
        for (const auto &[tensor, difference] : differences) {
            std::printf(" %s %.1e", tensor, difference);
            agreed = agreed && difference <= kAgreementTolerance;
        }
        std::printf("\n");
    }
    return agreed;
}

// ---------------------------------------------------------------------------
// Benchmarks.

// One problem alive at a time: benchmarks of a (shape, distribution) run
// together, the next pair replaces it.
class ProblemCache {
public:
    const Problem &get(const Shape &shape, Distribution distribution) {
        if (!problem_ || problem_->shape.id != shape.id || problem_->distribution != distribution) {
            problem_.reset();
            problem_ = std::make_unique<Problem>(make_problem(shape, distribution));
        }
        return *problem_;
    }

private:
    std::unique_ptr<Problem> problem_;
};

struct Context {
    Settings settings;
    std::unique_ptr<FloorModel> floor;
    ProblemCache problems;
    // Mean seconds per iteration of the grid_sample peer, by "op/shape/distribution".
    std::map<std::string, double> grid_sample_seconds;
};
Context *context = nullptr;

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// Runs `step` once per iteration; `untimed` (may be empty) runs before each
// step outside the timing. Returns the mean seconds per iteration.
double timed_loop(benchmark::State &state, const std::function<void()> &untimed, const std::function<void()> &step) {
    double total = 0.0;
    for (auto _ : state) {
        if (untimed) untimed();
        const auto start = std::chrono::steady_clock::now();
        step();
        const double seconds = seconds_between(start, std::chrono::steady_clock::now());
        state.SetIterationTime(seconds);
        total += seconds;
    }
    return total / static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
}

void set_counters(benchmark::State &state, const Shape &shape, Distribution distribution, Operator op,
                  const std::string &implementation, double seconds) {
    const double bytes = op == Operator::forward    ? forward_bytes(shape)
                         : op == Operator::backward ? backward_bytes(shape)
                                                    : forward_bytes(shape) + backward_bytes(shape);
    const Floor floor = context->floor->floor(shape, distribution, op);
    state.counters["ns_per_sample"] = seconds * 1e9 / static_cast<double>(shape.samples());
    state.counters["GBps"] = bytes / seconds / 1e9;
    state.counters["floor_ratio"] = seconds / floor.seconds;
    const std::string key = std::string(operator_name(op)) + "/" + shape.id + "/" + distribution_name(distribution);
    if (implementation == "grid_sample") {
        context->grid_sample_seconds[key] = seconds;
    } else if (auto found = context->grid_sample_seconds.find(key); found != context->grid_sample_seconds.end()) {
        state.counters["speedup_vs_grid_sample"] = found->second / seconds;
    }
    state.SetLabel("floor " + floor.bound);
}

void run_msda(benchmark::State &state, const Shape &shape, Distribution distribution, Operator op) {
    const Problem &problem = context->problems.get(shape, distribution);
    msda::set_num_threads(context->settings.threads);
    MsdaRunner runner(problem);
    const double seconds = timed_loop(state, nullptr, [&] {
        if (op != Operator::backward) runner.forward();
        if (op != Operator::forward) runner.backward();
    });
    set_counters(state, shape, distribution, op, "msda", seconds);
}

void run_peer(benchmark::State &state, const Shape &shape, Distribution distribution, Operator op,
              const std::string &name) {
    const Problem &problem = context->problems.get(shape, distribution);
    Settings only = context->settings;
    only.peers = {name};
    std::vector<std::unique_ptr<Peer>> peers = make_peers(problem, only);
    Peer &peer = *peers.at(0);
    double seconds = 0.0;
    switch (op) {
    case Operator::forward:
        seconds = timed_loop(state, nullptr, [&] { peer.forward(); });
        break;
    case Operator::backward:
        seconds = timed_loop(state, [&] { peer.prepare_backward(); }, [&] { peer.backward(); });
        break;
    case Operator::forward_backward:
        seconds = timed_loop(state, nullptr, [&] {
            peer.prepare_backward();
            peer.backward();
        });
        break;
    }
    set_counters(state, shape, distribution, op, name, seconds);
}

void register_benchmarks(const Settings &settings) {
    const Operator ops[] = {Operator::forward, Operator::backward, Operator::forward_backward};
    std::vector<std::string> peers;
#ifdef MSDA_BENCH_HAVE_TORCH
    if (settings.peers.count("grid_sample")) peers.push_back("grid_sample");
#endif
    if (settings.peers.count("cuda_port")) peers.push_back("cuda_port");
    for (const Shape &shape : canonical_shapes()) {
        if (!selected(settings.shapes, shape.id)) continue;
        for (Distribution distribution : {Distribution::local, Distribution::uniform}) {
            if (!selected(settings.distributions, distribution_name(distribution))) continue;
            for (Operator op : ops) {
                if (!selected(settings.ops, operator_name(op))) continue;
                const std::string prefix =
                    std::string(operator_name(op)) + "/" + shape.id + "/" + distribution_name(distribution) + "/";
                for (const std::string &peer : peers) {
                    benchmark::RegisterBenchmark((prefix + peer).c_str(),
                                                 [=](benchmark::State &state) {
                                                     run_peer(state, shape, distribution, op, peer);
                                                 })
                        ->UseManualTime()
                        ->Unit(benchmark::kMillisecond);
                }
                benchmark::RegisterBenchmark(
                    (prefix + "msda").c_str(),
                    [=](benchmark::State &state) { run_msda(state, shape, distribution, op); })
                    ->UseManualTime()
                    ->Unit(benchmark::kMillisecond);
            }
        }
    }
}

void add_machine_context(const FloorModel &floor, int threads) {
    const MachineRates &r = floor.rates();
    auto text = [](double x) {
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%.4g", x);
        return std::string(buffer);
    };
    benchmark::AddCustomContext("threads", std::to_string(threads));
    benchmark::AddCustomContext("probe_fma_gflops", text(r.fma_flops_per_s / 1e9));
    benchmark::AddCustomContext("probe_l1_GBps", text(r.l1_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_l2_GBps", text(r.l2_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_l3_GBps", text(r.l3_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_dram_GBps", text(r.dram_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_latency_ns", text(r.latency_ns));
#ifdef MSDA_BENCH_HAVE_TORCH
    benchmark::AddCustomContext("grid_sample_peer", "LibTorch " MSDA_BENCH_TORCH_VERSION);
#else
    benchmark::AddCustomContext("grid_sample_peer", "absent (built without LibTorch)");
#endif
}

}  // namespace
}  // namespace msda_bench

int main(int argc, char **argv) {
    using namespace msda_bench;
    Context context_storage;
    context = &context_storage;
    context->settings = parse_settings(argc, argv);
    const Settings &settings = context->settings;
    msda::set_num_threads(settings.threads);

    // The peers must compute what msda computes, on a decoder and an
    // encoder-like problem in both distributions, before anything is timed.
    Shape small{.id = "small", .batch = 2, .queries = 0, .heads = 3, .channels = 5, .points = 3,
                .levels = {{7, 9}, {3, 4}}};
    small.queries = small.value_length();
    bool agreed = true;
    for (const Shape &shape : {small, canonical_shapes().at(0)})
        for (Distribution distribution : {Distribution::local, Distribution::uniform})
            agreed = check_agreement(shape, distribution, settings) && agreed;
    if (!agreed) {
        std::fprintf(stderr, "msda_bench: a peer disagrees with msda beyond %.0e; nothing was timed\n",
                     kAgreementTolerance);
        return 1;
    }
    if (settings.check_only) return 0;

    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    context->floor = std::make_unique<FloorModel>(settings.threads);
    add_machine_context(*context->floor, settings.threads);
    register_benchmarks(settings);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
