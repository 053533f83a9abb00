// The independent reference for GKA (geometric kernel attention), written
// straight from SPEC.md's GKA section as scalar loops in double precision,
// sharing nothing with the Halide pipelines. Same Problem as MSDA's
// reference, but sampling_locations hold absolute pixel coordinates (x, y)
// and align_corners / border are ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "msda_reference.h"

namespace msda::reference {

enum class GkaRounding { floor, nearest };

// The pixel index a coordinate reads along an axis of `size` pixels:
// r(coordinate) clamped into [0, size - 1], r = floor or round half to even;
// none for NaN (the sample contributes nothing). +-Inf clamps.
std::optional<std::int64_t> gka_index(double coordinate, std::int64_t size, GkaRounding rounding);

// output (B, N_q, N_h * C_h) = sum over (l, p) of a * V[row].
std::vector<double> gka_forward(const Problem &problem, GkaRounding rounding);

struct GkaGradients {
    std::vector<double> value;              // shape of Problem::value: a * g scattered into each row
    std::vector<double> attention_weights;  // shape of Problem::attention_weights: <g, V[row]>
};
// grad_output has the output's shape; std::invalid_argument otherwise.
GkaGradients gka_backward(const Problem &problem, const std::vector<double> &grad_output, GkaRounding rounding);

}  // namespace msda::reference
