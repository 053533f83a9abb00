// The peers msda is measured against, in the same process and run:
//   grid_sample: the pure-PyTorch decomposition CPU users run today
//     (Deformable DETR's ms_deform_attn_core_pytorch, mmcv's fallback),
//     through LibTorch; forward, and backward through autograd. Present only
//     when the bench was built with LibTorch (MSDA_BENCH_HAVE_TORCH).
//   cuda_port: the classic CUDA kernels' algorithm ported plainly to C++ and
//     OpenMP: one task per (b, q, h) in the forward; the backward walks the
//     same tasks and scatters into grad_value with atomic adds.
// Both compute what msda computes with align_corners = false and zeros
// padding on a Problem (problem.h), float32.
//   gka_torch: GKA (geometric kernel attention) as a PyTorch user writes it
//     without a vendor kernel, through LibTorch: per level, pixel indices,
//     a gather of the value rows, the weighted sum; backward through
//     autograd. For the GKA shapes (problem.h's gka_shapes(): locations in
//     absolute pixel coordinates); it computes what msda's GKA computes
//     (Options::op = gka) with floor rounding, or round half to even with
//     `nearest`. It has no location gradient: its results leave
//     grad_sampling_locations empty. Present only with LibTorch.
#pragma once

#include <memory>
#include <vector>

#include "problem.h"

namespace msda_bench {

// The results of a peer, row-major, in the Problem's layouts:
//   output (B, N_q, N_h * C_h); grad_value (B, L, N_h, C_h);
//   grad_sampling_locations (B, N_q, N_h, N_l, N_p, 2);
//   grad_attention_weights (B, N_q, N_h, N_l, N_p).
struct Results {
    Floats output, grad_value, grad_sampling_locations, grad_attention_weights;
};

class Peer {
public:
    virtual ~Peer() = default;
    virtual const char *name() const = 0;
    // The output, from the Problem's inputs.
    virtual void forward() = 0;
    // Whatever backward() needs that is not part of the backward itself
    // (for grid_sample: the forward that records the autograd graph).
    virtual void prepare_backward() = 0;
    // All three gradients for the Problem's grad_output (GKA: grad_value and
    // grad_attention_weights). Requires a
    // preceding prepare_backward() (each backward consumes it).
    virtual void backward() = 0;
    // Copies out the latest results (for the agreement check, not timed).
    virtual Results results() const = 0;
};

// `threads` is the thread count the peer may use (torch::set_num_threads,
// omp_set_num_threads). The Problem must outlive the peer.
std::unique_ptr<Peer> make_cuda_port_peer(const Problem &problem, int threads);
#ifdef MSDA_BENCH_HAVE_TORCH
std::unique_ptr<Peer> make_grid_sample_peer(const Problem &problem, int threads);
std::unique_ptr<Peer> make_gka_torch_peer(const Problem &problem, int threads, bool nearest);
#endif

}  // namespace msda_bench
