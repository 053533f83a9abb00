// msda_sweep (`msda sweep`): searches the schedule knobs (schedules/knobs.h)
// of the forward, grad_value and per-sample gradient kernels for one class
// of CPU or device, with candidates JIT-compiled in this process from the
// same generators the build uses. Each candidate is checked against the
// float64 reference on a small problem, then timed on the given shapes
// against the shipped configuration in alternating rounds; Halide's
// autoschedulers run as candidates beside them. It writes a CSV of every
// candidate, a plot, a table, and the winners into schedules/tuned.cmake,
// which the next build reads. docs/sweep.md describes it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define MSDA_SWEEP_CALLGRIND 1
#endif

#include "arm.h"
#include "child.h"
#include "report.h"
#include "space.h"

namespace {

using namespace msda_sweep;
using msda::schedules::Family;
using msda::schedules::Knobs;
using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t interrupted = 0;
void on_interrupt(int) {
    interrupted = 1;
    std::signal(SIGINT, SIG_DFL);  // a second ^C ends it at once
}

struct Settings {
    std::string target = "x86", klass, op = "both", space, out = "sweep-out", winners, walk = "auto";
    std::string distribution = "local";
    std::vector<std::string> shapes = {"M0", "G"};
    double budget_minutes = 20;
    double autoscheduler_seconds = 0;  // 0: what is left of the kernel's share, 30 s to 10 min
    int rounds = 5, threads = 2, max_candidates = 0;
    std::uint64_t seed = 1;
    bool resume = false, report_only = false, count = false, autoschedulers = true;
    // --count-child: the process callgrind runs (one candidate, one shape);
    // --evaluate-child: the process an autoscheduler's candidate is
    // evaluated in (an autoscheduler's internal error ends its process).
    bool count_child = false, evaluate_child = false;
    std::string kernel, knobs, autoscheduler;
};

// The CPU classes of the family: (class, Halide target), best first.
std::vector<std::pair<std::string, std::string>> cpu_classes(const std::string &family) {
    std::vector<std::pair<std::string, std::string>> classes;
    std::istringstream tiers(family == "arm" ? MSDA_SWEEP_ARM_TIERS : MSDA_SWEEP_X86_TIERS);
    std::istringstream targets(family == "arm" ? MSDA_SWEEP_ARM_TARGETS : MSDA_SWEEP_X86_TARGETS);
    std::string tier, target;
    while (std::getline(tiers, tier, ',') && std::getline(targets, target, ',')) classes.emplace_back(tier, target);
    return classes;
}

bool host_runs(const Halide::Target &target) {
    const Halide::Target host = Halide::get_host_target();
    for (int f = 0; f < Halide::Target::FeatureEnd; f++) {
        const auto feature = static_cast<Halide::Target::Feature>(f);
        if (target.has_feature(feature) && !host.has_feature(feature)) return false;
    }
    return target.arch == host.arch;
}

// How a class's candidates are judged: checked and timed here, checked
// under an emulator (ARM under qemu), or compiled only.
enum class Mode { timed, emulated, compile_only };

struct Setup {
    std::string klass;
    Halide::Target target;
    Family family = Family::cpu;
    Mode mode = Mode::timed;
    std::string mode_note = "timed on this CPU";
};

Setup setup_for(const Settings &settings) {
    Setup setup;
    const std::string base = Halide::get_host_target().without_feature(Halide::Target::JIT).to_string();
    if (settings.target == "x86" || settings.target == "arm") {
        const auto classes = cpu_classes(settings.target);
        for (const auto &[tier, target] : classes) {
            Halide::Target candidate(target);
            const bool chosen = settings.klass.empty() ? settings.target == "arm" || host_runs(candidate)
                                                       : settings.klass == tier;
            if (chosen) {
                setup.klass = tier;
                setup.target = candidate.with_feature(Halide::Target::LargeBuffers);
                break;
            }
        }
        if (setup.klass.empty()) {
            std::string known;
            for (const auto &[tier, target] : classes) known += " " + tier;
            throw std::invalid_argument("msda sweep: --class " + settings.klass + " is none of the " + settings.target +
                                        " classes:" + known);
        }
        if (settings.target == "arm") {
            std::string why;
            if (arm_emulation_available(why)) {
                setup.mode = Mode::emulated;
                setup.mode_note = "ARM: compiled for " + setup.target.to_string() +
                                  ", checked against the reference under qemu-aarch64; not timed (an emulator's "
                                  "times say nothing of an ARM core's)";
            } else {
                setup.mode = Mode::compile_only;
                setup.mode_note = "ARM: compiled for " + setup.target.to_string() + " only, not checked: " + why;
            }
        } else if (!host_runs(setup.target.without_feature(Halide::Target::LargeBuffers))) {
            throw std::invalid_argument("msda sweep: this CPU cannot run the " + setup.klass + " class's code (" +
                                        setup.target.to_string() + "); sweep it on a CPU that can");
        }
    } else if (settings.target == "opencl") {
        setup.klass = "opencl";
        setup.family = Family::gpu;
        setup.target = Halide::Target(base).with_feature(Halide::Target::OpenCL).with_feature(Halide::Target::CLAtomics64);
        setup.mode_note = "OpenCL on this machine's platform (PoCL here: its times do not predict a GPU's)";
    } else if (settings.target == "cuda") {
        setup.klass = "cuda";
        setup.family = Family::gpu;
        setup.target = Halide::Target(base).with_feature(Halide::Target::CUDA).with_feature(Halide::Target::CUDACapability86);
        setup.mode = Mode::compile_only;
        setup.mode_note = "CUDA without a GPU: compiled to PTX, checked for compile success only";
        if (Halide::host_supports_target_device(setup.target)) {
            setup.mode = Mode::timed;
            setup.mode_note = "CUDA on this machine's GPU";
        }
    } else {
        throw std::invalid_argument("msda sweep: --target is x86, arm, opencl or cuda, not " + settings.target);
    }
    if (settings.target != "x86" && settings.target != "arm" && !settings.klass.empty() &&
        settings.klass != setup.klass) {
        throw std::invalid_argument("msda sweep: --class is for the CPU targets");
    }
    return setup;
}

// The walk msda's automatic sample order takes for a shape (runtime/src/
// policy.h): by query only for compile-time (N_l, N_p) variants
// (schedules/variants.cmake: C_h 32 with (4, 4) or (4, 8), and the
// forward's (3, 4)), clustered samples (local), and for the forward and
// the per-sample gradients a largest level past half this CPU's L2.
Walk automatic_walk(Kernel kernel, const msda_bench::Shape &shape, const std::string &distribution, Family family) {
    const std::int64_t levels = static_cast<std::int64_t>(shape.levels.size());
    const bool compiled = shape.channels == 32 && ((levels == 4 && (shape.points == 4 || shape.points == 8)) ||
                                                   (kernel == Kernel::forward && levels == 3 && shape.points == 4));
    if (family == Family::gpu || !compiled || distribution != "local") return Walk::by_level;
    if (kernel == Kernel::grad_value) return Walk::by_query;
    std::int64_t largest = 0;
    for (const msda_bench::Level &level : shape.levels) largest = std::max(largest, level.height * level.width);
    return largest * shape.channels * 4 > l2_bytes_of_this_cpu() / 2 ? Walk::by_query : Walk::by_level;
}

Walk walk_for(const Settings &settings, Kernel kernel, const msda_bench::Shape &shape, Family family) {
    if (settings.walk == "by_level" || family == Family::gpu) return Walk::by_level;
    if (settings.walk == "by_query") return Walk::by_query;
    return automatic_walk(kernel, shape, settings.distribution, family);
}

msda_bench::Shape shape_named(const std::string &id) {
    std::string known;
    for (const auto &list : {msda_bench::canonical_shapes()}) {
        for (const msda_bench::Shape &shape : list) {
            if (shape.id == id) return shape;
            known += " " + shape.id;
        }
    }
    // T0: a tiny problem for tests (a few hundred samples a head).
    if (id == "T0") {
        msda_bench::Shape shape;
        shape.id = "T0";
        shape.batch = 1;
        shape.queries = 300;
        shape.levels = {{12, 16}, {6, 8}, {3, 4}, {2, 2}};
        return shape;
    }
    throw std::invalid_argument("msda sweep: --shapes: no shape " + id + " (known:" + known + " T0)");
}

std::string self_path() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string clock_text(double seconds) {
    char text[32];
    const int s = static_cast<int>(std::max(0.0, seconds));
    std::snprintf(text, sizeof text, "%d:%02d", s / 60, s % 60);
    return text;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// One problem the sweep times on, with the shipped kernel's compiled code
// for it.
struct Workload {
    msda_bench::Shape shape;
    Walk walk;
    std::unique_ptr<Tensors> tensors;
    std::shared_ptr<Compiled> shipped;
};

double time_calls(const Compiled &compiled, Tensors &tensors, int calls) {
    const auto start = Clock::now();
    for (int i = 0; i < calls; i++) compiled.run(tensors);
    return seconds_since(start) / calls;
}

// The candidate's and the shipped code's times in alternating rounds (A B,
// then B A): median times and the median of the per-round ratios.
ShapeResult alternate(const Compiled &candidate, const Compiled &shipped, Tensors &tensors, int rounds) {
    candidate.run(tensors);
    const double first = time_calls(shipped, tensors, 1);
    const int calls = std::max(1, static_cast<int>(std::ceil(0.03 / std::max(first, 1e-6))));
    std::vector<double> ratios, candidate_times, shipped_times;
    for (int round = 0; round < rounds; round++) {
        double a, b;
        if (round % 2 == 0) {
            b = time_calls(shipped, tensors, calls);
            a = time_calls(candidate, tensors, calls);
        } else {
            a = time_calls(candidate, tensors, calls);
            b = time_calls(shipped, tensors, calls);
        }
        ratios.push_back(a / b);
        candidate_times.push_back(a);
        shipped_times.push_back(b);
    }
    return {median(ratios), 1e3 * median(candidate_times), 1e3 * median(shipped_times)};
}

class Sweep {
public:
    Sweep(const Settings &settings, const Setup &setup) : settings_(settings), setup_(setup) {}

    int run();

private:
    const Settings &settings_;
    const Setup &setup_;
    Report report_;
    Clock::time_point start_ = Clock::now();
    double resumed_seconds_ = 0;
    Knobs shipped_knobs_;  // the kernel being swept's
    double kernel_until_ = 0;  // and when its share of the budget ends

    Variant variant_for(Kernel kernel, Walk walk, const msda_bench::Shape &shape, const std::string &knobs,
                        const std::string &autoscheduler = "") const {
        Variant variant;
        variant.kernel = kernel;
        variant.walk = walk;
        variant.sizes = {.channels = static_cast<int>(shape.channels),
                         .levels = static_cast<int>(shape.levels.size()),
                         .points = static_cast<int>(shape.points)};
        variant.knobs = knobs;
        variant.autoscheduler = autoscheduler;
        return variant;
    }

    double elapsed() const { return resumed_seconds_ + seconds_since(start_); }

    // The kernel's problems (and the walks they take), with the shipped
    // configuration's code for each where the candidates are timed.
    std::vector<Workload> make_workloads(Kernel kernel, const Knobs &shipped, std::set<Walk> &walks) const;
    // An autoscheduler's candidate, evaluated by a child process.
    Candidate evaluate_in_child(Kernel kernel, const Knobs &shipped, Candidate candidate, int rounds);

    // Evaluates one candidate on every workload: compile, check, time.
    Candidate evaluate(Kernel kernel, std::vector<Workload> &workloads, Candidate candidate, int rounds);
    void sweep_kernel(Kernel kernel, const std::string &shipped_settings, double until, int kernel_index,
                      int kernel_count);
    void count_instructions(Kernel kernel, const std::vector<Workload> &workloads, const Candidate &candidate);

public:
    // --evaluate-child: one autoscheduler's candidate; prints its CSV row.
    int evaluate_child();
};

std::vector<Workload> Sweep::make_workloads(Kernel kernel, const Knobs &shipped, std::set<Walk> &walks) const {
    std::vector<Workload> workloads;
    for (const std::string &id : settings_.shapes) {
        Workload workload;
        workload.shape = shape_named(id);
        workload.walk = walk_for(settings_, kernel, workload.shape, setup_.family);
        walks.insert(workload.walk);
        if (setup_.mode == Mode::timed) {
            const auto distribution = settings_.distribution == "uniform" ? msda_bench::Distribution::uniform
                                                                          : msda_bench::Distribution::local;
            workload.tensors =
                std::make_unique<Tensors>(msda_bench::make_problem(workload.shape, distribution, 1), workload.walk);
            workload.shipped = std::make_shared<Compiled>(
                setup_.target, variant_for(kernel, workload.walk, workload.shape, msda::schedules::encode_knobs(shipped)));
        }
        workloads.push_back(std::move(workload));
    }
    return workloads;
}

// The address space an autoscheduler's child may take: Adams2019's search on
// grad_value took all of this machine's 24 GiB until the kernel's OOM killer
// ended it.
constexpr unsigned long long kAutoschedulerMemory = 8ull << 30;

Candidate Sweep::evaluate_in_child(Kernel kernel, const Knobs &shipped, Candidate candidate, int rounds) {
    // What is left of the kernel's share of the budget, 30 s to 10 min: an
    // autoscheduler's search can take longer than the whole sweep.
    const unsigned time_limit = static_cast<unsigned>(settings_.autoscheduler_seconds > 0
                                                          ? settings_.autoscheduler_seconds
                                                          : std::clamp(kernel_until_ - elapsed(), 30.0, 600.0));
    const auto start = Clock::now();
    std::string shapes;
    for (const std::string &shape : settings_.shapes) shapes += (shapes.empty() ? "" : ",") + shape;
    const ChildResult child = run_child(
        {self_path(), "--evaluate-child", "--target", settings_.target, "--class", setup_.klass, "--kernel",
         kernel_name(kernel), "--shapes", shapes, "--walk", settings_.walk, "--distribution", settings_.distribution,
         "--rounds", std::to_string(rounds), "--threads", std::to_string(settings_.threads), "--knobs",
         msda::schedules::encode_knobs(shipped), "--autoscheduler", candidate.autoscheduler, "--out", settings_.out},
        settings_.out, {}, time_limit, kAutoschedulerMemory);
    const std::size_t at = child.output.rfind("result:");
    Candidate evaluated;
    if (child.status == 0 && at != std::string::npos &&
        report_.parse(child.output.substr(at + 7, child.output.find('\n', at) - at - 7), evaluated)) {
        evaluated.id = candidate.id;
        evaluated.source = candidate.source;
        evaluated.seconds = seconds_since(start);
        return evaluated;
    }
    std::string errors = child.errors;
    std::replace(errors.begin(), errors.end(), '\n', ' ');
    if (child.status == 128 + SIGALRM) {
        candidate.check = "failed: " + candidate.autoscheduler + " ran past its time limit (" +
                          std::to_string(time_limit) + " s)";
    } else if (child.status == 128 + SIGKILL) {
        candidate.check = "failed: " + candidate.autoscheduler + " was killed (SIGKILL: out of memory)";
    } else {
        // Its own message, without the C++ runtime's preamble.
        const std::string preamble = "terminate called after throwing an instance of ";
        if (errors.rfind(preamble, 0) == 0) errors = errors.substr(preamble.size());
        candidate.check = "failed: " + candidate.autoscheduler + " (status " + std::to_string(child.status) +
                          "): " + errors;
    }
    candidate.seconds = seconds_since(start);
    return candidate;
}

int Sweep::evaluate_child() {
    Kernel kernel = Kernel::forward;
    for (Kernel k : all_kernels()) {
        if (settings_.kernel == kernel_name(k)) kernel = k;
    }
    report_.configure(settings_.shapes, setup_.klass);
    const Knobs shipped =
        msda::schedules::knobs_for_target(setup_.target, settings_.knobs.empty() ? "" : "all@" + settings_.knobs);
    std::set<Walk> walks;
    std::vector<Workload> workloads = make_workloads(kernel, shipped, walks);
    Candidate candidate;
    candidate.kernel = kernel_name(kernel);
    candidate.source = "autoscheduler";
    candidate.autoscheduler = settings_.autoscheduler;
    candidate.knobs = shipped;
    candidate = evaluate(kernel, workloads, candidate, settings_.rounds);
    std::cout << "result:" << report_.row(candidate) << "\n";
    return 0;
}

Candidate Sweep::evaluate(Kernel kernel, std::vector<Workload> &workloads, Candidate candidate, int rounds) {
    if (!candidate.autoscheduler.empty() && !settings_.evaluate_child) {
        return evaluate_in_child(kernel, shipped_knobs_, candidate, rounds);
    }
    const auto start = Clock::now();
    const std::string knobs = msda::schedules::encode_knobs(candidate.knobs);
    // One compiled candidate per walk and compile-time sizes: shapes with
    // other N_l or N_p (X's 8 points beside M0's 4) are other variants.
    std::map<std::string, std::shared_ptr<Compiled>> compiled;
    std::set<std::string> checked;
    const auto key_of = [](const Variant &variant) {
        return std::string(walk_name(variant.walk)) + " " + std::to_string(variant.sizes.channels) + " " +
               std::to_string(variant.sizes.levels) + " " + std::to_string(variant.sizes.points);
    };
    const auto variant_of = [&](const Workload &workload) {
        return variant_for(kernel, workload.walk, workload.shape, knobs, candidate.autoscheduler);
    };
    try {
        for (Workload &workload : workloads) {
            const Variant variant = variant_of(workload);
            const std::string key = key_of(variant);
            if (setup_.mode == Mode::compile_only) {
                const std::string object = settings_.out + "/candidate.o";
                const auto compile_start = Clock::now();
                compile_to_object(setup_.target, variant, object);
                candidate.compile_seconds += seconds_since(compile_start);
                continue;
            }
            if (setup_.mode == Mode::emulated) {
                if (checked.count(key)) continue;
                checked.insert(key);
                const EmulatedArm arm(setup_.target, variant,
                                      settings_.out + "/arm/" + candidate.kernel + "-" + std::to_string(candidate.id) +
                                          "-" + walk_name(workload.walk) + "-" +
                                          std::to_string(variant.sizes.levels) + "x" +
                                          std::to_string(variant.sizes.points));
                candidate.compile_seconds += arm.compile_seconds();
                const std::string verdict = check_against_reference([&](Tensors &t) { arm.run(t); }, variant);
                if (!verdict.empty()) {
                    candidate.check = "wrong: " + verdict;
                    break;
                }
                continue;
            }
            std::shared_ptr<Compiled> &code = compiled[key];
            if (!code) {
                code = std::make_shared<Compiled>(setup_.target, variant);
                candidate.compile_seconds += code->compile_seconds();
                const std::string verdict = check_against_reference([&](Tensors &t) { code->run(t); }, variant);
                if (!verdict.empty()) {
                    candidate.check = "wrong: " + verdict;
                    break;
                }
            }
        }
    } catch (const std::exception &error) {
        std::string message = error.what();
        std::replace(message.begin(), message.end(), '\n', ' ');
        candidate.check = "failed: " + message.substr(0, 300);
    }
    if (candidate.check.empty()) {
        candidate.check = "ok";
        if (setup_.mode == Mode::timed) {
            double log_sum = 0;
            for (Workload &workload : workloads) {
                ShapeResult result =
                    alternate(*compiled.at(key_of(variant_of(workload))), *workload.shipped, *workload.tensors, rounds);
                candidate.shapes[workload.shape.id] = result;
                log_sum += std::log(result.ratio);
            }
            candidate.score = std::exp(log_sum / workloads.size());
        }
    }
    candidate.seconds = seconds_since(start);
    return candidate;
}

void Sweep::sweep_kernel(Kernel kernel, const std::string &shipped_settings, double until, int kernel_index,
                         int kernel_count) {
    const std::string name = kernel_name(kernel);
    const Knobs shipped_knobs = knobs_from_settings(shipped_settings);
    shipped_knobs_ = shipped_knobs;
    kernel_until_ = until;
    std::set<Walk> walks;
    std::vector<Workload> workloads = make_workloads(kernel, shipped_knobs, walks);
    std::string walk_text;
    for (const Workload &workload : workloads) {
        const StagedLayouts staged = staged_layouts(workload.shape, workload.walk);
        const bool head_major = kernel == Kernel::grad_value ? staged.grad_value_head_major : staged.value_head_major;
        walk_text += " " + workload.shape.id + " " + walk_name(workload.walk) +
                     (!head_major                   ? ""
                      : kernel == Kernel::grad_value ? " (grad_value head-major)"
                                                     : " (value head-major)");
    }
    std::cout << "sweep: " << name << " (" << kernel_index + 1 << "/" << kernel_count << "):" << walk_text
              << "; shipped " << (shipped_settings.empty() ? "family defaults" : shipped_settings) << "\n";

    const bool cuda = setup_.target.has_feature(Halide::Target::CUDA);
    Space space = Space::for_kernel(kernel, walks, setup_.family, cuda,
                                    setup_.family == Family::cpu ? setup_.target.natural_vector_size<float>() : 0);
    if (!settings_.space.empty()) space.override_from(settings_.space);

    std::set<std::string> seen;
    std::vector<const Candidate *> ranked;  // evaluated and correct, best first
    auto remember = [&](const Candidate &candidate) {
        const Candidate &kept = report_.add(candidate);
        seen.insert(kept.knobs_text);
        if (kept.check == "ok" && kept.autoscheduler.empty()) {
            ranked.push_back(&kept);
            std::stable_sort(ranked.begin(), ranked.end(),
                             [](const Candidate *a, const Candidate *b) { return a->score < b->score; });
        }
    };
    for (const Candidate &previous : report_.candidates_of(name)) {
        seen.insert(previous.knobs_text);
        if (previous.check == "ok" && previous.autoscheduler.empty()) ranked.push_back(&previous);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Candidate *a, const Candidate *b) { return a->score < b->score; });

    std::mt19937_64 rng(settings_.seed * 1000003u + static_cast<unsigned>(kernel) * 7919u + seen.size());
    auto make = [&](const Knobs &knobs, const std::string &source, const std::string &autoscheduler = "") {
        Candidate candidate;
        candidate.kernel = name;
        candidate.id = report_.next_id(name);
        candidate.source = source;
        candidate.knobs = knobs;
        candidate.knobs_text = autoscheduler.empty() ? msda::schedules::describe_knobs(knobs) : "";
        candidate.autoscheduler = autoscheduler;
        return candidate;
    };
    auto progress = [&](const Candidate &candidate) {
        const double best = ranked.empty() ? 1.0 : ranked.front()->score;
        std::cout << "  [" << clock_text(elapsed()) << " of " << clock_text(settings_.budget_minutes * 60) << ", ETA "
                  << clock_text(settings_.budget_minutes * 60 - elapsed()) << "] " << name << " #" << candidate.id
                  << " " << (candidate.autoscheduler.empty() ? candidate.source : candidate.autoscheduler) << " "
                  << (candidate.knobs_text.empty() ? "-" : candidate.knobs_text) << ": "
                  << (candidate.check == "ok" && setup_.mode == Mode::timed
                          ? std::to_string(candidate.score).substr(0, 5) + "x the shipped time"
                          : candidate.check.substr(0, 160))
                  << (setup_.mode == Mode::timed ? "; best " + std::to_string(best).substr(0, 5) : std::string())
                  << "\n"
                  << std::flush;
    };

    // The shipped configuration first (its own ratio is 1 by definition:
    // this row records its check and times).
    if (!seen.count(msda::schedules::describe_knobs(shipped_knobs))) {
        Candidate shipped = evaluate(kernel, workloads, make(shipped_knobs, "shipped"), 1);
        for (auto &[shape, result] : shipped.shapes) result = {1.0, result.shipped_ms, result.shipped_ms};
        shipped.score = 1.0;
        remember(shipped);
        progress(report_.candidates_of(name).back());
    }
    // The autoschedulers, once each.
    if (settings_.autoschedulers) {
        const std::vector<std::string> names = setup_.family == Family::gpu
                                                   ? std::vector<std::string>{"Anderson2021"}
                                                   : std::vector<std::string>{"Adams2019", "Li2018", "Mullapudi2016"};
        for (const std::string &autoscheduler : names) {
            if (interrupted || elapsed() > until) break;
            if (report_.has_autoscheduler(name, autoscheduler)) continue;
            const Candidate evaluated =
                evaluate(kernel, workloads, make(shipped_knobs, "autoscheduler", autoscheduler), settings_.rounds);
            remember(evaluated);
            progress(report_.candidates_of(name).back());
        }
    }
    // Random candidates, then mutations of the best.
    int made = 0;
    while (!interrupted && elapsed() < until &&
           (settings_.max_candidates == 0 || report_.searched(name) < settings_.max_candidates)) {
        Knobs knobs;
        std::string source;
        for (int attempt = 0; attempt < 50; attempt++) {
            const bool explore = ranked.size() < 6 || std::uniform_int_distribution<int>(0, 9)(rng) == 0;
            if (explore) {
                knobs = space.random(rng, shipped_knobs);
                source = "random";
            } else {
                const std::size_t parents = std::min<std::size_t>(4, ranked.size());
                knobs = space.mutate(rng, ranked[std::uniform_int_distribution<std::size_t>(0, parents - 1)(rng)]->knobs);
                source = "mutation";
            }
            if (!seen.count(msda::schedules::describe_knobs(knobs))) break;
        }
        if (seen.count(msda::schedules::describe_knobs(knobs))) break;  // the space is exhausted
        remember(evaluate(kernel, workloads, make(knobs, source), settings_.rounds));
        progress(report_.candidates_of(name).back());
        made++;
    }

    // The best, measured again with twice the rounds: a winner must beat
    // the shipped configuration by 1% on the geometric mean of the shapes.
    if (setup_.mode != Mode::timed || ranked.empty()) return;
    const Candidate *best = ranked.front();
    if (best->source == "shipped" || best->score >= 0.99 || interrupted) {
        report_.set_winner(name, nullptr, shipped_settings);
    } else {
        Candidate confirmation = evaluate(kernel, workloads, make(best->knobs, "confirmation"), 2 * settings_.rounds);
        remember(confirmation);
        progress(report_.candidates_of(name).back());
        const Candidate &confirmed = report_.candidates_of(name).back();
        report_.set_winner(name, confirmed.check == "ok" && confirmed.score < 0.99 ? &confirmed : nullptr,
                           shipped_settings);
    }
    // The shipped configuration's instructions, and the winner's.
    if (settings_.count && !interrupted) {
        for (const Candidate &candidate : report_.candidates_of(name)) {
            if (candidate.source == "shipped") count_instructions(kernel, workloads, candidate);
        }
        if (const Candidate *winner = report_.winner(name)) count_instructions(kernel, workloads, *winner);
    }
}

// Instructions a sample of the candidate's code on each shape, counted by
// callgrind in a child process (one thread), where only the kernel's calls
// are instrumented.
void Sweep::count_instructions(Kernel kernel, const std::vector<Workload> &workloads, const Candidate &candidate) {
    for (const Workload &workload : workloads) {
        const std::string output = settings_.out + "/callgrind.out";
        std::vector<std::string> words = {"valgrind", "--tool=callgrind", "--instr-atstart=no",
                                          "--callgrind-out-file=" + output, "/proc/self/exe"};
        words[4] = self_path();
        for (const std::string &word : {std::string("--count-child"), std::string("--class"), setup_.klass,
                                        std::string("--kernel"), std::string(kernel_name(kernel)),
                                        std::string("--walk"), std::string(walk_name(workload.walk)),
                                        std::string("--shapes"), workload.shape.id, std::string("--distribution"),
                                        settings_.distribution, std::string("--knobs"),
                                        msda::schedules::encode_knobs(candidate.knobs)}) {
            words.push_back(word);
        }
        std::cout << "  counting " << kernel_name(kernel) << " #" << candidate.id << " on " << workload.shape.id
                  << " under callgrind\n"
                  << std::flush;
        const ChildResult child = run_child(words, settings_.out, {{"HL_NUM_THREADS", "1"}});
        std::ifstream in(output);
        std::string line;
        double total = -1;
        while (std::getline(in, line)) {
            if (line.rfind("totals:", 0) == 0 || line.rfind("summary:", 0) == 0) total = std::stod(line.substr(line.find(':') + 1));
        }
        if (child.status != 0 || total < 0) {
            std::cout << "  callgrind failed (status " << child.status << "): no count: " << child.errors << "\n";
            continue;
        }
        report_.add_count(kernel_name(kernel), candidate.id, workload.shape.id, total / workload.shape.samples());
    }
}

int Sweep::run() {
    std::filesystem::create_directories(settings_.out);
    const std::string csv = settings_.out + "/candidates.csv";
    report_.configure(settings_.shapes, setup_.klass);
    if (settings_.report_only) {
        report_.read_csv(csv);
        report_.infer_winners();
        report_.write_table(settings_.out + "/table.md", setup_.mode_note);
        report_.write_plot(settings_.out + "/plot.svg");
        std::cout << "sweep: " << settings_.out << "/table.md and plot.svg from " << csv << "\n";
        return 0;
    }
    if (settings_.resume) {
        resumed_seconds_ = report_.read_csv(csv);
        std::cout << "sweep: resumed " << report_.size() << " candidates (" << clock_text(resumed_seconds_)
                  << " spent) from " << csv << "\n";
    } else if (std::filesystem::exists(csv)) {
        throw std::invalid_argument("msda sweep: " + csv + " exists: --resume to go on with it, or another --out");
    }
    report_.open_csv(csv);
    std::cout << "sweep: " << setup_.klass << " (" << setup_.target.to_string() << "); " << setup_.mode_note
              << "; budget " << settings_.budget_minutes << " min, " << settings_.threads << " threads\n";

    std::vector<Kernel> kernels;
    if (settings_.op != "backward") kernels.push_back(Kernel::forward);
    if (settings_.op != "forward") {
        kernels.push_back(Kernel::grad_value);
        kernels.push_back(Kernel::grad_sample);
    }
    const std::vector<TunedRow> tuned = read_tuned(settings_.winners);
    const double budget = settings_.budget_minutes * 60;
    for (std::size_t k = 0; k < kernels.size() && !interrupted; k++) {
        std::string shipped;
        for (const TunedRow &row : tuned) {
            if (row.klass == setup_.klass && row.schedule == kernel_name(kernels[k])) shipped = row.settings;
        }
        // Each kernel its share of what is left.
        const double until = elapsed() + (budget - elapsed()) / static_cast<double>(kernels.size() - k);
        sweep_kernel(kernels[k], shipped, until, static_cast<int>(k), static_cast<int>(kernels.size()));
    }

    report_.write_table(settings_.out + "/table.md", setup_.mode_note);
    report_.write_plot(settings_.out + "/plot.svg");
    if (interrupted) {
        std::cout << "sweep: interrupted; " << csv << " holds what was measured: --resume goes on from it\n";
        return 130;
    }
    if (setup_.mode == Mode::timed) {
        std::vector<TunedRow> rows = read_tuned(settings_.winners);
        report_.merge_winners(rows);
        write_tuned(settings_.winners, tuned_header(settings_.winners), rows);
        std::cout << "sweep: winners in " << settings_.winners << " (the next build ships them)\n";
    } else {
        std::cout << "sweep: nothing timed: " << settings_.winners << " unchanged\n";
    }
    std::cout << "sweep: " << csv << ", " << settings_.out << "/table.md, " << settings_.out << "/plot.svg\n";
    return 0;
}

// The callgrind child: one kernel on one shape, counted after a warm call.
int count_child(const Settings &settings, const Setup &setup) {
    Kernel kernel = Kernel::forward;
    for (Kernel k : all_kernels()) {
        if (settings.kernel == kernel_name(k)) kernel = k;
    }
    const msda_bench::Shape shape = shape_named(settings.shapes.at(0));
    Variant variant;
    variant.kernel = kernel;
    variant.walk = settings.walk == "by_query" ? Walk::by_query : Walk::by_level;
    variant.sizes = {.channels = static_cast<int>(shape.channels), .levels = static_cast<int>(shape.levels.size()),
                     .points = static_cast<int>(shape.points)};
    variant.knobs = settings.knobs;
    Compiled compiled(setup.target, variant);
    Tensors tensors(msda_bench::make_problem(
                        shape, settings.distribution == "uniform" ? msda_bench::Distribution::uniform
                                                                  : msda_bench::Distribution::local,
                        1),
                    variant.walk);
    compiled.run(tensors);
#ifdef MSDA_SWEEP_CALLGRIND
    CALLGRIND_START_INSTRUMENTATION;
    compiled.run(tensors);
    CALLGRIND_STOP_INSTRUMENTATION;
    return 0;
#else
    std::cerr << "msda sweep: built without valgrind's callgrind.h: --count is not available\n";
    return 1;
#endif
}

// Halide's compile-time errors in an --evaluate-child: written where the
// parent reads them, then the end of the process.
struct ReportThenAbort : Halide::CompileTimeErrorReporter {
    void warning(const char *) override {}
    [[noreturn]] void error(const char *message) override {
        std::cerr << message << std::flush;
        std::abort();
    }
};

// The knob table, as docs/knobs.md holds it (a test compares the two).
void list_knobs() {
    std::cout << "| knob | family | range | default | what it sets |\n|---|---|---|---|---|\n";
    const Knobs defaults;
    for (const msda::schedules::KnobSpec &spec : msda::schedules::knob_specs()) {
        std::cout << "| " << spec.name << " | " << (spec.family == Family::cpu ? "CPU" : "GPU") << " | "
                  << (spec.zero_means_target ? "0, or " : "") << (spec.power_of_two ? "a power of two in " : "") << "["
                  << spec.low << ", " << spec.high << "] | " << defaults.*(spec.field) << " | " << spec.what << " |\n";
    }
}

}  // namespace

