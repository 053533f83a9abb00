#include "kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>

#include "msda_reference.h"

namespace msda_sweep {

using Halide::Runtime::Buffer;

const char *kernel_name(Kernel kernel) {
    switch (kernel) {
    case Kernel::forward: return "forward";
    case Kernel::grad_value: return "grad_value";
    case Kernel::grad_sample: return "grad_sample";
    }
    return "?";
}

const std::vector<Kernel> &all_kernels() {
    static const std::vector<Kernel> kernels = {Kernel::forward, Kernel::grad_value, Kernel::grad_sample};
    return kernels;
}

const char *walk_name(Walk walk) { return walk == Walk::by_query ? "by_query" : "by_level"; }

Halide::AutoschedulerParams autoscheduler_params(const std::string &name, int threads) {
    static std::mutex mutex;
    static std::set<std::string> loaded;
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (!loaded.count(name)) {
            std::string library = name;
            std::transform(library.begin(), library.end(), library.begin(), ::tolower);
            Halide::load_plugin(std::string(MSDA_SWEEP_HALIDE_LIB_DIR) + "/libautoschedule_" + library + ".so");
            loaded.insert(name);
        }
    }
    const std::string parallelism = std::to_string(threads);
    if (name == "Mullapudi2016") {
        // Its cost model's machine: the last-level cache a core's share of
        // (this machine's 32 MiB L3 over 2 cores would be 16 MiB; its L2 is
        // what one core keeps), and its arithmetic-to-load balance.
        return {name, {{"parallelism", parallelism}, {"last_level_cache_size", "1048576"}, {"balance", "40"}}};
    }
    return {name, {{"parallelism", parallelism}}};
}

namespace {

halide_dimension_t dim(std::int64_t extent, std::int64_t stride) {
    return halide_dimension_t(0, static_cast<std::int32_t>(extent), static_cast<std::int32_t>(stride));
}

// Dimensions innermost first, each extent with its dense stride but for
// the first, whose stride is `step` (2 for an interleaved location plane).
std::vector<halide_dimension_t> dense(std::vector<std::int64_t> extents, std::int64_t step = 1) {
    std::vector<halide_dimension_t> dims;
    std::int64_t stride = step;
    for (std::int64_t extent : extents) {
        dims.push_back(dim(extent, stride));
        stride *= extent;
    }
    return dims;
}

template <typename T>
Buffer<> wrap(T *data, std::vector<halide_dimension_t> dims) {
    return Buffer<>(Buffer<T>(data, static_cast<int>(dims.size()), dims.data()));
}

}  // namespace

std::int64_t l2_bytes_of_this_cpu() {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index2/size");
    std::string text;
    if (!(in >> text) || text.empty()) return 1 << 20;
    std::int64_t value = std::stoll(text);
    if (text.back() == 'K') value <<= 10;
    if (text.back() == 'M') value <<= 20;
    return value;
}

StagedLayouts staged_layouts(const msda_bench::Shape &shape, Walk walk) {
    const std::int64_t rows = shape.value_length();
    const std::int64_t bytes = shape.batch * rows * shape.heads * shape.channels * 4;
    const std::int64_t samples_per_head = shape.queries * static_cast<std::int64_t>(shape.levels.size()) * shape.points;
    const bool staged = shape.heads >= 2 && bytes > l2_bytes_of_this_cpu() && samples_per_head >= 4 * rows;
    return {.value_head_major = staged && walk == Walk::by_level, .grad_value_head_major = staged};
}

