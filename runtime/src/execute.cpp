#include "execute.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backends.h"
#include "buffers.h"
#include "cpu_dispatch.h"
#include "scratch.h"

namespace msda::detail {

namespace {

void collect_error(void *user_context, const char *message) {
    if (user_context != nullptr) static_cast<CallContext *>(user_context)->message += message;
}

// grad_value is summed in its own storage type for float32 and float64
// (which compute in it), in float32 for half precision.
bool summed_in_storage(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }
halide_type_t sum_type(DType dtype) { return summed_in_storage(dtype) ? halide_type(dtype) : kFloat32; }

}  // namespace

void install_error_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        halide_set_error_handler(&collect_error);
        install_scratch_allocator();
    });
}

Workspace workspace_layout(const ProblemSize &size, const Options &options, TargetFamily family,
                           const Policy &policy) {
    // Validated sizes: value is addressable, so these products fit.
    const std::size_t elements = static_cast<std::size_t>(size.batch * size.value_length * size.heads * size.channels);
    Workspace workspace;
    const bool staged = stages_value(size, options, family, policy);
    constexpr std::size_t kAlignment = Workspace::kAlignment;
    if (staged) workspace.value_copy = (elements * dtype_size(size.dtype) + kAlignment - 1) / kAlignment * kAlignment;
    if (options.grad_value && (!summed_in_storage(size.dtype) || staged)) {
        workspace.sums = elements * (sum_type(size.dtype).bits / 8);
    }
    return workspace;
}

Prepared::Prepared(const ProblemSize &planned, const Options &planned_options, Buffers buffers)
    : size(planned), options(planned_options) {
    check_plan(size, options);
    // Plans fail here, before any work, when no compiled code may run on
    // this CPU; the generated code's error handler and scratch allocator
    // are in place before its first call.
    require_runnable_target();
    install_error_handler();
    backend = &backend_for(options.device);
    policy = &process_policy();
    kernels = select_kernels(size, options, backend->family());
    workspace = workspace_layout(size, options, backend->family(), *policy);
    if (buffers == Buffers::kept) pool = backend->make_pool();
}

namespace {

// The inputs every generated function takes first, and the checked call
// (its backend, queue and device buffers).
struct CommonInputs {
    HalideBuffer value, spatial_shapes, level_start_index, locations_x, locations_y, weights;
    bool align_corners, border, nearest;
    const CheckedCall &call;

