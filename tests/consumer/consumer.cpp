// The C++ API from an installed msda: one level of 2x2 pixels, where the
// answers can be worked out by hand.
#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace {

int failures = 0;

void expect_near(const char *what, float actual, float expected) {
    if (std::fabs(actual - expected) > 1e-6f) {
        std::printf("FAIL %s: got %.9g, expected %.9g\n", what, actual, expected);
        ++failures;
    }
}

}  // namespace

int main() {
    // value (B=1, L=4, N_h=1, C_h=2); row = y*W + x.
    const float value[4 * 2] = {1, 10,   // (y=0, x=0)
                                2, 20,   // (y=0, x=1)
                                3, 30,   // (y=1, x=0)
                                4, 40};  // (y=1, x=1)
    const std::int64_t spatial_shapes[2] = {2, 2};
    const std::int64_t level_start_index[1] = {0};
    // Query 0 samples the centre of pixel (x=1, y=0): u = (1 + 0.5) / 2,
    // v = (0 + 0.5) / 2. Query 1 samples the middle of the level, a quarter
    // of each pixel.
    const float sampling_locations[2 * 2] = {0.75f, 0.25f, 0.5f, 0.5f};
    const float attention_weights[2] = {1.0f, 0.5f};
    float output[2 * 2] = {-1, -1, -1, -1};

    msda::ForwardArgs args;
    args.value = msda::TensorView::contiguous(value, msda::DType::f32, {1, 4, 1, 2});
    args.spatial_shapes = msda::TensorView::contiguous(spatial_shapes, msda::DType::i64, {1, 2});
    args.level_start_index =
        msda::TensorView::contiguous(level_start_index, msda::DType::i64, {1});
    args.sampling_locations =
        msda::TensorView::contiguous(sampling_locations, msda::DType::f32, {1, 2, 1, 1, 1, 2});
    args.attention_weights =
        msda::TensorView::contiguous(attention_weights, msda::DType::f32, {1, 2, 1, 1, 1});
    args.output = msda::TensorView::contiguous(output, msda::DType::f32, {1, 2, 2});

    try {
        msda::forward(args);
    } catch (const msda::Error &error) {
        std::printf("FAIL forward threw: %s\n", error.what());
        return 1;
    }
    // A pixel centre returns that pixel exactly.
    if (output[0] != 2.0f || output[1] != 20.0f) {
        std::printf("FAIL pixel centre: got (%g, %g), expected (2, 20)\n", output[0], output[1]);
        ++failures;
    }
    expect_near("middle, channel 0", output[2], 0.5f * (1 + 2 + 3 + 4) / 4);
    expect_near("middle, channel 1", output[3], 0.5f * (10 + 20 + 30 + 40) / 4);

    // msda::Error crosses the library boundary and names the bad tensor.
    msda::ForwardArgs bad = args;
    bad.sampling_locations =
        msda::TensorView::contiguous(sampling_locations, msda::DType::f32, {1, 2, 1, 1, 2});
    try {
        msda::forward(bad);
        std::printf("FAIL a rank-5 sampling_locations was accepted\n");
        ++failures;
    } catch (const msda::Error &error) {
        if (std::string(error.what()).find("sampling_locations") == std::string::npos) {
            std::printf("FAIL the message does not name sampling_locations: %s\n", error.what());
            ++failures;
        }
    }

    // The dispatch report crosses the boundary too, and names a compiled
    // target this CPU has every feature of.
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
    bool selected_is_compiled = false;
    for (const msda::CompiledTarget &target : dispatch.targets) {
        selected_is_compiled = selected_is_compiled || (target.name == dispatch.selected && target.missing.empty());
    }
    if (!selected_is_compiled) {
        std::printf("FAIL cpu_dispatch selected \"%s\", not a compiled target this CPU can run\n",
                    dispatch.selected.c_str());
        ++failures;
    }

    std::printf("%s: msda C++ consumer\n", failures == 0 ? "PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}
