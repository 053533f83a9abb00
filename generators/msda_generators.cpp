// The MSDA generators: msda_forward, msda_backward and msda_relayout. They
// declare the tensors (free strides, so every layout is a stride permutation
// of one pipeline, plus what the target's schedule family requires), build
// the algorithm from algorithm/msda_pipeline.h and hand the Funcs to the
// family's schedule (schedules/).
#include "Halide.h"
#include "msda_pipeline.h"
#include "schedules.h"

namespace msda {
namespace {

using namespace Halide;

enum class BackwardPart { value, sample, attention_weights, sampling_locations };

const std::map<std::string, Operator> operators = {{"msda", Operator::msda}, {"gka", Operator::gka}};

const std::map<std::string, GradValueSum> sum_kinds = {
    {"float32", GradValueSum::float32},
    {"float32_atomic", GradValueSum::float32_atomic},
    {"fixed_point", GradValueSum::fixed_point},
};

const std::map<std::string, BackwardPart> backward_parts = {
    {"value", BackwardPart::value},
    {"sample", BackwardPart::sample},
    {"attention_weights", BackwardPart::attention_weights},
    {"sampling_locations", BackwardPart::sampling_locations},
};

// Free strides on every dimension (the runtime passes any layout).
template <typename Param>
void allow_any_strides(Param &param, int dimensions) {
    for (int d = 0; d < dimensions; d++) param.dim(d).set_stride(Expr());
}

// A stored tensor as the pipelines read it: in the compute type (float32,
// or float64 for float64 storage), whatever it is stored as (an inline
// Func: each element is widened where it is loaded).
Func widened(const Func &stored, const Type &compute, const std::string &name) {
    Func f(name + (compute == Float(64) ? "_f64" : "_f32"));
    std::vector<Var> args = stored.args();
    std::vector<Expr> at(args.begin(), args.end());
    f(args) = cast(compute, stored(at));
    return f;
}

// The sizes the autoschedulers plan for (Halide's estimates), in one place:
// a variant's own compile-time C_h, N_l and N_p (32, 4 and 4 where it has
// none), and the rest those of the Deformable DETR encoder layer of the
// demo and the bench's M0 (2 batch elements of 22,223 queries, 8 heads,
// value's 22,223 rows).
enum class Estimated { value_shaped, query_shaped, per_sample, spatial_shapes, level_start_index };
Region estimated(Estimated tensor, const schedules::Specialization &sizes) {
    const int channels = sizes.channels > 0 ? sizes.channels : 32, levels = sizes.levels > 0 ? sizes.levels : 4,
              points = sizes.points > 0 ? sizes.points : 4;
    constexpr int heads = 8, queries = 22223, rows = 22223, batch = 2;
    switch (tensor) {
    case Estimated::value_shaped: return {{0, channels}, {0, heads}, {0, rows}, {0, batch}};
    case Estimated::query_shaped: return {{0, channels}, {0, heads}, {0, queries}, {0, batch}};
    case Estimated::per_sample: return {{0, points}, {0, levels}, {0, heads}, {0, queries}, {0, batch}};
    case Estimated::spatial_shapes: return {{0, 2}, {0, levels}};
    case Estimated::level_start_index: return {{0, levels}};
    }
    return {};
}

// A result rounded once to its storage type.
Func rounded(const Func &result, const Type &type, const std::string &name) {
    if (result.type() == type) return result;
    Func f(name);
    std::vector<Var> args = result.args();
    std::vector<Expr> at(args.begin(), args.end());
    f(args) = cast(type, result(at));
    return f;
}

// Shared by both generators: the inputs, their constraints and estimates.
template <typename Self>
class MsdaGeneratorBase : public Generator<Self> {
public:
    template <typename T>
    using Input = typename Generator<Self>::template Input<T>;
    template <typename T>
    using Output = typename Generator<Self>::template Output<T>;
    template <typename T>
    using GeneratorParam = typename Generator<Self>::template GeneratorParam<T>;

    GeneratorParam<int> channels{"channels", 0};
    // The schedule's knobs per class of target (schedules/knobs.h:
    // knobs_for_target): `CLASS@knob:value,...` entries separated by '/';
    // empty: the family defaults. The build writes it from the variant's
    // configuration and schedules/tuned.cmake.
    GeneratorParam<std::string> knobs{"knobs", ""};
    // A compile-time N_l and N_p (both, or neither: 0), for the forward and
    // MSDA's part=sample. They then walk the samples query by query, all of a
    // query's levels and points as one vector (schedules::Specialization), which
    // needs the (l, p) dimensions of sampling_locations, attention_weights
    // and their gradients in their canonical, dense order: strides (2, 2 N_p)
    // for the location planes, (1, N_p) for the weights. The runtime picks
    // such a variant only for tensors that have them (Options::sample_order).
    GeneratorParam<int> levels{"levels", 0};
    GeneratorParam<int> points{"points", 0};
    // Storage types: value, attention_weights, output, grad_output and their
    // gradients share `storage`; sampling_locations and its gradient have
    // `locations` (float32, or the storage type; float64 storage has float64
    // locations). Arithmetic is float64 for float64 storage and float32 for
    // the rest (compute_type_for): inputs are widened as they are read,
    // results rounded once as they are written.
    GeneratorParam<Type> storage{"storage", Float(32)};
    GeneratorParam<Type> locations{"locations", Float(32)};
    // msda, or gka (nearest-pixel samples at absolute pixel coordinates).
    GeneratorParam<Operator> op{"op", Operator::msda, operators};

