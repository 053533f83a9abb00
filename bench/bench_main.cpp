// msda_bench: msda's forward and backward on the canonical shapes and
// location distributions, beside the peers (peers.h), all in one run, with
// counters against the machine's floor (floor.h). See bench/README.md.
//
// Benchmarks are named op/shape/distribution/implementation, for example
// forward/M0/local/msda, and registered so that each shape's problem is
// generated once and the grid_sample peer runs before msda (its time feeds
// msda's speedup_vs_grid_sample counter). On the shapes of kHalfShapes, msda
// also runs with half-precision storage, after its float32 run (whose time
// feeds their vs_f32 counter): forward/M0/local/msda_f16, .../msda_bf16.
// After the canonical shapes come the GKA shapes (problem.h's gka_shapes()),
// msda's GKA operator (floor rounding, float32) beside the gka_torch peer,
// which runs first (its time feeds msda's speedup_vs_gka_torch counter):
// forward/GKA_G/local/gka_torch, forward/GKA_G/local/msda.
//
// Options (before Google Benchmark's own):
//   --threads N          threads for msda and every peer (default 2)
//   --shapes S0,M0,...   a subset of the canonical and GKA shapes (S0, S1,
//                        M0, M2, X, G, L1, GKA_G, GKA_BEV; default all)
//   --distributions local,uniform
//   --ops forward,backward,forward_backward
//   --peers grid_sample,cuda_port,gka_torch | none
//   --dtypes f32,f16,bf16  msda's storage dtypes (default all three; the
//                        half ones on kHalfShapes only; the peers are float32)
//   --device cpu|opencl|cuda  msda::Options::device of every msda plan
//                        (default cpu): opencl and cuda time msda on that
//                        device (its host-to-device copies included),
//                        float32 only
//   --atomic             msda::Options::deterministic = false on every plan
//                        (the GPU family's float-atomic grad_value)
//   --relayout automatic|always|never
//                        msda::Options::relayout of every msda plan (default
//                        automatic): whether value is copied head-major into
//                        the workspace first; never keeps value as given
//   --sample-order automatic|by_level|by_query
//                        msda::Options::sample_order of every msda plan
//                        (default automatic); each msda row records in its
//                        by_query counter whether the passes it times
//                        walked the samples query by query (1) or not (0)
//   --one-shot           time msda's one-shot calls (msda::forward and
//                        msda::backward, their workspace from msda's cache)
//                        instead of a Plan with the bench's own workspace
//   --huge-pages         advise every tensor and workspace of 2 MiB or more
//                        onto transparent huge pages (madvise), as PyTorch
//                        >= 2.2 does with THP_MEM_ALLOC_ENABLE=1; the
//                        LibTorch peers' own copies are left as LibTorch
//                        allocates them
//   --check-only         run the agreement check and exit
//   --count-calls N      time nothing: run one shape's (--shapes, one
//                        --distributions, one --ops of forward or backward)
//                        msda plan once, then N times inside
//                        msda_bench_counted_calls, for instruction counts
//                        under valgrind --tool=callgrind (bench/count_instructions.sh)
#include <benchmark/benchmark.h>

#include <msda/diagnostics.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "floor.h"
#include "peaks.h"
#include "msda/half.hpp"
#include "msda/msda.hpp"
#include "peers.h"
#include "problem.h"

