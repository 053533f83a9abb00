// The MSDA generators: msda_forward and msda_backward. They declare the
// tensors (free strides, so every layout is a stride permutation of one
// pipeline), build the algorithm from msda_pipeline.h and hand the Funcs to
// the target family's schedule.
#include "Halide.h"
#include "msda_pipeline.h"
#include "schedules.h"

namespace msda {
namespace {

using namespace Halide;

enum class BackwardPart { value, sample, attention_weights, sampling_locations };

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
    GeneratorParam<int> query_tile{"query_tile", 16};
    GeneratorParam<int> vector_width{"vector_width", 0};

    Input<Buffer<float, 4>> value{"value"};  // (c, h, row, b), c dense
    Input<Buffer<int32_t, 2>> spatial_shapes{"spatial_shapes"};
    Input<Buffer<int32_t, 1>> level_start_index{"level_start_index"};
    Input<Buffer<float, 5>> locations_x{"locations_x"};
    Input<Buffer<float, 5>> locations_y{"locations_y"};
    Input<Buffer<float, 5>> attention_weights{"attention_weights"};
    Input<bool> align_corners{"align_corners"};
    Input<bool> border{"border"};

protected:
    MsdaInputs declare_inputs() {
        allow_any_strides(spatial_shapes, 2);
        allow_any_strides(level_start_index, 1);
        allow_any_strides(locations_x, 5);
        allow_any_strides(locations_y, 5);
        allow_any_strides(attention_weights, 5);
        if (channels > 0) value.dim(0).set_bounds(0, (int)channels);

        // Estimates: the Deformable DETR encoder layer of the demo.
        value.set_estimates({{0, 32}, {0, 8}, {0, 22223}, {0, 2}});
        spatial_shapes.set_estimates({{0, 2}, {0, 4}});
        level_start_index.set_estimates({{0, 4}});
        const Region per_sample = {{0, 4}, {0, 4}, {0, 8}, {0, 22223}, {0, 2}};
        locations_x.set_estimates(per_sample);
        locations_y.set_estimates(per_sample);
        attention_weights.set_estimates(per_sample);

        MsdaInputs in;
        in.value = value;
        in.spatial_shapes = spatial_shapes;
        in.level_start_index = level_start_index;
        in.locations_x = locations_x;
        in.locations_y = locations_y;
        in.attention_weights = attention_weights;
        in.rows = value.dim(2).extent();
        in.points = attention_weights.dim(0).extent();
        in.levels = attention_weights.dim(1).extent();
        in.queries = attention_weights.dim(3).extent();
        in.channels = channels > 0 ? Expr((int)channels) : value.dim(0).extent();
        in.align_corners = align_corners;
        in.border = border;
        return in;
    }

    schedules::Tunables tunables() const {
        schedules::Tunables t;
        t.channels = channels;
        t.query_tile = query_tile;
        t.vector_width = vector_width;
        return t;
    }
};

class MsdaForward : public MsdaGeneratorBase<MsdaForward> {
public:
    Output<Buffer<float, 4>> output{"output"};  // (c, h, q, b)

    void generate() {
        MsdaInputs in = declare_inputs();
        pipeline = build_forward(in);
        output = pipeline.output;
        if (channels > 0) output.dim(0).set_bounds(0, (int)channels);
        output.set_estimates({{0, 32}, {0, 8}, {0, 22223}, {0, 2}});
    }

    void schedule() {
        pipeline.output = output;
        schedules::schedule_forward(get_target(), pipeline, tunables());
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

    Input<Buffer<float, 4>> grad_output{"grad_output"};  // (c, h, q, b), c dense

    void configure() {
        if (part == BackwardPart::value) {
            grad_value_output = add_output<Buffer<float, 4>>("grad_value");
        } else {
            int count = part == BackwardPart::sample ? 3 : part == BackwardPart::sampling_locations ? 2 : 1;
            grads_output = add_output<Func>("grads", std::vector<Type>(count, Float(32)), 5);
        }
    }

    void generate() {
        MsdaInputs in = declare_inputs();
        if (channels > 0) grad_output.dim(0).set_bounds(0, (int)channels);
        grad_output.set_estimates({{0, 32}, {0, 8}, {0, 22223}, {0, 2}});
        if (part == BackwardPart::value) {
            value_pipeline = build_grad_value(in, grad_output);
            Output<Buffer<float, 4>> &out = *grad_value_output;
            out = value_pipeline.grad_value;
            if (channels > 0) out.dim(0).set_bounds(0, (int)channels);
            out.set_estimates({{0, 32}, {0, 8}, {0, 22223}, {0, 2}});
        } else {
            SampleGradients which = part == BackwardPart::sample ? SampleGradients::both
                                    : part == BackwardPart::attention_weights
                                        ? SampleGradients::attention_weights
                                        : SampleGradients::sampling_locations;
            sample_pipeline = build_grad_sample(in, grad_output, which);
            Output<Func> &out = *grads_output;
            out = sample_pipeline.grads;
            for (OutputImageParam plane : Func(out).output_buffers()) {
                allow_any_strides(plane, 5);
                plane.set_estimates({{0, 4}, {0, 4}, {0, 8}, {0, 22223}, {0, 2}});
            }
        }
    }

    void schedule() {
        if (part == BackwardPart::value) {
            value_pipeline.grad_value = *grad_value_output;
            schedules::schedule_grad_value(get_target(), value_pipeline, tunables());
        } else {
            sample_pipeline.grads = *grads_output;
            schedules::schedule_grad_sample(get_target(), sample_pipeline, tunables());
        }
    }

private:
    Output<Buffer<float, 4>> *grad_value_output = nullptr;
    Output<Func> *grads_output = nullptr;
    GradValuePipeline value_pipeline;
    GradSamplePipeline sample_pipeline;
};

}  // namespace
}  // namespace msda

HALIDE_REGISTER_GENERATOR(msda::MsdaForward, msda_forward)
HALIDE_REGISTER_GENERATOR(msda::MsdaBackward, msda_backward)