    Input<Buffer<void, 4>> value{"value"};  // (c, h, row, b), c dense
    Input<Buffer<int32_t, 2>> spatial_shapes{"spatial_shapes"};
    Input<Buffer<int32_t, 1>> level_start_index{"level_start_index"};
    Input<Buffer<void, 5>> locations_x{"locations_x"};
    Input<Buffer<void, 5>> locations_y{"locations_y"};
    Input<Buffer<void, 5>> attention_weights{"attention_weights"};
    Input<bool> align_corners{"align_corners"};  // MSDA only
    Input<bool> border{"border"};                // MSDA only
    Input<bool> nearest{"nearest"};              // GKA only: round half to even instead of floor

protected:
    void configure_inputs() {
        if (Type(storage) == Float(64) && Type(locations) != Float(64)) {
            throw std::invalid_argument("msda generators: float64 storage has float64 locations");
        }
        value.set_type(storage);
        attention_weights.set_type(storage);
        locations_x.set_type(locations);
        locations_y.set_type(locations);
    }

    MsdaInputs declare_inputs() {
        allow_any_strides(spatial_shapes, 2);
        allow_any_strides(level_start_index, 1);
        allow_any_strides(locations_x, 5);
        allow_any_strides(locations_y, 5);
        allow_any_strides(attention_weights, 5);
        if (channels > 0) value.dim(0).set_bounds(0, (int)channels);
        if ((levels > 0) != (points > 0) || levels < 0 || points < 0) {
            throw std::invalid_argument("msda generators: levels and points are both compile-time (> 0) or both 0");
        }
        if (points > 0) {
            for (Input<Buffer<void, 5>> *plane : {&locations_x, &locations_y}) {
                plane->dim(0).set_bounds(0, (int)points);
                plane->dim(1).set_bounds(0, (int)levels);
                if (dense_samples()) plane->dim(0).set_stride(2).dim(1).set_stride(2 * (int)points);
            }
            attention_weights.dim(0).set_bounds(0, (int)points);
            attention_weights.dim(1).set_bounds(0, (int)levels);
            if (dense_samples()) attention_weights.dim(0).set_stride(1).dim(1).set_stride((int)points);
        }

        value.set_estimates(estimated(Estimated::value_shaped, specialization()));
        spatial_shapes.set_estimates(estimated(Estimated::spatial_shapes, specialization()));
        level_start_index.set_estimates(estimated(Estimated::level_start_index, specialization()));
        align_corners.set_estimate(false);
        border.set_estimate(false);
        nearest.set_estimate(false);
        const Region per_sample = estimated(Estimated::per_sample, specialization());
        locations_x.set_estimates(per_sample);
        locations_y.set_estimates(per_sample);
        attention_weights.set_estimates(per_sample);

        MsdaInputs in;
        in.compute = compute_type();
        in.value = widened(value, in.compute, "value");
        in.spatial_shapes = spatial_shapes;
        in.level_start_index = level_start_index;
        in.locations_x = widened(locations_x, in.compute, "locations_x");
        in.locations_y = widened(locations_y, in.compute, "locations_y");
        in.attention_weights = widened(attention_weights, in.compute, "attention_weights");
        in.rows = value.dim(2).extent();
        in.points = points > 0 ? Expr((int)points) : attention_weights.dim(0).extent();
        in.levels = levels > 0 ? Expr((int)levels) : attention_weights.dim(1).extent();
        in.queries = attention_weights.dim(3).extent();
        in.heads = attention_weights.dim(2).extent();
        in.batch = attention_weights.dim(4).extent();
        in.channels = channels > 0 ? Expr((int)channels) : value.dim(0).extent();
        in.align_corners = align_corners;
        in.border = border;
        in.op = op;
        in.nearest = nearest;
        in.storage = storage;
        in.locations_storage = locations;
        const Target target = this->get_target();
        in.floor_by_conversion = target.arch == Target::X86 && !target.has_feature(Target::SSE41);
        return in;
    }

    Type compute_type() const { return compute_type_for(storage); }

