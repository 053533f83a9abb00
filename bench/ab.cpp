// msda_ab: an A/B of two builds of libmsda in one process. This VM's speed
// drifts by tens of percent from minute to minute, more than most schedule
// changes move a kernel, so two builds timed in separate runs cannot be
// compared. msda_ab loads both libraries (dlopen, each with its own symbols)
// and times them on the same problem in alternating calls, A then B, then
// B then A, and reports the median of the per-round ratios B/A, which the
// drift cancels out of. It also reports how far the two builds' results
// are apart (0 when they compute the same bits). See bench/README.md.
//
//   msda_ab LIB_A LIB_B [--shape M0] [--distribution local] [--op forward]
//           [--sample-order automatic] [--rounds 10] [--threads 2] [--require-identical]
//           [--plan] [--calls 1] [--grads all]
// --sample-order sets Options::sample_order on both sides (a library
// older than that option ignores it). --plan times a warm plan's calls
// (msda_plan_forward, msda_plan_backward) instead of the one-shot calls;
// --calls N times N calls a round (for the fixed cost of a call, on the
// tiny shape T0); --grads value (or sample) asks a backward call for
// grad_value alone (or the per-sample gradients alone). A library without
// msda_abi_version (the C structs before their struct_size field) is
// called with that layout.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <msda/msda.h>

#include "problem.h"

namespace {

using namespace msda_bench;

// The C structs before msda_abi_version 1: no struct_size, and three device
// handles where msda_device_context is now.
namespace abi0 {
struct Tensor {
    void *data;
    msda_dtype dtype;
    int rank;
    std::int64_t shape[MSDA_MAX_RANK];
    std::int64_t strides[MSDA_MAX_RANK];
    std::int32_t device_type;
    std::int32_t device_id;
    std::int64_t byte_offset;
};
struct Options {
    msda_operator op;
    msda_rounding rounding;
    msda_value_layout value_layout;
    msda_locations_layout locations_layout;
    int align_corners;
    msda_padding_mode padding_mode;
    int grad_value, grad_sampling_locations, grad_attention_weights;
    msda_relayout relayout;
    msda_sample_order sample_order;
    msda_device device;
    int atomic_grad_value;
    void *opencl_queue, *cuda_context, *cuda_stream;
};
Tensor from(const msda_tensor &t) {
    Tensor result{t.data, t.dtype, t.rank, {}, {}, t.device_type, t.device_id, t.byte_offset};
    std::copy(t.shape, t.shape + MSDA_MAX_RANK, result.shape);
    std::copy(t.strides, t.strides + MSDA_MAX_RANK, result.strides);
    return result;
}
}  // namespace abi0

// A row-major tensor description, as msda_contiguous makes it.
msda_tensor contiguous(void *data, msda_dtype dtype, const std::vector<std::int64_t> &shape) {
    msda_tensor tensor{};
    tensor.struct_size = sizeof tensor;
    tensor.data = data;
    tensor.dtype = dtype;
    tensor.rank = static_cast<int>(shape.size());
    tensor.device_type = MSDA_DEVICE_TYPE_CPU;
    std::int64_t stride = 1;
    for (int axis = tensor.rank - 1; axis >= 0; --axis) {
        tensor.shape[axis] = shape[axis];
        tensor.strides[axis] = stride;
        stride *= shape[axis];
    }
    return tensor;
}

// The C API of one loaded build, called with the struct layout of its ABI.
struct Library {
    std::string path;
    int abi = 0;
    msda_status (*forward_call)(const void *, const void *) = nullptr;
    msda_status (*backward_call)(const void *, const void *) = nullptr;
    msda_status (*plan_create)(const msda_problem_size *, const void *, msda_plan **) = nullptr;
    void (*plan_destroy)(msda_plan *) = nullptr;
    size_t (*plan_workspace_size)(const msda_plan *) = nullptr;
    msda_status (*plan_forward)(const msda_plan *, const void *, void *, size_t) = nullptr;
    msda_status (*plan_backward)(const msda_plan *, const void *, void *, size_t) = nullptr;
    void *default_options_function = nullptr;
    void (*set_num_threads)(int) = nullptr;
    const char *(*last_error)() = nullptr;