    // The level table is only read by the generated code.
    CommonInputs(const TensorView &value_view, const TensorView &locations, const TensorView &attention_weights,
                 const CheckedCall &checked, const Options &options)
        : value(value_buffer(value_view, options.value_layout)),
          spatial_shapes(const_cast<std::int32_t *>(checked.levels.shapes.data()), kInt32, 2),
          level_start_index(const_cast<std::int32_t *>(checked.levels.starts.data()), kInt32, 1),
          locations_x(location_plane(locations, options.locations_layout, 0)),
          locations_y(location_plane(locations, options.locations_layout, 1)),
          weights(weight_buffer(attention_weights)),
          align_corners(options.align_corners),
          border(options.padding_mode == PaddingMode::border),
          nearest(options.rounding == Rounding::nearest),
          call(checked) {
        const std::int64_t level_count = static_cast<std::int64_t>(checked.levels.starts.size());
        spatial_shapes.set(0, 2, 1);
        spatial_shapes.set(1, level_count, 2);
        level_start_index.set(0, level_count, 1);
    }
};

// Runs a generated function with the call's error context; a failure
// becomes an msda::Error carrying Halide's message.
template <typename Function, typename... Args>
void invoke(const Variant &variant, CallContext &context, Function function, Args... args) {
    int result = function(&context, args...);
    if (result != 0) {
        throw Error(std::string("msda: generated code for ") + kind_name(variant.kind) + " failed (Halide error " +
                    std::to_string(result) + "): " + (context.message.empty() ? "no message" : context.message));
    }
}

// The variant's function, if its declaration is `Function`.
template <typename Function>
Function function_of(const Variant &variant, std::size_t outputs) {
    const Function *function = std::get_if<Function>(&variant.function);
    if (function == nullptr) {
        throw Error(std::string("msda: internal error: the generated code for ") + kind_name(variant.kind) +
                    " does not take the " + std::to_string(outputs) + " buffers this call passes");
    }
    return *function;
}

// One generated function on the call's backend: the six common inputs,
// then a backward's grad_value (read) and its results, or a forward's
// output.
template <typename... Extras>
void call(const Variant &variant, CommonInputs &in, Extras &...extras) {
    const auto function = function_of<PipelineFunction<sizeof...(Extras)>>(variant, sizeof...(Extras));
    auto body = [&](CallContext &context) {
        invoke(variant, context, function, in.value.get(), in.spatial_shapes.get(), in.level_start_index.get(),
               in.locations_x.get(), in.locations_y.get(), in.weights.get(), in.align_corners, in.border,
               in.nearest, extras.get()...);
    };
    using Body = decltype(body);
    HalideBuffer *const buffers[] = {&in.value,       &in.spatial_shapes, &in.level_start_index, &in.locations_x,
                                     &in.locations_y, &in.weights,        &extras...};
    const BoundCall bound{variant,
                          in.call.queue,
                          in.call.pool,
                          buffers,
                          sizeof(buffers) / sizeof(buffers[0]),
                          variant.kind == Kind::forward ? std::size_t{6} : std::size_t{7},
                          [](const void *closure, CallContext &context) { (*static_cast<const Body *>(closure))(context); },
                          &body};
    in.call.backend->run(bound);
}

// The copy between a value-shaped tensor's layouts (the CPU family's).
void call_relayout(const Variant *copy, DType dtype, HalideBuffer &from, HalideBuffer &to) {
    if (copy == nullptr) throw Error(std::string("msda: this build has no relayout for ") + dtype_name(dtype));
    CallContext context;
    invoke(*copy, context, function_of<RelayoutFunction>(*copy, 1), from.get(), to.get());
}

// grad_value when there is nothing to scatter (N_q == 0): all zeros (+0 in
// every storage dtype). On a device: its span read, its elements zeroed,
// written back.
void fill_zeros(const TensorView &t, const CheckedCall &checked) {
    const std::int64_t size = static_cast<std::int64_t>(dtype_size(t.dtype));
    if (t.device_type == DeviceType::cpu) {
        for_each_element(t, [&](std::int64_t offset) { std::memset(element(t, offset), 0, size); });
        return;
    }
    if (t.numel() == 0) return;
    const Reach reach = reach_of(t);
    const std::uint64_t begin = static_cast<std::uint64_t>(t.byte_offset + reach.low * size);
    const Backend &backend = *checked.backend;
    const int error = rewrite_span(backend, checked.queue, t.data, begin,
                                   static_cast<std::size_t>((reach.high - reach.low + 1) * size), [&](std::byte *span) {
                                       for_each_element(t, [&](std::int64_t offset) {
                                           std::memset(span + (offset - reach.low) * size, 0,
                                                       static_cast<std::size_t>(size));
                                       });
                                   });
    if (error != 0) {
        const std::string device = backend.name();
        throw Error("msda: grad_value: zeroing it on the " + device + " device failed with " + device + " error " +
                    std::to_string(error));
    }
}

// Halide's buffer strides are 32-bit. When a tensor's batch stride is wider
// (one batch element of more than 2^31 - 1 elements), or the workspace's
// value-shaped buffers' would be (workspace_value_buffer: a batch element
// of value past 2^31 - 1 elements, whatever the caller's strides), `run`
// serves the call once per batch element, each tensor a view of extent 1
// whose batch stride is unused, and this returns true; otherwise it returns
// false.
template <typename Args, typename Run>
bool split_wide_batches(const Args &args, const CheckedCall &call, std::initializer_list<TensorView Args::*> tensors,
                        Run run) {
    constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max();
    const ProblemSize &size = call.size;
    bool fits = size.batch <= 1 || size.value_length * size.heads * size.channels <= limit;
    for (TensorView Args::*tensor : tensors) {
        const TensorView &t = args.*tensor;
        fits = fits && !(t.present() && (t.strides[0] > limit || t.strides[0] < -limit));
    }
    if (fits) return false;
    CheckedCall element_call = call;
    element_call.size.batch = 1;
    for (std::int64_t b = 0; b < call.size.batch; b++) {
        Args element = args;
        for (TensorView Args::*tensor : tensors) {
            TensorView &t = element.*tensor;
            if (!t.present()) continue;
            // Host tensors and device tensors alike: their first element
            // is byte_offset past data.
            t.byte_offset += b * t.strides[0] * static_cast<std::int64_t>(dtype_size(t.dtype));
            t.shape[0] = 1;
            t.strides[0] = 0;
        }
        run(element, element_call);
    }
    return true;
}

// The kernels' value: the caller's, or its head-major copy in the workspace
// when the plan stages one and value is not head-major already.
void stage_value(CommonInputs &in, const Prepared &prepared, const ProblemSize &size, void *workspace) {
    if (prepared.workspace.value_copy == 0 || is_head_major(in.value)) return;
    HalideBuffer copy = workspace_value_buffer(workspace, halide_type(size.dtype), size, true);
    call_relayout(prepared.kernels.relayout, size.dtype, in.value, copy);
    in.value = copy;
}

// The workspace's first 64-byte boundary (see Workspace).
void *aligned_workspace(void *workspace) {
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(workspace);
    const std::uintptr_t skip = (Workspace::kAlignment - address % Workspace::kAlignment) % Workspace::kAlignment;
    return workspace == nullptr ? nullptr : static_cast<char *>(workspace) + skip;
}

// Whether a (B, N_q, N_h, N_l, N_p[, 2]) tensor's (l, p) dimensions lie as
// a by-query variant requires (the CPU family's by-query schedules): the
// location planes (BQHLP2, x and y interleaved) with strides (2 N_p, 2),
// the weights with (N_p, 1).
bool dense_locations(const TensorView &t, const ProblemSize &size, const Options &options) {
    return options.locations_layout == LocationsLayout::BQHLP2 && t.strides[4] == 2 &&
           t.strides[3] == 2 * size.points;
}
bool dense_weights(const TensorView &t, const ProblemSize &size) {
    return t.strides[4] == 1 && t.strides[3] == size.points;
}

// Whether a call served by this by-query variant (null: none) walks by
// query: its per-sample inputs lie as the variant needs and the order asked
// for (or decided, see chooses_by_query) is by_query.
bool takes_by_query(const Variant *variant, const TensorView &locations, const TensorView &weights,
                    const Prepared &prepared, const CheckedCall &checked, bool any_level_size = false) {
    const ProblemSize &size = checked.size;
    return variant != nullptr && size.batch > 0 && size.queries > 0 &&
           dense_locations(locations, size, prepared.options) && dense_weights(weights, size) &&
           chooses_by_query(locations, prepared.options, size, checked.levels, *prepared.policy, any_level_size);
}

// Whether grad_value's scatter walks by query (the same bits either way).
bool scatters_by_query(const Prepared &prepared, const BackwardArgs &args, const CheckedCall &checked) {
    return takes_by_query(prepared.kernels.grad_value_by_query, args.sampling_locations, args.attention_weights,
                          prepared, checked, true);
}

// One forward call in the order decided for the whole call.
void forward_in_order(const Prepared &prepared, const ForwardArgs &args, const CheckedCall &checked, void *workspace,
                      bool by_query) {
    const ProblemSize &size = checked.size;
    if (split_wide_batches(args, checked,
                           {&ForwardArgs::value, &ForwardArgs::sampling_locations, &ForwardArgs::attention_weights,
                            &ForwardArgs::output},
                           [&](const ForwardArgs &element, const CheckedCall &element_call) {
                               forward_in_order(prepared, element, element_call, workspace, by_query);
                           })) {
        return;
    }
    CommonInputs in(args.value, args.sampling_locations, args.attention_weights, checked, prepared.options);
    HalideBuffer output = head_major_buffer(args.output, size.heads, size.channels);
    if (by_query) {
        // Reads value in the caller's layout (see schedule_forward_by_query).
        call(*prepared.kernels.forward_by_query, in, output);
        return;
    }
    stage_value(in, prepared, size, workspace);
    call(*prepared.kernels.forward, in, output);
}

// One backward call, its per-sample gradients in the order decided for the
// whole call.
void backward_in_order(const Prepared &prepared, const BackwardArgs &args, const CheckedCall &checked,
                       void *workspace, bool by_query, bool scatter_by_query) {
    const ProblemSize &size = checked.size;
    const Kernels &kernels = prepared.kernels;
    const Options &options = prepared.options;
    if (split_wide_batches(args, checked,
                           {&BackwardArgs::value, &BackwardArgs::sampling_locations, &BackwardArgs::attention_weights,
                            &BackwardArgs::grad_output, &BackwardArgs::grad_value,
                            &BackwardArgs::grad_sampling_locations, &BackwardArgs::grad_attention_weights},
                           [&](const BackwardArgs &element, const CheckedCall &element_call) {
                               backward_in_order(prepared, element, element_call, workspace, by_query,
                                                 scatter_by_query);
                           })) {
        return;
    }
    CommonInputs in(args.value, args.sampling_locations, args.attention_weights, checked, options);
    HalideBuffer grad_output = head_major_buffer(args.grad_output, size.heads, size.channels);
    const Workspace &layout = prepared.workspace;

    if (kernels.grad_value != nullptr) {
        const Variant &scatter =
            scatter_by_query ? *kernels.grad_value_by_query
            : kernels.grad_value_serial != nullptr && checked.backend->needs_serial_scatter(checked.queue)
                ? *kernels.grad_value_serial
                : *kernels.grad_value;
        HalideBuffer grad_value = value_buffer(args.grad_value, options.value_layout);
        void *sums_memory = static_cast<char *>(workspace) + layout.sums_offset();
        if (layout.value_copy > 0 && !is_head_major(grad_value)) {
            // Summed head-major (float32 for half precision), then copied
            // (float32, float64) or rounded once (half precision) into
            // grad_value.
            HalideBuffer sums = workspace_value_buffer(sums_memory, sum_type(size.dtype), size, true);
            if (summed_in_storage(size.dtype)) {
                call(scatter, in, grad_output, sums);
                call_relayout(kernels.relayout, size.dtype, sums, grad_value);
            } else {
                call(scatter, in, grad_output, sums, grad_value);
            }
        } else if (summed_in_storage(size.dtype)) {
            call(scatter, in, grad_output, grad_value);
        } else {
            // Half storage: the sums in float32 in the workspace, (c, h, row,
            // b) dense, then rounded once into grad_value.
            HalideBuffer sums = workspace_value_buffer(sums_memory, kFloat32, size, false);
            call(scatter, in, grad_output, sums, grad_value);
        }
    }
    if (kernels.grad_sample == nullptr) return;
    // A by-query variant (of the per-sample gradients asked for) reads value
    // in the caller's layout (see schedule_grad_sample_by_query).
    const Variant &per_sample = by_query ? *kernels.grad_sample_by_query : *kernels.grad_sample;
    if (!by_query) stage_value(in, prepared, size, workspace);
    if (per_sample.kind == Kind::grad_attention_weights) {
        HalideBuffer weights = weight_buffer(args.grad_attention_weights);
        call(per_sample, in, grad_output, weights);
        return;
    }
    HalideBuffer x = location_plane(args.grad_sampling_locations, options.locations_layout, 0);
    HalideBuffer y = location_plane(args.grad_sampling_locations, options.locations_layout, 1);
    if (per_sample.kind == Kind::grad_sampling_locations) {
        call(per_sample, in, grad_output, x, y);
        return;
    }
    HalideBuffer weights = weight_buffer(args.grad_attention_weights);
    call(per_sample, in, grad_output, weights, x, y);
}

}  // namespace