    // Whether a compile-time N_l and N_p also fixes the (l, p) strides of
    // the per-sample tensors: the target's schedule family says.
    bool dense_samples() { return schedules::input_requirements(this->get_target()).dense_samples; }

    schedules::Specialization specialization() const {
        return {.channels = channels, .levels = levels, .points = points};
    }
    schedules::Knobs target_knobs() { return schedules::knobs_for_target(this->get_target(), knobs.value()); }

    // MsdaInputs::flat_rows, where the family's schedules specialize on it
    // and the knobs ask for it (not under an autoscheduler, whose schedule
    // would not): every row's offset row * stride + c in an int32.
    void allow_flat_rows(MsdaInputs &in) {
        if (this->using_autoscheduler() || !schedules::input_requirements(this->get_target()).flat_rows ||
            !target_knobs().flat_rows) {
            return;
        }
        // (In int32, without overflow, and in a form the simplifier keeps:
        // the pipeline's selects on it fold away only where they match the
        // specialization's condition.)
        in.row_stride = value.dim(2).stride();
        in.flat_rows = cast<uint32_t>(in.row_stride) < cast<uint32_t>((0x7fffffff - in.channels) / max(in.rows, 1) + 1);
    }
};

class MsdaForward : public MsdaGeneratorBase<MsdaForward> {
public:
    Output<Buffer<void, 4>> output{"output"};  // (c, h, q, b)

    void configure() {
        configure_inputs();
        output.set_type(storage);
    }

    void generate() {
        MsdaInputs in = declare_inputs();
        allow_flat_rows(in);
        pipeline = build_forward(in);
        output = pipeline.output;
        if (channels > 0) output.dim(0).set_bounds(0, (int)channels);
        output.set_estimates(estimated(Estimated::query_shaped, specialization()));
    }

    // With an autoscheduler (Halide's, in `msda sweep`), its schedule
    // replaces the family's.
    void schedule() {
        if (!using_autoscheduler()) {
            pipeline.output = output;
            schedules::schedule_forward(get_target(), pipeline, specialization(), target_knobs());
        }
        schedules::finish_pipeline(get_target(), get_pipeline());
    }

private:
    ForwardPipeline pipeline;
};

// One generator for every backward part, so each asked-for set of gradients
// is its own instantiation: part=value gives grad_value (the scatter);
// part=sample gives grad_attention_weights and the two planes of
// grad_sampling_locations from one pass; part=attention_weights or
// part=sampling_locations give only those.
class MsdaBackward : public MsdaGeneratorBase<MsdaBackward> {
public:
    GeneratorParam<BackwardPart> part{"part", BackwardPart::value, backward_parts};
    // part=value: how grad_value's contributions are summed (GradValueSum):
    // in float32 in a fixed order, in float32 by atomic adds (the GPU
    // family's Options::deterministic = false), or in fixed point (the GPU
    // family's deterministic sum).
    GeneratorParam<GradValueSum> sum{"sum", GradValueSum::float32, sum_kinds};

    Input<Buffer<void, 4>> grad_output{"grad_output"};  // (c, h, q, b), c dense

    // grad_value is summed in the compute type: when it is stored in half
    // precision, the sums go to a float32 output first (the plan's
    // workspace), then grad_value holds them rounded once.
    void configure() {
        configure_inputs();
        grad_output.set_type(storage);
        if ((levels > 0 || points > 0) && op != Operator::msda) {
            throw std::invalid_argument("msda_backward: compile-time levels and points are for MSDA only");
        }
        if (sum != GradValueSum::float32 && (part != BackwardPart::value || Type(storage) != Float(32))) {
            throw std::invalid_argument("msda_backward: sum=float32_atomic and sum=fixed_point are for part=value in "
                                        "float32 storage");
        }
        if (op == Operator::gka && part != BackwardPart::value && part != BackwardPart::attention_weights) {
            throw std::invalid_argument("msda_backward: GKA has gradients for value and attention_weights only");
        }
        if (part == BackwardPart::value) {
            if (Type(storage) != compute_type()) {
                grad_value_sums = add_output<Buffer<void, 4>>("grad_value_sums", Float(32));
            }
            grad_value_output = add_output<Buffer<void, 4>>("grad_value", storage);
        } else {
            std::vector<Type> types;
            if (part != BackwardPart::sampling_locations) types.push_back(storage);
            if (part != BackwardPart::attention_weights) types.insert(types.end(), 2, locations);
            grads_output = add_output<Func>("grads", types, 5);
        }
    }