    // The library's default options with the sample order set, in its
    // layout, and the arguments in its layout.
    struct Call {
        std::vector<unsigned char> options, args;
    };
    // Which gradients a backward call computes.
    struct Grads {
        bool value = true, sample = true;
    };
    template <typename OptionsOfAbi>
    static void ask(OptionsOfAbi &options, msda_sample_order order, Grads grads) {
        options.sample_order = order;
        options.grad_value = grads.value;
        options.grad_sampling_locations = grads.sample;
        options.grad_attention_weights = grads.sample;
    }
    Call prepare(msda_sample_order order, Grads grads, const std::vector<msda_tensor> &tensors) const {
        Call call;
        if (abi >= 1) {
            msda_options options = reinterpret_cast<msda_options (*)()>(default_options_function)();
            ask(options, order, grads);
            call.options.assign(reinterpret_cast<unsigned char *>(&options),
                                reinterpret_cast<unsigned char *>(&options) + sizeof options);
            call.args.assign(reinterpret_cast<const unsigned char *>(tensors.data()),
                             reinterpret_cast<const unsigned char *>(tensors.data() + tensors.size()));
            return call;
        }
        abi0::Options options = reinterpret_cast<abi0::Options (*)()>(default_options_function)();
        ask(options, order, grads);
        call.options.assign(reinterpret_cast<unsigned char *>(&options),
                            reinterpret_cast<unsigned char *>(&options) + sizeof options);
        std::vector<abi0::Tensor> old;
        for (const msda_tensor &t : tensors) old.push_back(abi0::from(t));
        call.args.assign(reinterpret_cast<const unsigned char *>(old.data()),
                         reinterpret_cast<const unsigned char *>(old.data() + old.size()));
        return call;
    }
};

template <typename Function>
void resolve(void *handle, const std::string &path, const char *name, Function &function) {
    function = reinterpret_cast<Function>(dlsym(handle, name));
    if (function == nullptr) throw std::runtime_error(path + " has no symbol " + name);
}

Library load(const std::string &path) {
    // A name without a slash is a file here, not one for dlopen to search
    // the library path for. RTLD_LOCAL: each library's calls into itself
    // stay inside it.
    const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
    void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error("cannot load " + path + ": " + dlerror());
    Library library;
    library.path = path;
    resolve(handle, path, "msda_forward", library.forward_call);
    resolve(handle, path, "msda_backward", library.backward_call);
    resolve(handle, path, "msda_plan_create", library.plan_create);
    resolve(handle, path, "msda_plan_destroy", library.plan_destroy);
    resolve(handle, path, "msda_plan_workspace_size", library.plan_workspace_size);
    resolve(handle, path, "msda_plan_forward", library.plan_forward);
    resolve(handle, path, "msda_plan_backward", library.plan_backward);
    resolve(handle, path, "msda_default_options", library.default_options_function);
    resolve(handle, path, "msda_set_num_threads", library.set_num_threads);
    resolve(handle, path, "msda_last_error", library.last_error);
    if (auto *version = reinterpret_cast<int (*)()>(dlsym(handle, "msda_abi_version"))) library.abi = version();
    return library;
}

// One build's results, 64-byte aligned like the bench's tensors.
struct Results {
    Floats output, grad_value, grad_locations, grad_attention;
};

struct Options {
    std::string library_a, library_b;
    std::string shape = "M0", distribution = "local", op = "forward";
    std::string sample_order = "automatic";
    Library::Grads grads;  // --grads: all (the default), value or sample
    int rounds = 10, threads = 2, calls = 1;
    bool require_identical = false, plan = false;
};

[[noreturn]] void usage(const std::string &message) {
    std::fprintf(stderr,
                 "msda_ab: %s\nusage: msda_ab LIB_A LIB_B [--shape ID] [--distribution local|uniform] "
                 "[--op forward|backward] [--sample-order automatic|by_level|by_query] [--rounds N] [--threads N] "
                 "[--require-identical] [--plan] [--calls N] [--grads all|value|sample]\n",
                 message.c_str());
    std::exit(2);
}

int positive(const std::string &flag, const std::string &text) {
    char *end = nullptr;
    const long number = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || number < 1 || number > 100000) {
        usage(flag + " expects a positive integer, got '" + text + "'");
    }
    return static_cast<int>(number);
}

