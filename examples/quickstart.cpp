// The README's C++ example: one MSDA forward and backward through msda's
// core API (<msda/msda.hpp>). The suite builds and runs it
// (tests/readme_snippets.cmake, readme_cpp_example_runs): it exits 1 unless
// the results are the ones worked out by hand below.
#include <msda/msda.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

int main() try {
    using msda::DType;
    using msda::TensorView;
    const std::int64_t B = 1, H = 4, W = 6, L = H * W, heads = 2, channels = 8, levels = 1, Q = 3, points = 4;
    // value[b, row, h, c] = c + 10 h on every row, so any sample inside the level is c + 10 h.
    std::vector<float> value(B * L * heads * channels);
    for (std::size_t i = 0; i < value.size(); ++i) value[i] = float(i % channels + 10 * (i / channels % heads));
    std::vector<float> locations(B * Q * heads * levels * points * 2, 0.5f);  // (x, y) in [0, 1]: the middle
    std::vector<float> weights(B * Q * heads * levels * points, 0.25f), output(B * Q * heads * channels);
    const std::int64_t shapes[] = {H, W}, starts[] = {0};

    msda::ForwardArgs args;
    args.value = TensorView::contiguous(value.data(), DType::f32, {B, L, heads, channels});
    args.spatial_shapes = TensorView::contiguous(shapes, DType::i64, {levels, 2});  // rows (H, W)
    args.level_start_index = TensorView::contiguous(starts, DType::i64, {levels});
    args.sampling_locations = TensorView::contiguous(locations.data(), DType::f32, {B, Q, heads, levels, points, 2});
    args.attention_weights = TensorView::contiguous(weights.data(), DType::f32, {B, Q, heads, levels, points});
    args.output = TensorView::contiguous(output.data(), DType::f32, {B, Q, heads * channels});

    msda::Options options;  // the defaults, spelt out: MSDA on a BLNC value
    options.op = msda::Operator::msda;
    options.value_layout = msda::ValueLayout::BLNC;
    options.grad_sampling_locations = false;  // backward: grad_value and grad_attention_weights only
    msda::Plan plan(msda::ProblemSize::of(args, options), options);  // validates the inputs
    std::vector<std::byte> workspace(plan.workspace_size());
    plan.forward(args, workspace.data(), workspace.size());

    std::vector<float> grad_output(output.size(), 1.0f), grad_value(value.size()), grad_weights(weights.size());
    msda::BackwardArgs grads{args.value, args.spatial_shapes, args.level_start_index, args.sampling_locations,
                             args.attention_weights, TensorView::contiguous(grad_output.data(), DType::f32, {B, Q, heads * channels}),
                             TensorView::contiguous(grad_value.data(), DType::f32, {B, L, heads, channels}),
                             TensorView{},  // grad_sampling_locations: not asked for
                             TensorView::contiguous(grad_weights.data(), DType::f32, {B, Q, heads, levels, points})};
    plan.backward(grads, workspace.data(), workspace.size());

    // output = sum of the 4 weights (1) * (c + 10 h); grad_attention_weights = <1, S> = sum over c.
    bool ok = true;
    for (std::size_t i = 0; i < output.size(); ++i) ok &= output[i] == float(i % channels + 10 * (i / channels % heads));
    for (std::size_t i = 0; i < grad_weights.size(); ++i) ok &= grad_weights[i] == float(28 + 80 * (i / points % heads));
    std::printf("output[0, 0, 8:16] = %g ... %g, grad_attention_weights[0, 0, 1, 0, 0] = %g: %s\n", output[8],
                output[15], grad_weights[points], ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
} catch (const msda::Error &e) {  // names the tensor that is wrong and what was expected
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
