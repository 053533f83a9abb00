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
// --sample-order sets Options::sample_order on both sides (a library
// older than that option ignores it).
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

// The C API of one loaded build.
struct Library {
    std::string path;
    msda_status (*forward)(const msda_forward_args *, const msda_options *) = nullptr;
    msda_status (*backward)(const msda_backward_args *, const msda_options *) = nullptr;
    msda_options (*default_options)() = nullptr;
    void (*set_num_threads)(int) = nullptr;
    const char *(*last_error)() = nullptr;
    msda_tensor (*contiguous_tensor)(void *, msda_dtype, int, const std::int64_t *) = nullptr;

    // A row-major tensor description (msda_contiguous).
    msda_tensor contiguous(void *data, msda_dtype dtype, const std::vector<std::int64_t> &shape) const {
        return contiguous_tensor(data, dtype, static_cast<int>(shape.size()), shape.data());
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
    resolve(handle, path, "msda_forward", library.forward);
    resolve(handle, path, "msda_backward", library.backward);
    resolve(handle, path, "msda_default_options", library.default_options);
    resolve(handle, path, "msda_set_num_threads", library.set_num_threads);
    resolve(handle, path, "msda_last_error", library.last_error);
    resolve(handle, path, "msda_contiguous", library.contiguous_tensor);
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
    int rounds = 10, threads = 2;
    bool require_identical = false;
};

[[noreturn]] void usage(const std::string &message) {
    std::fprintf(stderr,
                 "msda_ab: %s\nusage: msda_ab LIB_A LIB_B [--shape ID] [--distribution local|uniform] "
                 "[--op forward|backward] [--sample-order automatic|by_level|by_query] [--rounds N] [--threads N] "
                 "[--require-identical]\n",
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
        } else if (arg == "--rounds") {
            options.rounds = positive(arg, next());
        } else if (arg == "--threads") {
            options.threads = positive(arg, next());
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
    const std::vector<Shape> shapes = canonical_shapes();
    const auto found = std::find_if(shapes.begin(), shapes.end(), [&](const Shape &s) { return s.id == options.shape; });
    if (found == shapes.end()) usage("unknown shape '" + options.shape + "'");
    const Shape &shape = *found;
    Problem problem = make_problem(shape, options.distribution == "uniform" ? Distribution::uniform
                                                                           : Distribution::local);
    const Library libraries[2] = {load(options.library_a), load(options.library_b)};
    const Library &describe = libraries[0];  // builds the tensor descriptions both are given

    const std::int64_t levels = static_cast<std::int64_t>(shape.levels.size());
    const std::vector<std::int64_t> value_shape = {shape.batch, shape.value_length(), shape.heads, shape.channels};
    const std::vector<std::int64_t> per_query = {shape.batch, shape.queries, shape.heads * shape.channels};
    const std::vector<std::int64_t> locations_shape = {shape.batch, shape.queries, shape.heads, levels, shape.points, 2};
    const std::vector<std::int64_t> weights_shape = {shape.batch, shape.queries, shape.heads, levels, shape.points};
    const msda_tensor value = describe.contiguous(problem.value.data(), MSDA_F32, value_shape);
    const msda_tensor spatial_shapes = describe.contiguous(problem.spatial_shapes.data(), MSDA_I32, {levels, 2});
    const msda_tensor level_start_index = describe.contiguous(problem.level_start_index.data(), MSDA_I32, {levels});
    const msda_tensor locations = describe.contiguous(problem.sampling_locations.data(), MSDA_F32, locations_shape);
    const msda_tensor weights = describe.contiguous(problem.attention_weights.data(), MSDA_F32, weights_shape);
    const msda_tensor grad_output = describe.contiguous(problem.grad_output.data(), MSDA_F32, per_query);

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
    auto call = [&](int which) {
        const Library &library = libraries[which];
        Results &r = results[which];
        library.set_num_threads(options.threads);
        msda_options msda = library.default_options();
        // Set whatever the library's defaults say: a build older than the
        // field does not write it (and ignores it).
        msda.sample_order = options.sample_order == "by_level"   ? MSDA_SAMPLE_ORDER_BY_LEVEL
                             : options.sample_order == "by_query" ? MSDA_SAMPLE_ORDER_BY_QUERY
                                                                   : MSDA_SAMPLE_ORDER_AUTOMATIC;
        const auto start = std::chrono::steady_clock::now();
        msda_status status;
        if (options.op == "forward") {
            const msda_forward_args args{value, spatial_shapes, level_start_index, locations, weights,
                                         library.contiguous(r.output.data(), MSDA_F32, per_query)};
            status = library.forward(&args, &msda);
        } else {
            const msda_backward_args args{value, spatial_shapes, level_start_index, locations, weights, grad_output,
                                          library.contiguous(r.grad_value.data(), MSDA_F32, value_shape),
                                          library.contiguous(r.grad_locations.data(), MSDA_F32, locations_shape),
                                          library.contiguous(r.grad_attention.data(), MSDA_F32, weights_shape)};
            status = library.backward(&args, &msda);
        }
        const auto end = std::chrono::steady_clock::now();
        if (status != MSDA_OK) throw std::runtime_error(library.path + ": " + library.last_error());
        return std::chrono::duration<double, std::milli>(end - start).count();
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
    std::printf("%s/%s/%s, %d threads, %d rounds\n", options.op.c_str(), shape.id.c_str(),
                options.distribution.c_str(), options.threads, options.rounds);
    std::printf("A %s: median %.3f ms, min %.3f ms\n", options.library_a.c_str(), median(times[0]),
                *std::min_element(times[0].begin(), times[0].end()));
    std::printf("B %s: median %.3f ms, min %.3f ms\n", options.library_b.c_str(), median(times[1]),
                *std::min_element(times[1].begin(), times[1].end()));
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