Options parse(int argc, char **argv) {
    Options options;
    std::vector<std::string> libraries;
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--shape") {
            options.shape = next();
        } else if (arg == "--distribution") {
            options.distribution = next();
            if (options.distribution != "local" && options.distribution != "uniform") {
                usage("--distribution expects local or uniform, got '" + options.distribution + "'");
            }
        } else if (arg == "--op") {
            options.op = next();
            if (options.op != "forward" && options.op != "backward") {
                usage("--op expects forward or backward, got '" + options.op + "'");
            }
        } else if (arg == "--sample-order") {
            options.sample_order = next();
            if (options.sample_order != "automatic" && options.sample_order != "by_level" &&
                options.sample_order != "by_query") {
                usage("--sample-order expects automatic, by_level or by_query, got '" + options.sample_order + "'");
            }
        } else if (arg == "--grads") {
            const std::string grads = next();
            if (grads != "all" && grads != "value" && grads != "sample") {
                usage("--grads expects all, value or sample, got '" + grads + "'");
            }
            options.grads.value = grads != "sample";
            options.grads.sample = grads != "value";
        } else if (arg == "--rounds") {
            options.rounds = positive(arg, next());
        } else if (arg == "--threads") {
            options.threads = positive(arg, next());
        } else if (arg == "--calls") {
            options.calls = positive(arg, next());
        } else if (arg == "--plan") {
            options.plan = true;
        } else if (arg == "--require-identical") {
            options.require_identical = true;
        } else if (arg.rfind("--", 0) == 0) {
            usage("unknown option " + arg);
        } else {
            libraries.push_back(arg);
        }
    }
    if (libraries.size() != 2) usage("expects two libraries, A and B");
    options.library_a = libraries[0];
    options.library_b = libraries[1];
    return options;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The largest |a - b| over a result, and the largest |a|.
void compare(const Floats &a, const Floats &b, double &difference, double &magnitude) {
    for (std::size_t i = 0; i < a.size(); i++) {
        const double x = a[i], y = b[i];
        if (std::isnan(x) != std::isnan(y)) difference = INFINITY;
        if (!std::isnan(x) && !std::isnan(y)) difference = std::max(difference, std::fabs(x - y));
        magnitude = std::max(magnitude, std::fabs(x));
    }
}