int main(int argc, char **argv) {
    Settings settings;
    CLI::App app{"msda sweep: search the schedule knobs of msda's kernels for one CPU class or device"};
    app.add_option("--target", settings.target, "x86 | arm | opencl | cuda")->capture_default_str();
    app.add_option("--class", settings.klass,
                   "the CPU class (a tier: x86-64, avx2, avx512_skylake, avx512_zen4; arm-64, arm_fp16); default: "
                   "the best this CPU runs");
    app.add_option("--shapes", settings.shapes, "the bench's shapes to time on (S0 S1 M0 M2 X G L1, or T0)")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--op", settings.op, "forward | backward | both")->capture_default_str();
    app.add_option("--budget", settings.budget_minutes, "minutes for the whole sweep")->capture_default_str();
    app.add_option("--space", settings.space, "a file of `knob value value ...` lines that replace the default ranges");
    app.add_option("--out", settings.out, "the folder of candidates.csv, table.md and plot.svg")->capture_default_str();
    app.add_option("--winners", settings.winners, "the tuned file to write the winners into")
        ->default_str(MSDA_SWEEP_SOURCE_DIR "/schedules/tuned.cmake");
    settings.winners = MSDA_SWEEP_SOURCE_DIR "/schedules/tuned.cmake";
    app.add_option("--walk", settings.walk, "auto (msda's choice per shape) | by_level | by_query")->capture_default_str();
    app.add_option("--distribution", settings.distribution, "local | uniform")->capture_default_str();
    app.add_option("--rounds", settings.rounds, "alternating rounds a candidate is timed in")->capture_default_str();
    app.add_option("--threads", settings.threads, "threads the kernels run on")->capture_default_str();
    app.add_option("--seed", settings.seed, "the search's random seed")->capture_default_str();
    app.add_option("--max-candidates", settings.max_candidates, "stop a kernel after this many searched (0: none)");
    app.add_flag("--resume", settings.resume, "go on from --out's candidates.csv");
    app.add_flag("--report-only", settings.report_only,
                 "write the table and the plot from --out's candidates.csv, and measure nothing");
    app.add_flag("--count", settings.count,
                 "also count the instructions a sample of the shipped and winning code (callgrind; not AVX-512)");
    app.add_flag("!--no-autoschedulers", settings.autoschedulers, "leave Halide's autoschedulers out");
    app.add_option("--autoscheduler-seconds", settings.autoscheduler_seconds,
                   "the time an autoscheduler's candidate may take (default: what is left of the kernel's share of "
                   "the budget, 30 s to 10 min)");
    bool knob_table = false;
    app.add_flag("--list-knobs", knob_table, "print every knob, its family, range and default, and stop");
    app.add_flag("--count-child", settings.count_child)->group("");
    app.add_flag("--evaluate-child", settings.evaluate_child)->group("");
    app.add_option("--autoscheduler", settings.autoscheduler)->group("");
    app.add_option("--kernel", settings.kernel)->group("");
    app.add_option("--knobs", settings.knobs)->group("");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &error) {
        return app.exit(error) == 0 ? 0 : 2;
    }
    if (knob_table) {
        list_knobs();
        return 0;
    }
    try {
        if (settings.op != "forward" && settings.op != "backward" && settings.op != "both") {
            throw std::invalid_argument("msda sweep: --op is forward, backward or both, not " + settings.op);
        }
        if (settings.walk != "auto" && settings.walk != "by_level" && settings.walk != "by_query") {
            throw std::invalid_argument("msda sweep: --walk is auto, by_level or by_query, not " + settings.walk);
        }
        if (settings.distribution != "local" && settings.distribution != "uniform") {
            throw std::invalid_argument("msda sweep: --distribution is local or uniform");
        }
        if (settings.rounds < 1 || settings.threads < 1 || !(settings.budget_minutes > 0)) {
            throw std::invalid_argument("msda sweep: --rounds, --threads and --budget are positive");
        }
        setenv("HL_NUM_THREADS", std::to_string(settings.threads).c_str(), 0);
        const Setup setup = setup_for(settings);
        if (settings.count_child) return count_child(settings, setup);
        if (settings.evaluate_child) {
            // An error inside an autoscheduler cannot unwind through it and
            // ends the process: report it to the parent first.
            static ReportThenAbort reporter;
            Halide::set_custom_compile_time_error_reporter(&reporter);
            return Sweep(settings, setup).evaluate_child();
        }
        if (settings.count && (setup.family != Family::cpu || setup.mode != Mode::timed ||
                               setup.target.has_feature(Halide::Target::AVX512) ||
                               setup.target.has_feature(Halide::Target::AVX512_Skylake) ||
                               setup.target.has_feature(Halide::Target::AVX512_Zen4))) {
            throw std::invalid_argument("msda sweep: --count runs under valgrind, which runs x86 code up to AVX2: "
                                        "--target x86 --class avx2 or x86-64");
        }
#ifndef MSDA_SWEEP_CALLGRIND
        if (settings.count) throw std::invalid_argument("msda sweep: built without valgrind's callgrind.h: no --count");
#endif
        std::signal(SIGINT, on_interrupt);
        Sweep sweep(settings, setup);
        return sweep.run();
    } catch (const std::exception &error) {
        std::cerr << error.what() << "\n";
        return 1;
    }
}