Tensors::Tensors(const msda_bench::Problem &problem, Walk walk)
    : layouts(staged_layouts(problem.shape, walk)), problem_(problem) {
    const bool value_head_major = layouts.value_head_major, grad_value_head_major = layouts.grad_value_head_major;
    msda_bench::Problem &p = problem_;
    const msda_bench::Shape &s = p.shape;
    const std::int64_t levels = static_cast<std::int64_t>(s.levels.size());
    const std::int64_t rows = s.value_length();
    output.assign(s.batch * s.queries * s.heads * s.channels, 0.0f);
    grad_value.assign(p.value.size(), 0.0f);
    grad_attention_weights.assign(p.attention_weights.size(), 0.0f);
    grad_sampling_locations.assign(p.sampling_locations.size(), 0.0f);
    const std::vector<std::int64_t> value_shaped = {s.channels, s.heads, rows, s.batch};
    const std::vector<std::int64_t> query_shaped = {s.channels, s.heads, s.queries, s.batch};
    const std::vector<std::int64_t> per_sample = {s.points, levels, s.heads, s.queries, s.batch};
    // (c, h, row, b) in BLNC order, or head-major.
    const std::vector<halide_dimension_t> head_major = {dim(s.channels, 1), dim(s.heads, rows * s.channels),
                                                        dim(rows, s.channels), dim(s.batch, s.heads * rows * s.channels)};
    std::vector<halide_dimension_t> value_dims = dense(value_shaped);
    float *value_data = p.value.data();
    if (value_head_major) {
        value_dims = head_major;
        value_copy.resize(p.value.size());
        for (std::int64_t b = 0; b < s.batch; b++) {
            for (std::int64_t row = 0; row < rows; row++) {
                for (std::int64_t h = 0; h < s.heads; h++) {
                    const float *from = &p.value[((b * rows + row) * s.heads + h) * s.channels];
                    std::copy(from, from + s.channels, &value_copy[((b * s.heads + h) * rows + row) * s.channels]);
                }
            }
        }
        value_data = value_copy.data();
    }
    buffers_ = {
        {"value", wrap(value_data, value_dims)},
        {"spatial_shapes", wrap(p.spatial_shapes.data(), dense({2, levels}))},
        {"level_start_index", wrap(p.level_start_index.data(), dense({levels}))},
        {"locations_x", wrap(p.sampling_locations.data(), dense(per_sample, 2))},
        {"locations_y", wrap(p.sampling_locations.data() + 1, dense(per_sample, 2))},
        {"attention_weights", wrap(p.attention_weights.data(), dense(per_sample))},
        {"grad_output", wrap(p.grad_output.data(), dense(query_shaped))},
        {"output", wrap(output.data(), dense(query_shaped))},
        {"grad_value", wrap(grad_value.data(), grad_value_head_major ? head_major : dense(value_shaped))},
        // part=sample's outputs: the weights' gradient, then the location
        // gradient's x and y planes.
        {"grads_0", wrap(grad_attention_weights.data(), dense(per_sample))},
        {"grads_1", wrap(grad_sampling_locations.data(), dense(per_sample, 2))},
        {"grads_2", wrap(grad_sampling_locations.data() + 1, dense(per_sample, 2))},
    };
    // The host holds the data: a device target copies it in on first use.
    for (auto &[name, buffer] : buffers_) buffer.set_host_dirty(true);
}

Buffer<> &Tensors::named(const std::string &name) {
    for (auto &[buffer_name, buffer] : buffers_) {
        if (buffer_name == name) return buffer;
    }
    throw std::logic_error("msda sweep: the generators have an argument \"" + name + "\" the sweep does not know");
}

void Tensors::sync_outputs() {
    for (auto &[name, buffer] : buffers_) {
        if (buffer.has_device_allocation()) buffer.copy_to_host();
    }
}

namespace {

// The generator and its parameters for a variant.
std::string generator_of(const Variant &variant) {
    return variant.kernel == Kernel::forward ? "msda_forward" : "msda_backward";
}

Halide::GeneratorParamsMap params_of(const Halide::Target &target, const Variant &variant) {
    Halide::GeneratorParamsMap params = {
        {"channels", std::to_string(variant.sizes.channels)},
        {"levels", std::to_string(variant.walk == Walk::by_query ? variant.sizes.levels : 0)},
        {"points", std::to_string(variant.walk == Walk::by_query ? variant.sizes.points : 0)},
        {"storage", "float32"},
        {"locations", "float32"},
        {"op", "msda"},
    };
    if (variant.kernel != Kernel::forward) params["part"] = variant.kernel == Kernel::grad_value ? "value" : "sample";
    // The GPU family's deterministic grad_value, as the build ships it
    // (cmake/MsdaHalide.cmake): fixed-point sums.
    if (variant.kernel == Kernel::grad_value && target.has_gpu_feature()) params["sum"] = "fixed_point";
    if (!variant.knobs.empty()) params["knobs"] = "all@" + variant.knobs;
    return params;
}

struct Built {
    Halide::Pipeline pipeline;
    std::vector<Halide::Argument> inputs;
    std::vector<std::string> names;  // every argument's, inputs then outputs
};

Built build(const Halide::Target &target, const Variant &variant) {
    Halide::GeneratorContext context(target);
    if (!variant.autoscheduler.empty()) {
        context = Halide::GeneratorContext(target, autoscheduler_params(variant.autoscheduler, 2));
    }
    auto generator = Halide::Internal::GeneratorRegistry::create(generator_of(variant), context);
    if (!generator) throw std::runtime_error("msda sweep: no generator " + generator_of(variant));
    generator->set_generatorparam_values(params_of(target, variant));
    Built built{generator->build_pipeline(), {}, {}};
    if (!variant.autoscheduler.empty()) built.pipeline.apply_autoscheduler(target, context.autoscheduler_params());
    std::vector<std::string> outputs;
    for (const auto &info : generator->arginfos()) {
        if (info.dir == Halide::Internal::ArgInfoDirection::Input) {
            for (const Halide::Parameter &p : generator->input_parameter(info.name)) {
                built.inputs.emplace_back(p.name(),
                                          p.is_buffer() ? Halide::Argument::InputBuffer : Halide::Argument::InputScalar,
                                          p.type(), p.dimensions(), p.get_argument_estimates());
                built.names.push_back(p.name());
            }
        } else if (info.types.size() == 1) {
            outputs.push_back(info.name);
        } else {
            for (std::size_t i = 0; i < info.types.size(); i++) outputs.push_back(info.name + "_" + std::to_string(i));
        }
    }
    built.names.insert(built.names.end(), outputs.begin(), outputs.end());
    return built;
}

}  // namespace

