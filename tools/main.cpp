// The msda command line: argument parsing and error reporting. The work of
// each subcommand is in commands.h.
//
// Exit status: 0 on success, 1 when the inputs are bad (a file that cannot be
// read, a tensor the API rejects) or the demo's checks fail, 2 when the
// command line itself is wrong (including options that do not go together,
// such as --align-corners with --op gka). CLI11's own codes (100 and up) are
// folded into 2, the usual status for usage errors.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <charconv>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commands.h"
#include "npy.h"

namespace {

using namespace msda_cli;

constexpr int kExitFailure = 1;
constexpr int kExitBadUsage = 2;

void report(std::string_view message) {
    // API messages already carry the prefix.
    std::cerr << (message.starts_with("msda: ") ? "" : "msda: ") << message << "\n";
}

// An option that takes one of a few names (any case) and sets an enum (or a
// bool, for two names).
// CLI11's CheckedTransformer would also accept the enums' numbers and show
// them in --help; users should only see the names.
template <typename Enum>
void add_choice(CLI::App &command, const std::string &flag, Enum &target,
                const std::vector<std::pair<std::string, Enum>> &choices, const std::string &help) {
    std::vector<std::string> names;
    for (const auto &choice : choices) names.push_back(choice.first);
    command
        .add_option_function<std::string>(
            flag,
            [&target, choices](const std::string &given) {
                for (const auto &[name, value] : choices)
                    if (CLI::detail::to_lower(name) == CLI::detail::to_lower(given)) target = value;
            },
            help)
        ->check(CLI::IsMember(names, CLI::ignore_case).description(""))
        ->type_name(CLI::detail::join(names, "|"));
}

void add_input_options(CLI::App &command, InputFiles &files, msda::Options &options, Storage &storage) {
    command.add_option("--value", files.value, "value .npy: (B, L, N_h, C_h), or (B, N_h, L, C_h) with BNLC")
        ->required();
    command.add_option("--spatial-shapes", files.spatial_shapes, "spatial_shapes .npy: (N_l, 2) int, rows (H, W)")
        ->required();
    command.add_option("--level-start-index", files.level_start_index, "level_start_index .npy: (N_l,) int")
        ->required();
    command
        .add_option("--sampling-locations", files.sampling_locations,
                    "sampling_locations .npy: (B, N_q, N_h, N_l, N_p, 2), or (B, 2, N_q, N_h, N_l, N_p) with "
                    "B2QHLP; last axis (x, y), normalized to [0, 1] for MSDA, absolute pixel coordinates for GKA")
        ->required();
    command.add_option("--attention-weights", files.attention_weights, "attention_weights .npy: (B, N_q, N_h, N_l, N_p)")
        ->required();

    add_choice(command, "--op", options.op, {{"msda", msda::Operator::msda}, {"gka", msda::Operator::gka}},
               "the operator: msda (bilinear samples at normalized locations) or gka (geometric kernel "
               "attention: the one pixel at each absolute pixel coordinate, no location gradient); default msda");
    add_choice(command, "--rounding", options.rounding,
               {{"floor", msda::Rounding::floor}, {"nearest", msda::Rounding::nearest}},
               "GKA only: how a pixel coordinate picks its pixel, floor or nearest (ties to even); default floor");
    add_choice(command, "--value-layout", options.value_layout,
               {{"BLNC", msda::ValueLayout::BLNC}, {"BNLC", msda::ValueLayout::BNLC}},
               "layout of value (and grad_value); default BLNC");
    add_choice(command, "--locations-layout", options.locations_layout,
               {{"BQHLP2", msda::LocationsLayout::BQHLP2}, {"B2QHLP", msda::LocationsLayout::B2QHLP}},
               "layout of sampling_locations (and its gradient); default BQHLP2");
    command.add_flag("--align-corners", options.align_corners,
                     "MSDA only: pixel centres at the corners: x = u*(W-1)");
    add_choice(command, "--padding-mode", options.padding_mode,
               {{"zeros", msda::PaddingMode::zeros}, {"border", msda::PaddingMode::border}},
               "MSDA only: where samples outside a level read from; default zeros");
    add_choice(command, "--dtype", storage.dtype,
               {{"f32", msda::DType::f32}, {"f16", msda::DType::f16}, {"bf16", msda::DType::bf16},
                {"f64", msda::DType::f64}},
               "storage dtype of value, attention_weights, grad_output and the results, which are written as "
               "float32 (float64 for f64, which also computes in float64); default f32");
    add_choice(command, "--locations-dtype", storage.locations_in_dtype, {{"f32", false}, {"same", true}},
               "storage dtype of sampling_locations (and its gradient): f32 (the default) or the same as --dtype "
               "(always the same for f64)");
    add_choice(command, "--target", options.device,
               {{"cpu", msda::Device::cpu}, {"opencl", msda::Device::opencl}, {"cuda", msda::Device::cuda}},
               "where to compute: cpu (the default), opencl (msda's OpenCL device) or cuda (Halide's CUDA device); "
               "msda info lists them; f32 and f64 only on opencl and cuda");
}

// A whole number of at least `least`, checked as the user typed it (before
// CLI11 converts it), with a message that says what was expected and what
// was given.
CLI::Validator whole_number(int least, const std::string &what) {
    return CLI::Validator(
        [least, what](std::string &given) -> std::string {
            int number = 0;
            const char *end = given.data() + given.size();
            const auto [stop, error] = std::from_chars(given.data(), end, number);
            if (error == std::errc::result_out_of_range || (error == std::errc() && stop == end && number < least)) {
                return "expected " + what + ", got " + given;
            }
            if (error != std::errc() || stop != end || given.empty()) {
                return "expected " + what + ", got \"" + given + "\" (not a whole number)";
            }
            return "";
        },
        "", "");
}

void add_threads_option(CLI::App &command, int &threads) {
    command.add_option("--threads", threads, "threads to use (0 = one per core, the default)")
        ->check(whole_number(0, "a whole number of threads from 0 (one per core) to " + std::to_string(INT_MAX)));
}

// Whether two paths name one file: the same existing file (through links
// too), or, for a file not there yet, the same path once made absolute and
// normal.
bool same_file(const std::string &a, const std::string &b) {
    std::error_code error;
    if (std::filesystem::equivalent(a, b, error)) return true;
    const std::filesystem::path first = std::filesystem::weakly_canonical(a, error);
    if (error) return false;
    const std::filesystem::path second = std::filesystem::weakly_canonical(b, error);
    return !error && first == second;
}

using NamedPaths = std::vector<std::pair<std::string, std::string>>;  // (option, path)

// A result written over an input, or two results to one file, would lose
// data: refused before anything is read.
void check_distinct_paths(const std::string &command, const NamedPaths &inputs, const NamedPaths &outputs) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const auto &[flag, path] = outputs[i];
        if (path.empty()) continue;
        for (const auto &[input_flag, input] : inputs) {
            if (same_file(path, input)) {
                throw CLI::ValidationError(command + ": " + flag + " names the same file as " + input_flag + " (" +
                                           path + "); msda does not write over its inputs");
            }
        }
        for (std::size_t j = i + 1; j < outputs.size(); ++j) {
            if (!outputs[j].second.empty() && same_file(path, outputs[j].second)) {
                throw CLI::ValidationError(command + ": " + flag + " and " + outputs[j].first +
                                           " name the same file (" + path + "); each result needs a file of its own");
            }
        }
    }
}