namespace msda_bench {
namespace {

struct Settings {
    int threads = 2;
    std::set<std::string> shapes, distributions, ops;
    std::set<std::string> peers = {"grid_sample", "cuda_port", "gka_torch"};
    std::set<std::string> dtypes = {"f32", "f16", "bf16"};
    msda::Relayout relayout = msda::Relayout::automatic;
    msda::SampleOrder sample_order = msda::SampleOrder::automatic;
    msda::Device device = msda::Device::cpu;
    bool atomic = false;
    bool one_shot = false;
    bool huge_pages = false;
    bool check_only = false;
    int count_calls = 0;
};

// The shapes msda also runs in half precision.
const std::set<std::string> kHalfShapes = {"M0", "G"};

// msda's storage dtypes, in the order their benchmarks run (float32 first:
// the half rows' vs_f32 counter divides by its time).
constexpr msda::DType kDTypes[] = {msda::DType::f32, msda::DType::f16, msda::DType::bf16};

const char *dtype_id(msda::DType dtype) {
    switch (dtype) {
    case msda::DType::f16: return "f16";
    case msda::DType::bf16: return "bf16";
    default: return "f32";
    }
}

// The values of an enum option (--relayout, --sample-order) by name.
template <typename Enum>
using Choices = std::vector<std::pair<std::string, Enum>>;

const Choices<msda::Relayout> kRelayouts = {
    {"automatic", msda::Relayout::automatic}, {"always", msda::Relayout::always}, {"never", msda::Relayout::never}};
const Choices<msda::SampleOrder> kSampleOrders = {{"automatic", msda::SampleOrder::automatic},
                                                  {"by_level", msda::SampleOrder::by_level},
                                                  {"by_query", msda::SampleOrder::by_query}};
const Choices<msda::Device> kDevices = {
    {"cpu", msda::Device::cpu}, {"opencl", msda::Device::opencl}, {"cuda", msda::Device::cuda}};

template <typename Enum>
std::string choice_name(const Choices<Enum> &choices, Enum value) {
    for (const auto &[name, choice] : choices)
        if (choice == value) return name;
    return "?";
}

// The value named `text`, or a usage error (exit code 2) naming the choices.
template <typename Enum>
Enum parse_choice(const char *option, const Choices<Enum> &choices, const std::string &text) {
    std::string names;
    for (const auto &[name, choice] : choices) {
        if (name == text) return choice;
        names += (names.empty() ? "" : ", ") + name;
    }
    std::fprintf(stderr, "msda_bench: %s takes %s, not %s\n", option, names.c_str(), text.c_str());
    std::exit(2);
}

// Bytes of one element of the tensors stored in `dtype` (value,
// attention_weights, output and their gradients; locations are float32).
double element_bytes(msda::DType dtype) { return dtype == msda::DType::f32 ? 4.0 : 2.0; }

// The implementation part of msda's benchmark names: msda for float32 (the
// names of the peers' table), msda_f16 and msda_bf16 otherwise.
std::string msda_name(msda::DType dtype) {
    return dtype == msda::DType::f32 ? "msda" : std::string("msda_") + dtype_id(dtype);
}

std::set<std::string> split_list(const std::string &list) {
    std::set<std::string> items;
    std::stringstream stream(list);
    for (std::string item; std::getline(stream, item, ',');)
        if (!item.empty()) items.insert(item);
    return items;
}

bool selected(const std::set<std::string> &subset, const std::string &name) {
    return subset.empty() || subset.count(name) > 0;
}

// Every shape the bench times: the canonical (MSDA) ones, then GKA's.
std::vector<Shape> all_shapes() {
    std::vector<Shape> shapes = canonical_shapes();
    for (const Shape &shape : gka_shapes()) shapes.push_back(shape);
    return shapes;
}

// Exits with a usage error when a list option names something unknown.
void check_names(const char *option, const std::set<std::string> &names, const std::vector<std::string> &known) {
    for (const std::string &name : names) {
        if (std::find(known.begin(), known.end(), name) != known.end()) continue;
        std::string list;
        for (const std::string &k : known) list += (list.empty() ? "" : ", ") + k;
        std::fprintf(stderr, "msda_bench: %s takes %s, not %s\n", option, list.c_str(), name.c_str());
        std::exit(2);
    }
}

void check_settings(const Settings &settings) {
    std::vector<std::string> shapes;
    for (const Shape &shape : all_shapes()) shapes.push_back(shape.id);
    check_names("--shapes", settings.shapes, shapes);
    check_names("--distributions", settings.distributions, {"local", "uniform"});
    check_names("--ops", settings.ops, {"forward", "backward", "forward_backward"});
    check_names("--peers", settings.peers, {"grid_sample", "cuda_port", "gka_torch"});
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
        } else if (auto v = value("--dtypes")) {
            settings.dtypes = split_list(*v);
            for (const std::string &dtype : settings.dtypes) {
                if (dtype != "f32" && dtype != "f16" && dtype != "bf16") {
                    std::fprintf(stderr, "msda_bench: --dtypes takes f32, f16 and bf16, not %s\n", dtype.c_str());
                    std::exit(2);
                }
            }
        } else if (auto v = value("--device")) {
            settings.device = parse_choice("--device", kDevices, *v);
        } else if (arg == "--atomic") {
            settings.atomic = true;
        } else if (auto v = value("--relayout")) {
            settings.relayout = parse_choice("--relayout", kRelayouts, *v);
        } else if (auto v = value("--sample-order")) {
            settings.sample_order = parse_choice("--sample-order", kSampleOrders, *v);
        } else if (arg == "--one-shot") {
            settings.one_shot = true;
        } else if (arg == "--huge-pages") {
            settings.huge_pages = true;
        } else if (arg == "--check-only") {
            settings.check_only = true;
        } else if (auto v = value("--count-calls")) {
            settings.count_calls = std::max(1, std::atoi(v->c_str()));
        } else {
            argv[kept++] = argv[i];
        }
    }
    argc = kept;
    check_settings(settings);
    return settings;
}

