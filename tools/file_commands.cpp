// `msda forward` and `msda backward`: read the tensors, call the API once,
// write what was asked for. Nothing is written unless the call succeeded.
#include <string_view>
#include <vector>

#include "commands.h"
#include "tensor_files.h"

namespace msda_cli {

namespace {

struct Inputs {
    TensorFile value;
    TensorFile spatial_shapes;
    TensorFile level_start_index;
    TensorFile sampling_locations;
    TensorFile attention_weights;
};

Inputs read_inputs(const InputFiles &files, const msda::Options &options, const Storage &storage) {
    const bool blnc = options.value_layout == msda::ValueLayout::BLNC;
    const bool bqhlp2 = options.locations_layout == msda::LocationsLayout::BQHLP2;
    return {
        read_float_tensor("value", files.value, {4, blnc ? "BLNC (B, L, N_h, C_h)" : "BNLC (B, N_h, L, C_h)"},
                          storage.dtype),
        read_index_tensor("spatial_shapes", files.spatial_shapes, {2, "(N_l, 2)"}),
        read_index_tensor("level_start_index", files.level_start_index, {1, "(N_l,)"}),
        read_float_tensor("sampling_locations", files.sampling_locations,
                          {6, bqhlp2 ? "BQHLP2 (B, N_q, N_h, N_l, N_p, 2)" : "B2QHLP (B, 2, N_q, N_h, N_l, N_p)"},
                          storage.locations_dtype()),
        read_float_tensor("attention_weights", files.attention_weights, {5, "(B, N_q, N_h, N_l, N_p)"},
                          storage.dtype),
    };
}

// The API names the tensor it rejects ("msda: value: ...", or the tensors
// that disagree: "msda: attention_weights and sampling_locations: ..."); the
// user gave files, so the message gets their paths as well.
template <typename Call>
void naming_files(const std::vector<const TensorFile *> &tensors, Call call) {
    try {
        call();
    } catch (const msda::Error &error) {
        const std::string_view message = error.what();
        const std::size_t end = message.find(": ", 6);
        if (!message.starts_with("msda: ") || end == std::string_view::npos) throw;
        const std::string named = " " + std::string(message.substr(6, end - 6)) + ",";  // " a, b and c,"
        std::string paths;
        for (const TensorFile *tensor : tensors) {
            for (const char *before : {" ", ", ", " and "}) {
                if (named.find(before + tensor->name + ",") == std::string::npos &&
                    named.find(before + tensor->name + " and") == std::string::npos) {
                    continue;
                }
                paths += (paths.empty() ? "" : ", ") + tensor->path;
                break;
            }
        }
        if (paths.empty()) throw;
        throw msda::Error(std::string(message) + " [" + paths + "]");
    }
}

}  // namespace

void run_forward(const ForwardCommand &command) {
    const Inputs in = read_inputs(command.inputs, command.options, command.storage);
    msda::ForwardArgs args;
    args.value = in.value.view();
    args.spatial_shapes = in.spatial_shapes.view();
    args.level_start_index = in.level_start_index.view();
    args.sampling_locations = in.sampling_locations.view();
    args.attention_weights = in.attention_weights.view();
    const std::vector<const TensorFile *> inputs = {&in.value, &in.spatial_shapes, &in.level_start_index,
                                                    &in.sampling_locations, &in.attention_weights};
    // The inputs are checked before the output is allocated: its size comes
    // from them, and files can claim absurd shapes.
    msda::ProblemSize size;
    naming_files(inputs, [&] { size = msda::ProblemSize::of(args, command.options); });
    TensorFile output = make_result("output", command.output, {size.batch, size.queries, size.heads * size.channels},
                                    command.storage.dtype);
    args.output = output.view();
    naming_files(inputs, [&] { msda::forward(args, command.options); });
    write_tensors({&output});
}

void run_backward(const BackwardCommand &command) {
    msda::Options options = command.options;
    options.grad_value = !command.grad_value.empty();
    options.grad_sampling_locations = !command.grad_sampling_locations.empty();
    options.grad_attention_weights = !command.grad_attention_weights.empty();
    // main rejects these command lines first; the API would too, after the
    // files are read.
    if (options.op == msda::Operator::gka && options.grad_sampling_locations)
        throw msda::Error("msda: backward: GKA gives sampling_locations no gradient (--grad-sampling-locations "
                          "applies to MSDA only)");
    if (!options.grad_value && !options.grad_sampling_locations && !options.grad_attention_weights)
        throw msda::Error("msda: backward: no gradient asked for (give --grad-value, "
                          "--grad-sampling-locations and/or --grad-attention-weights)");

    const Inputs in = read_inputs(command.inputs, options, command.storage);
    const TensorFile grad_output =
        read_float_tensor("grad_output", command.grad_output, {3, "(B, N_q, N_h*C_h)"}, command.storage.dtype);

    // Each gradient has the shape (so the layout) and the storage dtype of the
    // tensor it belongs to.
    msda::BackwardArgs args;
    args.value = in.value.view();
    args.spatial_shapes = in.spatial_shapes.view();
    args.level_start_index = in.level_start_index.view();
    args.sampling_locations = in.sampling_locations.view();
    args.attention_weights = in.attention_weights.view();
    args.grad_output = grad_output.view();
    TensorFile grad_value, grad_sampling_locations, grad_attention_weights;
    if (options.grad_value) {
        grad_value = make_result("grad_value", command.grad_value, in.value.shape, in.value.dtype);
        args.grad_value = grad_value.view();
    }
    if (options.grad_sampling_locations) {
        grad_sampling_locations = make_result("grad_sampling_locations", command.grad_sampling_locations,
                                              in.sampling_locations.shape, in.sampling_locations.dtype);
        args.grad_sampling_locations = grad_sampling_locations.view();
    }
    if (options.grad_attention_weights) {
        grad_attention_weights = make_result("grad_attention_weights", command.grad_attention_weights,
                                             in.attention_weights.shape, in.attention_weights.dtype);
        args.grad_attention_weights = grad_attention_weights.view();
    }
    naming_files({&in.value, &in.spatial_shapes, &in.level_start_index, &in.sampling_locations,
                  &in.attention_weights, &grad_output},
                 [&] { msda::backward(args, options); });
    std::vector<const TensorFile *> results;
    if (options.grad_value) results.push_back(&grad_value);
    if (options.grad_sampling_locations) results.push_back(&grad_sampling_locations);
    if (options.grad_attention_weights) results.push_back(&grad_attention_weights);
    write_tensors(results);
}

}  // namespace msda_cli
