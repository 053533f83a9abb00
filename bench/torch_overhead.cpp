// What calling msda through its LibTorch operator costs over calling msda's
// C++ API directly, on the same tensors, in one run (bench/README.md).
//
//   msda_torch_overhead [--shape M0|...|tiny] [--distribution local|uniform] [--rounds 30] [--threads 2] [--check-only]
//
// Each round times, one call each, back to back:
//   forward      msda::forward into a preallocated output, against
//                msda_torch::ms_deform_attn (dispatcher, tensor checks, the
//                output's allocation) under no_grad;
//   backward     msda::backward into preallocated gradients, against
//                msda_torch::ms_deform_attn_backward (allocates the three);
//   training     msda::forward + msda::backward, against the operator with
//                inputs requiring grad and output.backward(grad_output)
//                (the Autograd kernel, saved tensors, autograd's engine).
//   bwd-fresh    msda::backward into gradients torch allocates for each
//                call, as the operator's are, against the operator's
//                backward again: the operator's own cost, apart from what
//                fresh memory costs.
// Printed: the median time per call of each, their difference and ratio.
// --check-only runs each path once and checks they compute the same bits.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>
#include <msda/torch.hpp>

#include "problem.h"

namespace {

using namespace msda_bench;

struct Options {
    std::string shape = "M0";
    Distribution distribution = Distribution::local;
    int rounds = 30;
    int threads = 2;
    bool check_only = false;
};

[[noreturn]] void usage(const std::string &problem) {
    std::fprintf(stderr,
                 "msda_torch_overhead: %s\nusage: msda_torch_overhead [--shape ID] [--distribution local|uniform] "
                 "[--rounds N] [--threads T] [--check-only]\n",
                 problem.c_str());
    std::exit(2);
}

Options parse(int argc, char **argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--check-only") {
            options.check_only = true;
            continue;
        }
        if (i + 1 >= argc) usage(flag + " needs a value");
        const std::string text = argv[++i];
        if (flag == "--shape") {
            options.shape = text;
        } else if (flag == "--distribution") {
            if (text != "local" && text != "uniform") usage("--distribution is local or uniform, got " + text);
            options.distribution = text == "local" ? Distribution::local : Distribution::uniform;
        } else if (flag == "--rounds" || flag == "--threads") {
            const int count = std::atoi(text.c_str());
            if (count < 1 || count > 100000) usage(flag + " expects a positive count, got " + text);
            (flag == "--rounds" ? options.rounds : options.threads) = count;
        } else {
            usage("unknown option " + flag);
        }
    }
    return options;
}

// "tiny" (one 8 x 8 level, 10 queries, M0's heads, channels and points):
// a call with almost no work, so its time is mostly the fixed cost.
Shape find_shape(const std::string &id) {
    if (id == "tiny") {
        Shape tiny;
        tiny.id = "tiny";
        tiny.queries = 10;
        tiny.levels = {{8, 8}};
        return tiny;
    }
    for (const Shape &shape : canonical_shapes()) {
        if (shape.id == id) return shape;
    }
    usage("no MSDA shape " + id + " (S0, S1, M0, M2, X, G, L1, tiny)");
}

// The problem's memory seen as torch tensors (read only; nothing writes it).
struct Tensors {
    torch::Tensor value, spatial_shapes, level_start_index, sampling_locations, attention_weights, grad_output;
};

Tensors tensors_of(Problem &problem) {
    const Shape &s = problem.shape;
    const std::int64_t levels = static_cast<std::int64_t>(s.levels.size());
    Tensors t;
    t.value = torch::from_blob(problem.value.data(), {s.batch, s.value_length(), s.heads, s.channels});
    t.spatial_shapes = torch::from_blob(problem.spatial_shapes.data(), {levels, 2}, torch::kInt32);
    t.level_start_index = torch::from_blob(problem.level_start_index.data(), {levels}, torch::kInt32);
    t.sampling_locations =
        torch::from_blob(problem.sampling_locations.data(), {s.batch, s.queries, s.heads, levels, s.points, 2});
    t.attention_weights =
        torch::from_blob(problem.attention_weights.data(), {s.batch, s.queries, s.heads, levels, s.points});
    t.grad_output = torch::from_blob(problem.grad_output.data(), {s.batch, s.queries, s.heads * s.channels});
    return t;
}

