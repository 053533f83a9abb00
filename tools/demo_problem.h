// The demo's problem: the MSDA call of one Deformable DETR encoder layer,
// with inputs shaped like a trained model's (locations near each query's
// own pixel, softmax attention weights), generated from a fixed seed.
#pragma once

#include <msda/msda.hpp>
#include <msda_reference.h>

#include <cstdint>
#include <vector>

namespace msda_cli {

struct DemoShape {
    std::int64_t batch = 0, heads = 0, channels = 0, points = 0;
    std::vector<msda::reference::Level> levels;

    std::int64_t value_length() const;
    // Every pixel of every level is a query, as in the encoder.
    std::int64_t queries() const { return value_length(); }
};

// Deformable DETR's encoder on an 800 x 1333 image: strides 8, 16, 32, 64.
DemoShape detr_encoder_shape();

// Canonical layouts throughout: value BLNC, sampling_locations BQHLP2.
struct DemoProblem {
    DemoShape shape;
    std::vector<std::int64_t> spatial_shapes;     // (N_l, 2), rows (H, W)
    std::vector<std::int64_t> level_start_index;  // (N_l,)
    std::vector<float> value;                     // (B, L, N_h, C_h)
    std::vector<float> sampling_locations;        // (B, N_q, N_h, N_l, N_p, 2)
    std::vector<float> attention_weights;         // (B, N_q, N_h, N_l, N_p)
    std::vector<float> grad_output;               // (B, N_q, N_h * C_h)
};

struct DemoResults {
    std::vector<float> output;
    std::vector<float> grad_value;
    std::vector<float> grad_sampling_locations;
    std::vector<float> grad_attention_weights;
};

DemoProblem make_demo_problem(const DemoShape &shape, std::uint64_t seed);

// Zero-filled results of the problem's shapes.
DemoResults make_results(const DemoProblem &problem);

msda::ForwardArgs forward_args(const DemoProblem &problem, DemoResults &results);
msda::BackwardArgs backward_args(const DemoProblem &problem, DemoResults &results);

}  // namespace msda_cli