    void generate() {
        MsdaInputs in = declare_inputs();
        if (channels > 0) grad_output.dim(0).set_bounds(0, (int)channels);
        grad_output.set_estimates(estimated(Estimated::query_shaped, specialization()));
        Func grad_output_wide = widened(grad_output, compute_type(), "grad_output");
        if (part == BackwardPart::value) {
            value_pipeline = build_grad_value(in, grad_output_wide, sum);
            if (grad_value_sums) {
                declare_value_shaped(*grad_value_sums, value_pipeline.grad_value);
                declare_value_shaped(*grad_value_output, value_pipeline.stored);
            } else {
                declare_value_shaped(*grad_value_output, value_pipeline.grad_value);
            }
        } else {
            SampleGradients which = part == BackwardPart::sample ? SampleGradients::both
                                    : part == BackwardPart::attention_weights
                                        ? SampleGradients::attention_weights
                                        : SampleGradients::sampling_locations;
            allow_flat_rows(in);
            sample_pipeline = build_grad_sample(in, grad_output_wide, which);
            Output<Func> &out = *grads_output;
            out = sample_pipeline.grads;
            const std::vector<OutputImageParam> planes = Func(out).output_buffers();
            for (std::size_t i = 0; i < planes.size(); i++) {
                OutputImageParam plane = planes[i];
                allow_any_strides(plane, 5);
                plane.set_estimates(estimated(Estimated::per_sample, specialization()));
                if (points > 0) {
                    // As the inputs (declare_inputs): grad_attention_weights'
                    // (l, p) block dense, the location gradient's planes
                    // with x and y interleaved (part=sample: the weights
                    // first, then x and y).
                    // (Only the first output's extents can be constrained;
                    // the others share them.)
                    const bool weights = part == BackwardPart::attention_weights ||
                                         (part == BackwardPart::sample && i == 0);
                    const int step = weights ? 1 : 2;
                    if (i == 0) {
                        plane.dim(0).set_bounds(0, (int)points);
                        plane.dim(1).set_bounds(0, (int)levels);
                    }
                    if (dense_samples()) {
                        plane.dim(0).set_stride(step);
                        plane.dim(1).set_stride(step * (int)points);
                    }
                }
            }
        }
    }

    void declare_value_shaped(Output<Buffer<void, 4>> &out, const Func &f) {
        out = f;
        if (channels > 0) out.dim(0).set_bounds(0, (int)channels);
        out.set_estimates(estimated(Estimated::value_shaped, specialization()));
    }

    void schedule() {
        if (!using_autoscheduler()) {
            if (part == BackwardPart::value) {
                if (grad_value_sums) {
                    value_pipeline.grad_value = *grad_value_sums;
                    value_pipeline.stored = *grad_value_output;
                } else {
                    value_pipeline.grad_value = *grad_value_output;
                }
                schedules::schedule_grad_value(get_target(), value_pipeline, specialization(), target_knobs());
            } else {
                sample_pipeline.grads = *grads_output;
                schedules::schedule_grad_sample(get_target(), sample_pipeline, specialization(), target_knobs());
            }
        }
        schedules::finish_pipeline(get_target(), get_pipeline());
    }

private:
    Output<Buffer<void, 4>> *grad_value_sums = nullptr;
    Output<Buffer<void, 4>> *grad_value_output = nullptr;
    Output<Func> *grads_output = nullptr;
    GradValuePipeline value_pipeline;
    GradSamplePipeline sample_pipeline;
};

// A copy of a value-shaped tensor (c, h, row, b) between two layouts, both
// with free strides (c dense): the runtime stages value one head at a time
// (head-major) for the kernels, and copies grad_value's head-major sums back
// into the caller's layout. Bits are copied as they are.
class MsdaRelayout : public Generator<MsdaRelayout> {
public:
    GeneratorParam<Type> storage{"storage", Float(32)};
    GeneratorParam<std::string> knobs{"knobs", ""};  // as MsdaGeneratorBase's

    Input<Buffer<void, 4>> input{"input"};
    Output<Buffer<void, 4>> output{"output"};

    void configure() {
        input.set_type(storage);
        output.set_type(storage);
    }

    void generate() {
        output(c, h, row, b) = input(c, h, row, b);
        for (int d = 1; d < 4; d++) {
            input.dim(d).set_stride(Expr());
            output.dim(d).set_stride(Expr());
        }
        input.set_estimates(estimated(Estimated::value_shaped, {}));
        output.set_estimates(estimated(Estimated::value_shaped, {}));
    }

    void schedule() {
        if (using_autoscheduler()) return;
        schedules::schedule_relayout(get_target(), output, c, h, row, b,
                                     schedules::knobs_for_target(get_target(), knobs.value()));
    }

private:
    Var c{"c"}, h{"h"}, row{"row"}, b{"b"};
};

}  // namespace
}  // namespace msda

HALIDE_REGISTER_GENERATOR(msda::MsdaRelayout, msda_relayout)
HALIDE_REGISTER_GENERATOR(msda::MsdaForward, msda_forward)
HALIDE_REGISTER_GENERATOR(msda::MsdaBackward, msda_backward)
