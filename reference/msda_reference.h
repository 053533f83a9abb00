// The independent reference: MSDA forward and backward written straight from
// SPEC.md, scalar loops in double precision over canonical layouts. Tests
// check it with finite differences, then check the generated code against it.
// The demo spot-checks with it too. Nothing here shares code with the Halide
// pipelines.
#pragma once

#include <cstdint>
#include <vector>

namespace msda::reference {

struct Level {
    std::int64_t height = 0, width = 0;
};

// Canonical layouts only (the tests permute strides themselves):
//   value              (B, L, N_h, C_h)                 BLNC
//   sampling_locations (B, N_q, N_h, N_l, N_p, 2)       BQHLP2, (x, y) normalised
//   attention_weights  (B, N_q, N_h, N_l, N_p)
//   output, grad_output (B, N_q, N_h * C_h)
struct Problem {
    std::int64_t batch = 0, queries = 0, heads = 0, channels = 0, points = 0;
    std::vector<Level> levels;
    std::vector<double> value;
    std::vector<double> sampling_locations;
    std::vector<double> attention_weights;
    bool align_corners = false;
    bool border = false;  // padding_mode = border (else zeros)
    // The pixel transform in double, as float64 storage computes it (else
    // rounded through float32: pixel_coordinate).
    bool float64 = false;

    std::int64_t value_length() const;  // L = sum of H_l * W_l
    std::int64_t level_start(std::size_t level) const;
};

std::vector<double> forward(const Problem &problem);

struct Gradients {
    std::vector<double> value;               // shape of Problem::value
    std::vector<double> sampling_locations;  // shape of Problem::sampling_locations
    std::vector<double> attention_weights;   // shape of Problem::attention_weights
};
// grad_output has the output's shape; std::invalid_argument otherwise.
Gradients backward(const Problem &problem, const std::vector<double> &grad_output);

// The pixel coordinate of a normalised location, rounded as the generated code
// rounds it: one float32 multiply and one float32 subtract (never fused), or,
// for float64 storage (float64), one double multiply and subtract.
// Everything after this step is double.
double pixel_coordinate(double normalized, std::int64_t size, bool align_corners, bool float64 = false);

// How far a result is from the reference, as SPEC.md measures it: max
// |actual - expected| / max |expected| (the plain max |actual - expected|
// where expected is all zero); infinite for a NaN or a size mismatch.
// (Vectors rather than std::span: C++17 code, the LibTorch operator's tests,
// includes this header.)
double max_relative_error(const std::vector<float> &actual, const std::vector<double> &expected);

}  // namespace msda::reference