Compiled::Compiled(const Halide::Target &target, const Variant &variant) {
    const auto start = std::chrono::steady_clock::now();
    Built built = build(target, variant);
    callable_ = built.pipeline.compile_to_callable(built.inputs, target);
    arguments_ = std::move(built.names);
    compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void compile_to_object(const Halide::Target &target, const Variant &variant, const std::string &path) {
    Built built = build(target, variant);
    built.pipeline.compile_to_object(path, built.inputs, "msda_sweep_candidate", target);
}

void compile_to_static_library(const Halide::Target &target, const Variant &variant, const std::string &prefix) {
    Built built = build(target, variant);
    built.pipeline.compile_to_static_library(prefix, built.inputs, "msda_sweep_candidate", target);
}

void Compiled::run(Tensors &tensors) const {
    const bool flags[3] = {tensors.align_corners, tensors.border, false};
    Halide::JITUserContext context;
    Halide::JITUserContext *context_pointer = &context;
    std::vector<const void *> argv = {&context_pointer};
    for (const std::string &name : arguments_) {
        if (name == "align_corners") {
            argv.push_back(&flags[0]);
        } else if (name == "border") {
            argv.push_back(&flags[1]);
        } else if (name == "nearest") {
            argv.push_back(&flags[2]);
        } else {
            argv.push_back(tensors.named(name).raw_buffer());
        }
    }
    const int status = callable_.call_argv_fast(argv.size(), argv.data());
    if (status != 0) throw std::runtime_error("msda sweep: the compiled kernel failed (Halide error " + std::to_string(status) + ")");
    tensors.sync_outputs();
}

msda_bench::Problem check_problem(const Variant &variant) {
    msda_bench::Shape shape;
    shape.id = "check";
    shape.batch = 2;
    shape.queries = 37;
    shape.heads = 3;
    shape.channels = variant.sizes.channels > 0 ? variant.sizes.channels : 19;
    shape.points = variant.sizes.points > 0 ? variant.sizes.points : 4;
    const std::vector<msda_bench::Level> small = {{6, 9}, {3, 5}, {2, 2}, {1, 3}, {4, 1}, {1, 1}};
    const int levels = variant.sizes.levels > 0 ? variant.sizes.levels : 4;
    shape.levels.assign(small.begin(), small.begin() + std::min<int>(levels, small.size()));
    msda_bench::Problem problem = msda_bench::make_problem(shape, msda_bench::Distribution::uniform, 7);
    // Past every border: [-0.15, 1.15].
    for (float &location : problem.sampling_locations) location = location * 1.3f - 0.15f;
    return problem;
}

namespace {

// "" when `got` is within float32's tolerance of the reference (SPEC.md:
// 1e-5 of the tensor's largest magnitude), else how far it is.
std::string compare(const char *what, const msda_bench::Floats &got, const std::vector<double> &expected) {
    const double error = msda::reference::max_relative_error(std::vector<float>(got.begin(), got.end()), expected);
    if (error <= 1e-5) return "";
    return std::string(what) + ": |error| / the reference's largest magnitude = " + std::to_string(error) +
           " > 1e-5";
}

}  // namespace

std::string check_against_reference(const Runner &run, const Variant &variant) {
    for (const bool align_and_border : {false, true}) {
        msda_bench::Problem problem = check_problem(variant);
        const msda_bench::Shape &s = problem.shape;
        msda::reference::Problem reference;
        reference.batch = s.batch;
        reference.queries = s.queries;
        reference.heads = s.heads;
        reference.channels = s.channels;
        reference.points = s.points;
        for (const msda_bench::Level &level : s.levels) reference.levels.push_back({level.height, level.width});
        reference.value.assign(problem.value.begin(), problem.value.end());
        reference.sampling_locations.assign(problem.sampling_locations.begin(), problem.sampling_locations.end());
        reference.attention_weights.assign(problem.attention_weights.begin(), problem.attention_weights.end());
        reference.align_corners = reference.border = align_and_border;
        Tensors tensors(problem, variant.walk);
        tensors.align_corners = tensors.border = align_and_border;
        run(tensors);
        std::string verdict;
        const std::string setting = align_and_border ? " (align_corners, border)" : "";
        if (variant.kernel == Kernel::forward) {
            verdict = compare("output", tensors.output, msda::reference::forward(reference));
        } else {
            const std::vector<double> grad_output(problem.grad_output.begin(), problem.grad_output.end());
            const msda::reference::Gradients expected = msda::reference::backward(reference, grad_output);
            if (variant.kernel == Kernel::grad_value) {
                verdict = compare("grad_value", tensors.grad_value, expected.value);
            } else {
                verdict = compare("grad_attention_weights", tensors.grad_attention_weights, expected.attention_weights);
                if (verdict.empty()) {
                    verdict = compare("grad_sampling_locations", tensors.grad_sampling_locations,
                                      expected.sampling_locations);
                }
            }
        }
        if (!verdict.empty()) return verdict + setting;
    }
    return "";
}

}  // namespace msda_sweep