// ---------------------------------------------------------------------------
// msda on a Problem, in the Problem's layouts, with the peers' options.

AlignedVector<std::uint16_t> to_half(const Floats &values, msda::DType dtype) {
    AlignedVector<std::uint16_t> half(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
        half[i] = dtype == msda::DType::bf16 ? msda::float_to_bf16(values[i]) : msda::float_to_f16(values[i]);
    return half;
}

Floats to_float(const AlignedVector<std::uint16_t> &half, msda::DType dtype) {
    Floats values(half.size());
    for (std::size_t i = 0; i < half.size(); ++i)
        values[i] = dtype == msda::DType::bf16 ? msda::bf16_to_float(half[i]) : msda::f16_to_float(half[i]);
    return values;
}

// With `dtype` f16 or bf16, value, attention_weights, grad_output and the
// results but the location gradient are stored in that dtype: the
// Problem's float32 values rounded to it (untimed, here), the locations
// float32 (the pairing msda recommends). On a GKA shape msda runs its GKA
// operator (Options::op = gka) with `rounding`; the backward gives no
// location gradient (its view absent, as GKA requires), and the results
// leave grad_sampling_locations empty. The plan's Options::relayout is
// `relayout` (--relayout), its Options::sample_order `sample_order`
// (--sample-order). With use_one_shot_calls() (--one-shot) the runner
// calls msda::forward and msda::backward with the same Options instead.
class MsdaRunner {
public:
    MsdaRunner(const Problem &problem, const Settings &settings, msda::DType dtype = msda::DType::f32,
               msda::Rounding rounding = msda::Rounding::floor)
        : dtype_(dtype) {
        using msda::DType;
        using msda::TensorView;
        const Shape &s = problem.shape;
        const bool gka = s.attention == Attention::gka;
        const std::int64_t levels = static_cast<std::int64_t>(s.levels.size());
        if (!gka) results_.grad_sampling_locations.resize(problem.sampling_locations.size());
        const void *value = problem.value.data(), *attention = problem.attention_weights.data(),
                   *grad_output = problem.grad_output.data();
        void *output, *grad_value, *grad_attention;
        if (dtype == DType::f32) {
            results_.output.resize(problem.grad_output.size());
            results_.grad_value.resize(problem.value.size());
            results_.grad_attention_weights.resize(problem.attention_weights.size());
            output = results_.output.data();
            grad_value = results_.grad_value.data();
            grad_attention = results_.grad_attention_weights.data();
        } else {
            value_ = to_half(problem.value, dtype);
            attention_ = to_half(problem.attention_weights, dtype);
            grad_output_ = to_half(problem.grad_output, dtype);
            output_.resize(problem.grad_output.size());
            grad_value_.resize(problem.value.size());
            grad_attention_.resize(problem.attention_weights.size());
            value = value_.data();
            attention = attention_.data();
            grad_output = grad_output_.data();
            output = output_.data();
            grad_value = grad_value_.data();
            grad_attention = grad_attention_.data();
        }
        const TensorView value_view =
            TensorView::contiguous(value, dtype, {s.batch, s.value_length(), s.heads, s.channels});
        const TensorView shapes = TensorView::contiguous(problem.spatial_shapes.data(), DType::i32, {levels, 2});
        const TensorView starts = TensorView::contiguous(problem.level_start_index.data(), DType::i32, {levels});
        const TensorView locations = TensorView::contiguous(problem.sampling_locations.data(), DType::f32,
                                                            {s.batch, s.queries, s.heads, levels, s.points, 2});
        auto per_sample = [&](const void *data) {
            return TensorView::contiguous(data, dtype, {s.batch, s.queries, s.heads, levels, s.points});
        };
        auto per_query = [&](const void *data) {
            return TensorView::contiguous(data, dtype, {s.batch, s.queries, s.heads * s.channels});
        };
        forward_ = {value_view, shapes, starts, locations, per_sample(attention), per_query(output)};
        backward_ = {value_view,
                     shapes,
                     starts,
                     locations,
                     per_sample(attention),
                     per_query(grad_output),
                     TensorView::contiguous(grad_value, dtype, {s.batch, s.value_length(), s.heads, s.channels}),
                     gka ? TensorView{}
                         : TensorView::contiguous(results_.grad_sampling_locations.data(), DType::f32,
                                                  {s.batch, s.queries, s.heads, levels, s.points, 2}),
                     per_sample(grad_attention)};
        msda::Options options;
        options.relayout = settings.relayout;
        options.sample_order = settings.sample_order;
        options.device = settings.device;
        options.deterministic = !settings.atomic;
        if (gka) {
            options.op = msda::Operator::gka;
            options.rounding = rounding;
        }
        options_ = options;
        plan_.emplace(msda::ProblemSize::of(forward_, options), options);
        workspace_.resize(plan_->workspace_size());
    }
    void use_one_shot_calls() { one_shot_ = true; }
    // Whether the forward, and the backward's per-sample gradients, walk
    // the samples query by query (Options::sample_order).
    bool forward_by_query() const {
        return msda::sample_order(forward_, options_) == msda::SampleOrder::by_query;
    }
    bool backward_by_query() const {
        return msda::sample_order(backward_, options_) == msda::SampleOrder::by_query;
    }
    void forward() {
        if (one_shot_) return msda::forward(forward_, options_);
        plan_->forward(forward_, workspace_.data(), workspace_.size());
    }
    void backward() {
        if (one_shot_) return msda::backward(backward_, options_);
        plan_->backward(backward_, workspace_.data(), workspace_.size());
    }
    // The latest results in float32 (a copy, for the agreement check).
    Results results() const {
        if (dtype_ == msda::DType::f32) return results_;
        Results results;
        results.output = to_float(output_, dtype_);
        results.grad_value = to_float(grad_value_, dtype_);
        results.grad_sampling_locations = results_.grad_sampling_locations;
        results.grad_attention_weights = to_float(grad_attention_, dtype_);
        return results;
    }

private:
    msda::DType dtype_;
    Results results_;  // float32 storage, and the location gradient in any case
    // Half storage: the inputs rounded, and the results.
    AlignedVector<std::uint16_t> value_, attention_, grad_output_, output_, grad_value_, grad_attention_;
    msda::ForwardArgs forward_;
    msda::BackwardArgs backward_;
    msda::Options options_;
    std::optional<msda::Plan> plan_;
    AlignedVector<std::byte> workspace_;
    bool one_shot_ = false;
};

// ---------------------------------------------------------------------------
// The agreement check: every peer computes what msda computes.

double max_relative_difference(const Floats &actual, const Floats &expected) {
    if (actual.size() != expected.size()) return INFINITY;
    double largest = 0.0, worst = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        largest = std::max(largest, static_cast<double>(std::abs(expected[i])));
        const double difference = std::abs(static_cast<double>(actual[i]) - expected[i]);
        worst = std::isnan(difference) ? INFINITY : std::max(worst, difference);
    }
    return largest > 0.0 ? worst / largest : worst;
}