double seconds_of(const std::function<void()> &call) {
    const auto start = std::chrono::steady_clock::now();
    call();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

int main(int argc, char **argv) {
    const Options options = parse(argc, argv);
    torch::set_num_threads(options.threads);
    msda::set_num_threads(options.threads);
    Problem problem = make_problem(find_shape(options.shape), options.distribution);
    const Tensors t = tensors_of(problem);

    // The API's caller owns its outputs and makes its views once.
    const torch::Tensor output = torch::empty({t.grad_output.sizes()});
    const torch::Tensor grad_value = torch::empty_like(t.value);
    const torch::Tensor grad_locations = torch::empty_like(t.sampling_locations);
    const torch::Tensor grad_weights = torch::empty_like(t.attention_weights);
    msda::ForwardArgs forward_args;
    forward_args.value = msda_torch::tensor_view(t.value, "value");
    forward_args.spatial_shapes = msda_torch::tensor_view(t.spatial_shapes, "spatial_shapes");
    forward_args.level_start_index = msda_torch::tensor_view(t.level_start_index, "level_start_index");
    forward_args.sampling_locations = msda_torch::tensor_view(t.sampling_locations, "sampling_locations");
    forward_args.attention_weights = msda_torch::tensor_view(t.attention_weights, "attention_weights");
    forward_args.output = msda_torch::tensor_view(output, "output");
    msda::BackwardArgs backward_args{forward_args.value, forward_args.spatial_shapes, forward_args.level_start_index,
                                     forward_args.sampling_locations, forward_args.attention_weights};
    backward_args.grad_output = msda_torch::tensor_view(t.grad_output, "grad_output");
    backward_args.grad_value = msda_torch::tensor_view(grad_value, "grad_value");
    backward_args.grad_sampling_locations = msda_torch::tensor_view(grad_locations, "grad_sampling_locations");
    backward_args.grad_attention_weights = msda_torch::tensor_view(grad_weights, "grad_attention_weights");

    torch::Tensor op_output;
    std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> op_grads;
    torch::Tensor leaves[3];
    const auto api_forward = [&] { msda::forward(forward_args); };
    const auto op_forward = [&] {
        torch::NoGradGuard no_grad;
        op_output = msda_torch::ms_deform_attn(t.value, t.spatial_shapes, t.level_start_index,
                                               t.sampling_locations, t.attention_weights);
    };
    const auto api_backward = [&] { msda::backward(backward_args); };
    // The API into gradients allocated by torch for the call, as the
    // operator's are: what fresh memory costs, apart from the operator.
    const auto api_backward_fresh = [&] {
        msda::BackwardArgs args = backward_args;
        const torch::Tensor fresh[3] = {torch::empty_like(t.value), torch::empty_like(t.sampling_locations),
                                        torch::empty_like(t.attention_weights)};
        args.grad_value = msda_torch::tensor_view(fresh[0], "grad_value");
        args.grad_sampling_locations = msda_torch::tensor_view(fresh[1], "grad_sampling_locations");
        args.grad_attention_weights = msda_torch::tensor_view(fresh[2], "grad_attention_weights");
        msda::backward(args);
    };
    const auto op_backward = [&] {
        op_grads = msda_torch::ms_deform_attn_backward(t.grad_output, t.value, t.spatial_shapes,
                                                       t.level_start_index, t.sampling_locations,
                                                       t.attention_weights);
    };
    const auto api_training = [&] {
        api_forward();
        api_backward();
    };
    // Fresh leaves each round, as each training step has.
    const auto make_leaves = [&] {
        leaves[0] = t.value.detach().requires_grad_(true);
        leaves[1] = t.sampling_locations.detach().requires_grad_(true);
        leaves[2] = t.attention_weights.detach().requires_grad_(true);
    };
    const auto op_training = [&] {
        const torch::Tensor out =
            msda_torch::ms_deform_attn(leaves[0], t.spatial_shapes, t.level_start_index, leaves[1], leaves[2]);
        out.backward(t.grad_output);
    };

    if (options.check_only) {
        api_training();
        op_forward();
        op_backward();
        make_leaves();
        op_training();
        const bool same = torch::equal(op_output, output) && torch::equal(std::get<0>(op_grads), grad_value) &&
                          torch::equal(std::get<1>(op_grads), grad_locations) &&
                          torch::equal(std::get<2>(op_grads), grad_weights) &&
                          torch::equal(leaves[0].grad(), grad_value) && torch::equal(leaves[1].grad(), grad_locations) &&
                          torch::equal(leaves[2].grad(), grad_weights);
        std::printf("%s: the operator, its backward and autograd give %s as msda's API\n", options.shape.c_str(),
                    same ? "the same bits" : "DIFFERENT results");
        return same ? 0 : 1;
    }

    struct Row {
        const char *name;
        std::vector<double> api, op;
    };
    Row rows[4] = {{"forward", {}, {}}, {"backward", {}, {}}, {"training", {}, {}}, {"bwd-fresh", {}, {}}};
    for (int round = -2; round < options.rounds; ++round) {  // two rounds of warm-up
        const double times[8] = {seconds_of(api_forward),        seconds_of(op_forward),
                                 seconds_of(api_backward),       seconds_of(op_backward),
                                 seconds_of(api_training),       (make_leaves(), seconds_of(op_training)),
                                 seconds_of(api_backward_fresh), seconds_of(op_backward)};
        if (round < 0) continue;
        for (int r = 0; r < 4; ++r) {
            rows[r].api.push_back(times[2 * r]);
            rows[r].op.push_back(times[2 * r + 1]);
        }
    }
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    std::printf("msda_torch_overhead: %s (%s locations), %d threads, median of %d rounds; msda %s runs %s on %s\n",
                options.shape.c_str(), distribution_name(options.distribution), options.threads, options.rounds,
                msda::version(), dispatch.selected.c_str(), dispatch.cpu.c_str());
    std::printf("%-9s %12s %12s %12s %8s\n", "call", "API (us)", "operator", "overhead", "ratio");
    for (const Row &row : rows) {
        const double api = median(row.api) * 1e6, op = median(row.op) * 1e6;
        std::printf("%-9s %12.1f %12.1f %12.1f %8.3f\n", row.name, api, op, op - api, op / api);
    }
    return 0;
}