NamedPaths input_paths(const InputFiles &files) {
    return {{"--value", files.value},
            {"--spatial-shapes", files.spatial_shapes},
            {"--level-start-index", files.level_start_index},
            {"--sampling-locations", files.sampling_locations},
            {"--attention-weights", files.attention_weights}};
}

// The options that belong to one operator, rejected with the other: GKA
// takes absolute pixel coordinates and clamps them to the level, so
// --align-corners and --padding-mode do not apply to it, and --rounding does
// not apply to MSDA. Given at all counts, default value or not.
void check_operator_options(const CLI::App &command, const msda::Options &options) {
    const std::string name = command.get_name();
    if (options.op == msda::Operator::gka) {
        for (const char *flag : {"--align-corners", "--padding-mode"}) {
            if (command.count(flag) > 0)
                throw CLI::ValidationError(name + ": " + flag +
                                           " applies to MSDA only, not to --op gka (GKA's sampling locations are "
                                           "absolute pixel coordinates, clamped to the level)");
        }
    } else if (command.count("--rounding") > 0) {
        throw CLI::ValidationError(name + ": --rounding applies to GKA only (give --op gka with it)");
    }
}

int usage_error(const CLI::App &app, const CLI::ParseError &error) {
    // --help and friends are "errors" with status 0; CLI11 prints them.
    if (error.get_exit_code() == 0) return app.exit(error);
    report(error.what());
    std::cerr << "Run 'msda --help' or 'msda <command> --help' for usage.\n";
    return kExitBadUsage;
}

}  // namespace