// The peers of `settings.peers` that compute the problem's operator: for
// MSDA grid_sample and cuda_port, for GKA gka_torch (with `rounding`).
std::vector<std::unique_ptr<Peer>> make_peers(const Problem &problem, const Settings &settings,
                                              msda::Rounding rounding = msda::Rounding::floor) {
    std::vector<std::unique_ptr<Peer>> peers;
    if (problem.shape.attention == Attention::gka) {
#ifdef MSDA_BENCH_HAVE_TORCH
        if (settings.peers.count("gka_torch"))
            peers.push_back(make_gka_torch_peer(problem, settings.threads, rounding == msda::Rounding::nearest));
#else
        (void)rounding;
#endif
        return peers;
    }
#ifdef MSDA_BENCH_HAVE_TORCH
    if (settings.peers.count("grid_sample")) peers.push_back(make_grid_sample_peer(problem, settings.threads));
#endif
    if (settings.peers.count("cuda_port")) peers.push_back(make_cuda_port_peer(problem, settings.threads));
    return peers;
}

constexpr double kAgreementTolerance = 1e-4;

// GKA's edge cases, written over every fifth sample's location of a small
// GKA problem (absolute pixel coordinates): ties of round half to even
// (0.5, 1.5, 2.5, on the smallest level too), coordinates below 0 and past
// the level (clamped), huge and infinite ones (clamped) and NaN in x or y
// (the sample contributes nothing).
void add_gka_edge_cases(Problem &problem) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::pair<float, float> cases[] = {{0.5f, 1.5f},  {2.5f, 0.5f},   {1.5f, 2.5f},  {-0.5f, 1.5f},
                                             {-3.0f, 2.0f}, {1e3f, -1e3f},  {1e30f, 0.5f}, {inf, 1.0f},
                                             {1.0f, -inf},  {nan, 1.0f},    {1.0f, nan},   {-0.0f, 2.0f}};
    const std::size_t count = sizeof cases / sizeof cases[0];
    for (std::size_t sample = 0, i = 0; 2 * sample + 1 < problem.sampling_locations.size(); sample += 5, ++i) {
        problem.sampling_locations[2 * sample] = cases[i % count].first;
        problem.sampling_locations[2 * sample + 1] = cases[i % count].second;
    }
}