int run(const Options &options) {
    std::vector<Shape> shapes = canonical_shapes();
    // T0: a problem too small for its work to matter, for a call's fixed
    // cost (validation, selection, dispatch).
    shapes.push_back({.id = "T0", .batch = 1, .queries = 2, .heads = 1, .channels = 32, .points = 1,
                      .levels = {{2, 2}}});
    const auto found = std::find_if(shapes.begin(), shapes.end(), [&](const Shape &s) { return s.id == options.shape; });
    if (found == shapes.end()) usage("unknown shape '" + options.shape + "'");
    const Shape &shape = *found;
    Problem problem = make_problem(shape, options.distribution == "uniform" ? Distribution::uniform
                                                                           : Distribution::local);
    const Library libraries[2] = {load(options.library_a), load(options.library_b)};

    const std::int64_t levels = static_cast<std::int64_t>(shape.levels.size());
    const std::vector<std::int64_t> value_shape = {shape.batch, shape.value_length(), shape.heads, shape.channels};
    const std::vector<std::int64_t> per_query = {shape.batch, shape.queries, shape.heads * shape.channels};
    const std::vector<std::int64_t> locations_shape = {shape.batch, shape.queries, shape.heads, levels, shape.points, 2};
    const std::vector<std::int64_t> weights_shape = {shape.batch, shape.queries, shape.heads, levels, shape.points};
    const msda_tensor value = contiguous(problem.value.data(), MSDA_F32, value_shape);
    const msda_tensor spatial_shapes = contiguous(problem.spatial_shapes.data(), MSDA_I32, {levels, 2});
    const msda_tensor level_start_index = contiguous(problem.level_start_index.data(), MSDA_I32, {levels});
    const msda_tensor locations = contiguous(problem.sampling_locations.data(), MSDA_F32, locations_shape);
    const msda_tensor weights = contiguous(problem.attention_weights.data(), MSDA_F32, weights_shape);
    const msda_tensor grad_output = contiguous(problem.grad_output.data(), MSDA_F32, per_query);

    Results results[2];
    for (Results &r : results) {
        if (options.op == "forward") {
            r.output.resize(problem.grad_output.size());
        } else {
            r.grad_value.resize(problem.value.size());
            r.grad_locations.resize(problem.sampling_locations.size());
            r.grad_attention.resize(problem.attention_weights.size());
        }
    }
    const msda_sample_order order = options.sample_order == "by_level"   ? MSDA_SAMPLE_ORDER_BY_LEVEL
                                    : options.sample_order == "by_query" ? MSDA_SAMPLE_ORDER_BY_QUERY
                                                                         : MSDA_SAMPLE_ORDER_AUTOMATIC;
    const bool forward = options.op == "forward";
    Library::Call prepared[2];
    msda_plan *plans[2] = {nullptr, nullptr};
    std::vector<Floats> workspaces(2);
    for (int which = 0; which < 2; which++) {
        const Library &library = libraries[which];
        Results &r = results[which];
        const std::vector<msda_tensor> tensors =
            forward ? std::vector<msda_tensor>{value, spatial_shapes, level_start_index, locations, weights,
                                               contiguous(r.output.data(), MSDA_F32, per_query)}
                    : std::vector<msda_tensor>{value, spatial_shapes, level_start_index, locations, weights, grad_output,
                                               contiguous(r.grad_value.data(), MSDA_F32, value_shape),
                                               contiguous(r.grad_locations.data(), MSDA_F32, locations_shape),
                                               contiguous(r.grad_attention.data(), MSDA_F32, weights_shape)};
        prepared[which] = library.prepare(order, options.grads, tensors);
        if (options.plan) {
            const msda_problem_size size{shape.batch, shape.value_length(), shape.heads, shape.channels, levels,
                                         shape.queries, shape.points, MSDA_F32, MSDA_F32};
            if (library.plan_create(&size, prepared[which].options.data(), &plans[which]) != MSDA_OK) {
                throw std::runtime_error(library.path + ": " + library.last_error());
            }
            workspaces[which].resize(library.plan_workspace_size(plans[which]) / sizeof(float) + 1);
        }
    }
    auto call = [&](int which) {
        const Library &library = libraries[which];
        library.set_num_threads(options.threads);
        const void *args = prepared[which].args.data(), *msda = prepared[which].options.data();
        const std::size_t workspace_bytes = workspaces[which].size() * sizeof(float);
        void *workspace = workspaces[which].data();
        const auto start = std::chrono::steady_clock::now();
        msda_status status = MSDA_OK;
        for (int c = 0; c < options.calls && status == MSDA_OK; c++) {
            if (options.plan) {
                status = forward ? library.plan_forward(plans[which], args, workspace, workspace_bytes)
                                 : library.plan_backward(plans[which], args, workspace, workspace_bytes);
            } else {
                status = forward ? library.forward_call(args, msda) : library.backward_call(args, msda);
            }
        }
        const auto end = std::chrono::steady_clock::now();
        if (status != MSDA_OK) throw std::runtime_error(library.path + ": " + library.last_error());
        return std::chrono::duration<double, std::milli>(end - start).count() / options.calls;
    };

    // One untimed round warms both (the one-shot calls' workspace caches,
    // the thread pools, the pages of the results).
    call(0);
    call(1);
    std::vector<double> times[2], ratios;
    for (int round = 0; round < options.rounds; round++) {
        double time[2];
        const int first = round % 2;
        time[first] = call(first);
        time[1 - first] = call(1 - first);
        times[0].push_back(time[0]);
        times[1].push_back(time[1]);
        ratios.push_back(time[1] / time[0]);
    }

    double difference = 0, magnitude = 0;
    if (options.op == "forward") {
        compare(results[0].output, results[1].output, difference, magnitude);
    } else {
        compare(results[0].grad_value, results[1].grad_value, difference, magnitude);
        compare(results[0].grad_locations, results[1].grad_locations, difference, magnitude);
        compare(results[0].grad_attention, results[1].grad_attention, difference, magnitude);
    }
    std::printf("%s/%s/%s, %d threads, %d rounds of %d %s call%s\n", options.op.c_str(), shape.id.c_str(),
                options.distribution.c_str(), options.threads, options.rounds, options.calls,
                options.plan ? "warm plan" : "one-shot", options.calls == 1 ? "" : "s");
    for (int which = 0; which < 2; which++) libraries[which].plan_destroy(plans[which]);  // null: nothing
    // Microseconds for calls of a fixed cost's size.
    const bool small = median(times[0]) < 0.1;
    const char *unit = small ? "us" : "ms";
    const double scale = small ? 1000.0 : 1.0;
    for (int which = 0; which < 2; which++) {
        std::printf("%s %s: median %.3f %s, min %.3f %s\n", which == 0 ? "A" : "B",
                    (which == 0 ? options.library_a : options.library_b).c_str(), median(times[which]) * scale, unit,
                    *std::min_element(times[which].begin(), times[which].end()) * scale, unit);
    }
    std::printf("B/A: median of the rounds' ratios %.3f (min %.3f, max %.3f)\n", median(ratios),
                *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
    std::printf("results: largest |A - B| %.3g, largest |A| %.3g\n", difference, magnitude);
    if (options.require_identical && difference != 0) {
        std::fprintf(stderr, "msda_ab: the two builds' results differ (--require-identical)\n");
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    const Options options = parse(argc, argv);
    try {
        return run(options);
    } catch (const std::exception &error) {
        std::fprintf(stderr, "msda_ab: %s\n", error.what());
        return 1;
    }
}