int main(int argc, char **argv) {
    // A write past a file-size limit (ulimit -f) fails with EFBIG, which the
    // writer reports and cleans up after, instead of killing the process
    // with its temporary file left behind.
    std::signal(SIGXFSZ, SIG_IGN);
    CLI::App app{"msda: multi-scale deformable attention (Deformable DETR's MSDA) and geometric kernel attention "
                 "(GKA) from .npy files",
                 "msda"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("msda ") + msda::version());

    ForwardCommand forward;
    BackwardCommand backward;
    DemoCommand demo;
    InfoCommand info;
    int threads = 0;

    CLI::App *forward_command = app.add_subcommand(
        "forward", "output = MSDA(inputs), or GKA(inputs) with --op gka, written as float32 .npy");
    add_input_options(*forward_command, forward.inputs, forward.options, forward.storage);
    forward_command->add_option("--output,-o", forward.output, "output .npy: (B, N_q, N_h*C_h)")->required();
    add_threads_option(*forward_command, threads);

    CLI::App *backward_command =
        app.add_subcommand("backward", "the gradients asked for, given grad_output, written as float32 .npy");
    add_input_options(*backward_command, backward.inputs, backward.options, backward.storage);
    backward_command->add_option("--grad-output", backward.grad_output, "grad_output .npy: (B, N_q, N_h*C_h)")
        ->required();
    backward_command->add_option("--grad-value", backward.grad_value, "grad_value .npy to write (value's shape)");
    backward_command->add_option("--grad-sampling-locations", backward.grad_sampling_locations,
                                 "grad_sampling_locations .npy to write (sampling_locations' shape); MSDA only, GKA "
                                 "gives the locations no gradient");
    backward_command->add_option("--grad-attention-weights", backward.grad_attention_weights,
                                 "grad_attention_weights .npy to write (attention_weights' shape)");
    add_threads_option(*backward_command, threads);

    CLI::App *demo_command = app.add_subcommand(
        "demo", "time forward and backward on one Deformable DETR encoder layer and spot-check them "
                "against the double-precision reference");
    demo_command->add_option("--repeats", demo.repeats, "timed calls of each operator (after one warm-up)")
        ->check(whole_number(1, "a whole number of calls from 1 to " + std::to_string(INT_MAX)));
    add_threads_option(*demo_command, threads);

    CLI::App *info_command = app.add_subcommand(
        "info", "the version, the compiled targets, the one this CPU runs and why, and the thread count");
    info_command->add_flag("--features", info.features, "also list the CPU features each target's code may use");
    CLI::Option *variants_flag = info_command->add_flag(
        "--variants", info.variants, "list the generated functions instead: what each computes, for which target family");
    info_command->add_flag("--cpuid", info.cpuid,
                           "print the CPU words msda read instead: cpuid and xgetbv (the format of tests/cpuid/), or AT_HWCAP on ARM (tests/hwcap/)")
        ->excludes(variants_flag);

    app.add_subcommand("sweep", "search the schedule knobs of the kernels for this CPU class or a device, and write "
                                "the winners the next build ships (msda sweep --help; docs/sweep.md)")
        ->prefix_command();
    // msda_sweep links libHalide to JIT-compile its candidates, which this
    // program does not: `msda sweep` runs it from beside this program.
    if (argc > 1 && std::string_view(argv[1]) == "sweep") {
        const std::filesystem::path sweep =
            std::filesystem::read_symlink("/proc/self/exe").parent_path() / "msda_sweep";
        std::vector<char *> arguments = {const_cast<char *>(sweep.c_str())};
        for (int i = 2; i <= argc; i++) arguments.push_back(argv[i]);
        execv(sweep.c_str(), arguments.data());
        report("sweep: cannot run " + sweep.string() + " (" + std::strerror(errno) +
               "): it is built beside msda in a native tree with the bench (MSDA_BUILD_BENCH)");
        return kExitFailure;
    }

    try {
        // CLI11 reports a word that is no subcommand as a missing one.
        if (argc > 1 && argv[1][0] != '-') {
            std::string names;
            bool known = false;
            for (const CLI::App *command : app.get_subcommands([](const CLI::App *) { return true; })) {
                names += " " + command->get_name();
                known = known || command->get_name() == argv[1];
            }
            if (!known) {
                throw CLI::ValidationError(std::string("unknown command \"") + argv[1] + "\" (commands:" + names +
                                           ")");
            }
        }
        app.parse(argc, argv);
        if (forward_command->parsed()) {
            check_operator_options(*forward_command, forward.options);
            check_distinct_paths("forward", input_paths(forward.inputs), {{"--output", forward.output}});
        }
        if (backward_command->parsed()) {
            check_operator_options(*backward_command, backward.options);
            NamedPaths inputs = input_paths(backward.inputs);
            inputs.emplace_back("--grad-output", backward.grad_output);
            check_distinct_paths("backward", inputs,
                                 {{"--grad-value", backward.grad_value},
                                  {"--grad-sampling-locations", backward.grad_sampling_locations},
                                  {"--grad-attention-weights", backward.grad_attention_weights}});
            const bool gka = backward.options.op == msda::Operator::gka;
            if (gka && !backward.grad_sampling_locations.empty())
                throw CLI::ValidationError("backward: --grad-sampling-locations applies to MSDA only: GKA gives "
                                           "sampling_locations no gradient (ask for --grad-value and/or "
                                           "--grad-attention-weights)");
            if (backward.grad_value.empty() && backward.grad_sampling_locations.empty() &&
                backward.grad_attention_weights.empty())
                throw CLI::ValidationError(gka ? "backward: no gradient asked for (give --grad-value and/or "
                                                 "--grad-attention-weights)"
                                               : "backward: no gradient asked for (give --grad-value, "
                                                 "--grad-sampling-locations and/or --grad-attention-weights)");
        }
    } catch (const CLI::ParseError &error) {
        return usage_error(app, error);
    }

    try {
        msda::set_num_threads(threads);
        demo.threads = threads;
        if (forward_command->parsed()) run_forward(forward);
        if (backward_command->parsed()) run_backward(backward);
        if (demo_command->parsed() && !run_demo(demo)) return kExitFailure;
        if (info_command->parsed() && !run_info(info)) return kExitFailure;
        return 0;
    } catch (const msda::Error &error) {
        report(error.what());
    } catch (const npy::Error &error) {
        report(error.what());
    } catch (const std::bad_alloc &) {
        report("out of memory");
    } catch (const std::exception &error) {
        report(error.what());
    }
    return kExitFailure;
}