const char *rounding_name(msda::Rounding rounding) {
    return rounding == msda::Rounding::nearest ? "nearest" : "floor";
}

// Every peer's output and gradients against msda's on one problem (seed 7);
// for a GKA shape with `rounding`, and with add_gka_edge_cases when
// `edge_cases`. The location gradient is compared for MSDA only.
bool check_agreement(const Shape &shape, Distribution distribution, const Settings &settings,
                     msda::Rounding rounding = msda::Rounding::floor, bool edge_cases = false) {
    const bool gka = shape.attention == Attention::gka;
    Problem problem = make_problem(shape, distribution, 7);
    if (gka && edge_cases) add_gka_edge_cases(problem);
    MsdaRunner msda_runner(problem, settings, msda::DType::f32, rounding);
    msda_runner.forward();
    msda_runner.backward();
    const Results expected = msda_runner.results();
    bool agreed = true;
    for (const std::unique_ptr<Peer> &peer : make_peers(problem, settings, rounding)) {
        peer->forward();
        const Floats output = peer->results().output;
        peer->prepare_backward();
        peer->backward();
        const Results got = peer->results();
        std::vector<std::pair<const char *, double>> differences = {
            {"output", max_relative_difference(output, expected.output)},
            {"grad_value", max_relative_difference(got.grad_value, expected.grad_value)}};
        if (!gka)
            differences.emplace_back("grad_sampling_locations", max_relative_difference(got.grad_sampling_locations,
                                                                                        expected.grad_sampling_locations));
        differences.emplace_back("grad_attention_weights",
                                 max_relative_difference(got.grad_attention_weights, expected.grad_attention_weights));
        std::printf("agreement %s/%s %-11s", shape.id.c_str(), distribution_name(distribution), peer->name());
        for (const auto &[tensor, difference] : differences) {
            std::printf(" %s %.1e", tensor, difference);
            agreed = agreed && difference <= kAgreementTolerance;
        }
        if (gka) std::printf(" (%s%s)", rounding_name(rounding), edge_cases ? ", edge cases" : "");
        std::printf("\n");
    }
    return agreed;
}

// msda's half-precision storage computes what its float32 does, to within
// the rounding of the inputs and results: max difference / largest
// magnitude of each result against float32 msda on the same problem.
double half_tolerance(msda::DType dtype) { return dtype == msda::DType::bf16 ? 2e-2 : 5e-3; }

bool check_half_agreement(const Shape &shape, Distribution distribution, const Settings &settings) {
    const Problem problem = make_problem(shape, distribution, 7);
    MsdaRunner f32_runner(problem, settings);
    f32_runner.forward();
    f32_runner.backward();
    const Results expected = f32_runner.results();
    bool agreed = true;
    for (msda::DType dtype : kDTypes) {
        if (dtype == msda::DType::f32 || !settings.dtypes.count(dtype_id(dtype))) continue;
        MsdaRunner runner(problem, settings, dtype);
        runner.forward();
        runner.backward();
        const Results got = runner.results();
        const std::pair<const char *, double> differences[] = {
            {"output", max_relative_difference(got.output, expected.output)},
            {"grad_value", max_relative_difference(got.grad_value, expected.grad_value)},
            {"grad_sampling_locations",
             max_relative_difference(got.grad_sampling_locations, expected.grad_sampling_locations)},
            {"grad_attention_weights",
             max_relative_difference(got.grad_attention_weights, expected.grad_attention_weights)}};
        std::printf("agreement %s/%s %-11s", shape.id.c_str(), distribution_name(distribution),
                    msda_name(dtype).c_str());
        bool within = true;
        for (const auto &[tensor, difference] : differences) {
            std::printf(" %s %.1e", tensor, difference);
            within = within && difference <= half_tolerance(dtype);
        }
        std::printf(" (vs msda f32, tolerance %.0e)\n", half_tolerance(dtype));
        if (!within)
            std::fprintf(stderr, "msda_bench: %s disagrees with msda float32 beyond %.0e on %s/%s\n",
                         msda_name(dtype).c_str(), half_tolerance(dtype), shape.id.c_str(),
                         distribution_name(distribution));
        agreed = agreed && within;
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
            touched_ = -1;
        }
        return *problem_;
    }
    // The problem's touched_value_fraction (problem.h), counted once.
    double touched_value_fraction(const Shape &shape, Distribution distribution) {
        const Problem &problem = get(shape, distribution);
        if (touched_ < 0) touched_ = msda_bench::touched_value_fraction(problem);
        return touched_;
    }

private:
    std::unique_ptr<Problem> problem_;
    double touched_ = -1;  // of problem_; -1 until counted
};