bool walks_by_query(const Prepared &prepared, const ForwardArgs &args, const CheckedCall &checked) {
    return takes_by_query(prepared.kernels.forward_by_query, args.sampling_locations, args.attention_weights, prepared,
                          checked);
}

bool walks_by_query(const Prepared &prepared, const BackwardArgs &args, const CheckedCall &checked) {
    const ProblemSize &size = checked.size;
    const Kernels &kernels = prepared.kernels;
    // The asked-for gradients' blocks must be dense (an absent one is not).
    const Kind kind = kernels.grad_sample_by_query != nullptr ? kernels.grad_sample_by_query->kind : Kind::grad_sample;
    return kernels.grad_sample_by_query != nullptr &&
           (kind == Kind::grad_attention_weights ||
            dense_locations(args.grad_sampling_locations, size, prepared.options)) &&
           (kind == Kind::grad_sampling_locations || dense_weights(args.grad_attention_weights, size)) &&
           takes_by_query(kernels.grad_sample_by_query, args.sampling_locations, args.attention_weights, prepared,
                          checked);
}

void run_forward(const Prepared &prepared, const ForwardArgs &args, const CheckedCall &checked, void *workspace) {
    if (checked.size.batch == 0 || checked.size.queries == 0) return;  // output is empty
    forward_in_order(prepared, args, checked, aligned_workspace(workspace), walks_by_query(prepared, args, checked));
}

void run_backward(const Prepared &prepared, const BackwardArgs &args, const CheckedCall &checked, void *workspace) {
    const ProblemSize &size = checked.size;
    if (size.batch == 0) return;  // every tensor is empty
    if (size.queries == 0) {
        if (prepared.kernels.grad_value != nullptr) fill_zeros(args.grad_value, checked);
        return;
    }
    backward_in_order(prepared, args, checked, aligned_workspace(workspace), walks_by_query(prepared, args, checked),
                      scatters_by_query(prepared, args, checked));
}

}  // namespace msda::detail