struct Context {
    Settings settings;
    std::unique_ptr<FloorModel> floor;
    ProblemCache problems;
    // Mean seconds per iteration of the baseline peer (grid_sample for
    // MSDA, gka_torch for GKA) and of float32 msda, by
    // "op/shape/distribution".
    std::map<std::string, double> baseline_seconds, f32_seconds;
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

// The peer the speedup counter of a shape's rows divides by: grid_sample
// for MSDA, gka_torch for GKA.
const char *baseline_peer(const Shape &shape) {
    return shape.attention == Attention::gka ? "gka_torch" : "grid_sample";
}

// `dtype`: the storage dtype of the call's tensors (the peers: float32).
void set_counters(benchmark::State &state, const Shape &shape, Distribution distribution, Operator op,
                  const std::string &implementation, double seconds, msda::DType dtype = msda::DType::f32) {
    const double element = element_bytes(dtype);
    const double bytes = op == Operator::forward    ? forward_bytes(shape, element)
                         : op == Operator::backward ? backward_bytes(shape, element)
                                                    : forward_bytes(shape, element) + backward_bytes(shape, element);
    const double touched = context->problems.touched_value_fraction(shape, distribution);
    const Floor floor = context->floor->floor(shape, distribution, op, element, touched);
    state.counters["ns_per_sample"] = seconds * 1e9 / static_cast<double>(shape.samples());
    state.counters["GBps"] = bytes / seconds / 1e9;
    if (floor.seconds > 0) state.counters["floor_ratio"] = seconds / floor.seconds;
    // The share of value's rows the samples read, which the floor's
    // compulsory bytes count (problem.h's touched_value_fraction).
    state.counters["value_rows_read"] = touched;
    const std::string key = std::string(operator_name(op)) + "/" + shape.id + "/" + distribution_name(distribution);
    const std::string baseline = baseline_peer(shape);
    if (implementation == baseline) {
        context->baseline_seconds[key] = seconds;
    } else if (dtype != msda::DType::f32) {
        // Half rows: against float32 msda (the peers are float32 only).
        if (auto found = context->f32_seconds.find(key); found != context->f32_seconds.end())
            state.counters["vs_f32"] = seconds / found->second;
    } else if (auto found = context->baseline_seconds.find(key); found != context->baseline_seconds.end()) {
        state.counters["speedup_vs_" + baseline] = found->second / seconds;
    }
    if (implementation == "msda") context->f32_seconds[key] = seconds;
    state.SetLabel(floor.seconds > 0 ? "floor " + floor.bound : "no floor (the probe failed its check)");
}

void run_msda(benchmark::State &state, const Shape &shape, Distribution distribution, Operator op,
              msda::DType dtype) {
    const Problem &problem = context->problems.get(shape, distribution);
    msda::set_num_threads(context->settings.threads);
    MsdaRunner runner(problem, context->settings, dtype);
    if (context->settings.one_shot) runner.use_one_shot_calls();
    const double seconds = timed_loop(state, nullptr, [&] {
        if (op != Operator::backward) runner.forward();
        if (op != Operator::forward) runner.backward();
    });
    set_counters(state, shape, distribution, op, msda_name(dtype), seconds, dtype);
    // The order of the passes this row times: 1 when all walk by query.
    const bool by_query = (op == Operator::backward || runner.forward_by_query()) &&
                          (op == Operator::forward || runner.backward_by_query());
    state.counters["by_query"] = by_query ? 1 : 0;
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
    // The peers of each operator, in the order they run (the baseline
    // first: msda's speedup counter divides by its time).
    std::vector<std::string> msda_peers, gka_peers;
#ifdef MSDA_BENCH_HAVE_TORCH
    if (settings.peers.count("grid_sample")) msda_peers.push_back("grid_sample");
    if (settings.peers.count("gka_torch")) gka_peers.push_back("gka_torch");
#endif
    if (settings.peers.count("cuda_port")) msda_peers.push_back("cuda_port");
    for (const Shape &shape : all_shapes()) {
        if (!selected(settings.shapes, shape.id)) continue;
        const std::vector<std::string> &peers = shape.attention == Attention::gka ? gka_peers : msda_peers;
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
                for (msda::DType dtype : kDTypes) {
                    if (!settings.dtypes.count(dtype_id(dtype))) continue;
                    if (dtype != msda::DType::f32 && !kHalfShapes.count(shape.id)) continue;
                    benchmark::RegisterBenchmark(
                        (prefix + msda_name(dtype)).c_str(),
                        [=](benchmark::State &state) { run_msda(state, shape, distribution, op, dtype); })
                        ->UseManualTime()
                        ->Unit(benchmark::kMillisecond);
                }
            }
        }
    }
}

void add_machine_context(const FloorModel &floor, const Settings &settings) {
    const int threads = settings.threads;
    const MachineRates &r = floor.rates();
    auto text = [](double x) {
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%.4g", x);
        return std::string(buffer);
    };
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    benchmark::AddCustomContext("msda_version", msda::version());
    benchmark::AddCustomContext("msda_target", dispatch.selected.empty() ? "none: " + dispatch.error
                                                                          : dispatch.selected);
    benchmark::AddCustomContext("msda_target_reason", dispatch.reason);
    benchmark::AddCustomContext("cpu", dispatch.cpu);
    benchmark::AddCustomContext("threads", std::to_string(threads));
    benchmark::AddCustomContext("relayout", choice_name(kRelayouts, settings.relayout));
    benchmark::AddCustomContext("sample_order", choice_name(kSampleOrders, settings.sample_order));
    benchmark::AddCustomContext("device", choice_name(kDevices, settings.device));
    benchmark::AddCustomContext("deterministic", settings.atomic ? "false" : "true");
    benchmark::AddCustomContext("msda_calls", settings.one_shot ? "one-shot" : "plan");
    benchmark::AddCustomContext("huge_pages", settings.huge_pages ? "on" : "off");
    benchmark::AddCustomContext("probe_fma_gflops", text(r.fma_flops_per_s / 1e9));
    benchmark::AddCustomContext("probe_l1_GBps", text(r.l1_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_l2_GBps", text(r.l2_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_l3_GBps", text(r.l3_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_dram_GBps", text(r.dram_bytes_per_s / 1e9));
    benchmark::AddCustomContext("probe_latency_ns", text(r.latency_ns));
    // Each rate the floor uses, per core and cycle, beside its documented
    // peak; and whether floors were derived at all.
    const ProbeVerdict &verdict = floor.verdict();
    benchmark::AddCustomContext("probe_isa", r.isa);
    benchmark::AddCustomContext("probe_clock_GHz", text(r.clock_hz / 1e9));
    benchmark::AddCustomContext("peaks_of", verdict.peaks.microarchitecture);
    for (const RateCheck &check : verdict.checks) {
        if (check.peak <= 0) continue;
        std::string key = "per_core_cycle_" + check.name;
        std::replace(key.begin(), key.end(), ' ', '_');
        benchmark::AddCustomContext(key, text(check.per_core_cycle) + " " + check.unit + " (peak " + text(check.peak) +
                                             (check.problem.empty() ? ")" : "): " + check.problem));
    }
    benchmark::AddCustomContext("floors", verdict.refusal.empty() ? "derived from the probe"
                                                                   : "none: " + verdict.refusal);
#ifdef MSDA_BENCH_HAVE_TORCH
    benchmark::AddCustomContext("grid_sample_peer", "LibTorch " MSDA_BENCH_TORCH_VERSION);
#else
    benchmark::AddCustomContext("grid_sample_peer", "absent (built without LibTorch)");
#endif
#ifdef MSDA_BENCH_HAVE_TORCH
    benchmark::AddCustomContext("gka_torch_peer", "LibTorch " MSDA_BENCH_TORCH_VERSION);
#else
    benchmark::AddCustomContext("gka_torch_peer", "absent (built without LibTorch)");
#endif
}

}  // namespace
}  // namespace msda_bench

// The calls callgrind counts (--toggle-collect=msda_bench_counted_calls):
// everything `call` runs on this thread (one thread: --threads 1).
extern "C" __attribute__((noinline)) void msda_bench_counted_calls(void (*call)(void *), void *state, int calls) {
    for (int n = 0; n < calls; ++n) call(state);
}

namespace msda_bench {
namespace {

// --count-calls: one (shape, distribution, op), a warm-up call, then the
// counted ones.
int count_calls(const Settings &settings) {
    const std::vector<Shape> all = [] {
        std::vector<Shape> shapes = canonical_shapes();
        for (const Shape &shape : gka_shapes()) shapes.push_back(shape);
        return shapes;
    }();
    const Shape *shape = nullptr;
    for (const Shape &candidate : all) {
        if (settings.shapes.size() == 1 && settings.shapes.count(candidate.id)) shape = &candidate;
    }
    const bool local = settings.distributions.size() == 1 && settings.distributions.count("local");
    const bool uniform = settings.distributions.size() == 1 && settings.distributions.count("uniform");
    const bool forward = settings.ops.size() == 1 && settings.ops.count("forward");
    const bool backward = settings.ops.size() == 1 && settings.ops.count("backward");
    if (shape == nullptr || !(local || uniform) || !(forward || backward)) {
        std::fprintf(stderr, "msda_bench --count-calls: give one of --shapes, --distributions and --ops "
                             "(forward or backward)\n");
        return 2;
    }
    const Problem problem = make_problem(*shape, local ? Distribution::local : Distribution::uniform);
    MsdaRunner runner(problem, settings);
    auto call = forward ? +[](void *r) { static_cast<MsdaRunner *>(r)->forward(); }
                        : +[](void *r) { static_cast<MsdaRunner *>(r)->backward(); };
    call(&runner);  // the warm-up, not counted
    msda_bench_counted_calls(call, &runner, settings.count_calls);
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    std::printf("msda_bench --count-calls: %s/%s/%s, %d counted calls, %lld samples a call, C_h %lld, "
                "msda runs %s on %s\n",
                forward ? "forward" : "backward", shape->id.c_str(), local ? "local" : "uniform", settings.count_calls,
                static_cast<long long>(shape->samples()), static_cast<long long>(shape->channels),
                dispatch.selected.c_str(), dispatch.cpu.c_str());
    return 0;
}

// The bench: the agreement checks, then the timings.
int run(int argc, char **argv) {
    Context context_storage;
    context = &context_storage;
    context->settings = parse_settings(argc, argv);
    const Settings &settings = context->settings;
    msda::set_num_threads(settings.threads);
    set_huge_pages(settings.huge_pages);  // before any tensor is allocated
    if (settings.count_calls > 0) return count_calls(settings);

    // The peers must compute what msda computes, on a decoder and an
    // encoder-like problem in both distributions (GKA's peer on small
    // problems and GKA_G), and msda's half-precision
    // storage what its float32 does on small problems (one with the
    // canonical 8 heads of 32 channels, which the timed shapes' kernels are
    // specialised for), before anything is timed.
    Shape small{.id = "small", .batch = 2, .queries = 0, .heads = 3, .channels = 5, .points = 3,
                .levels = {{7, 9}, {3, 4}}};
    small.queries = small.value_length();
    Shape small_c32{.id = "small_c32", .batch = 2, .queries = 0, .heads = 8, .channels = 32, .points = 4,
                    .levels = {{12, 17}, {6, 9}, {3, 5}}};
    small_c32.queries = small_c32.value_length();
    bool agreed = true;
    for (const Shape &shape : {small, canonical_shapes().at(0)})
        for (Distribution distribution : {Distribution::local, Distribution::uniform})
            agreed = check_agreement(shape, distribution, settings) && agreed;
    // GKA: the gka_torch peer against msda's GKA on the small problems (both
    // roundings, with GKA's edge cases: ties, out-of-range, infinite and NaN
    // coordinates) and on GKA_G (floor, what is timed).
    Shape small_gka = small, small_c32_gka = small_c32;
    small_gka.id = "small_gka";
    small_c32_gka.id = "small_c32_gka";
    small_gka.attention = small_c32_gka.attention = Attention::gka;
    for (const Shape &shape : {small_gka, small_c32_gka})
        for (Distribution distribution : {Distribution::local, Distribution::uniform})
            for (msda::Rounding rounding : {msda::Rounding::floor, msda::Rounding::nearest})
                agreed = check_agreement(shape, distribution, settings, rounding, true) && agreed;
    for (Distribution distribution : {Distribution::local, Distribution::uniform})
        agreed = check_agreement(gka_shapes().at(0), distribution, settings) && agreed;
    bool half_agreed = true;
    for (const Shape &shape : {small, small_c32})
        for (Distribution distribution : {Distribution::local, Distribution::uniform})
            half_agreed = check_half_agreement(shape, distribution, settings) && half_agreed;
    if (!agreed) {
        std::fprintf(stderr, "msda_bench: a peer disagrees with msda beyond %.0e; nothing was timed\n",
                     kAgreementTolerance);
        return 1;
    }
    if (!half_agreed) {
        std::fprintf(stderr, "msda_bench: msda's half-precision storage disagrees with its float32; nothing was "
                             "timed\n");
        return 1;
    }
    if (settings.check_only) return 0;

    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    context->floor = std::make_unique<FloorModel>(settings.threads);
    add_machine_context(*context->floor, settings);
    register_benchmarks(settings);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}

}  // namespace
}  // namespace msda_bench

// A call msda refuses (a device that is not there, a dtype it has no code
// for on that device) ends the run with msda's message, not an abort.
int main(int argc, char **argv) {
    try {
        return msda_bench::run(argc, argv);
    } catch (const msda::Error &error) {
        std::fprintf(stderr, "msda_bench: %s; nothing more was timed\n", error.what());
        return 1;
    }
}
