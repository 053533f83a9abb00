// The grid_sample peer: the pure-PyTorch decomposition of MSDA that CPU users
// run today (Deformable DETR's ms_deform_attn_core_pytorch, mmcv's fallback),
// written against LibTorch's C++ API op for op:
//   value (B, L, N_h, C_h) split per level, each level as (B*N_h, C_h, H_l, W_l);
//   grids = 2 * locations - 1, per level (B*N_h, N_q, N_p, 2);
//   per level grid_sample(bilinear, zeros, align_corners = false)
//     -> (B*N_h, C_h, N_q, N_p);
//   stack over levels, times attention (B*N_h, 1, N_q, N_l*N_p), sum over
//   (l, p) -> (B, N_h*C_h, N_q) -> (B, N_q, N_h*C_h).
// The forward runs without autograd (inference); the backward is autograd's,
// so the location gradient includes the factor 2 of 2 * locations - 1.
// Compiled only with LibTorch (MSDA_BENCH_HAVE_TORCH).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "peers.h"
#include "torch_tensors.h"

namespace msda_bench {

namespace {

namespace F = torch::nn::functional;

class GridSamplePeer final : public Peer {
public:
    GridSamplePeer(const Problem &problem, int threads) : threads_(threads < 1 ? 1 : threads) {
        const Shape &shape = problem.shape;
        batch_ = shape.batch;
        queries_ = shape.queries;
        heads_ = shape.heads;
        channels_ = shape.channels;
        points_ = shape.points;
        for (const Level &level : shape.levels) levels_.push_back(level);
        const std::int64_t level_count = static_cast<std::int64_t>(levels_.size());

        value_ = copy_of(problem.value, {batch_, shape.value_length(), heads_, channels_}).requires_grad_(true);
        sampling_locations_ = copy_of(problem.sampling_locations, {batch_, queries_, heads_, level_count, points_, 2})
                                  .requires_grad_(true);
        attention_weights_ =
            copy_of(problem.attention_weights, {batch_, queries_, heads_, level_count, points_}).requires_grad_(true);
        grad_output_ = copy_of(problem.grad_output, {batch_, queries_, heads_ * channels_});
        // The intra-op pool (OpenMP in Debian's build) is process-wide. The
        // inter-op pool is not set: nothing here launches inter-op work, and
        // at::set_num_interop_threads may be called only once per process.
        at::set_num_threads(threads_);
    }

    const char *name() const override { return "grid_sample"; }

    void forward() override {
        use_threads();
        torch::NoGradGuard no_grad;
        output_ = compute();
    }

    void prepare_backward() override {
        use_threads();
        // Gradients set to none (optimizer.zero_grad()'s default): each
        // backward makes fresh ones rather than accumulating.
        for (torch::Tensor *leaf : {&value_, &sampling_locations_, &attention_weights_})
            leaf->mutable_grad().reset();
        output_ = compute();
    }

    void backward() override {
        use_threads();
        output_.backward(grad_output_);
    }

    Results results() const override {
        return {to_vector(output_), to_vector(value_.grad()), to_vector(sampling_locations_.grad()),
                to_vector(attention_weights_.grad())};
    }

private:
    // Another peer (or msda's own setup) may have changed the process-wide
    // thread count since the constructor.
    void use_threads() const {
        if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
    }

    // ms_deform_attn_core_pytorch on this peer's tensors.
    torch::Tensor compute() const {
        const std::int64_t level_count = static_cast<std::int64_t>(levels_.size());
        std::vector<std::int64_t> level_sizes;
        for (const Level &level : levels_) level_sizes.push_back(level.height * level.width);

        const std::vector<torch::Tensor> value_list = value_.split_with_sizes(level_sizes, 1);
        const torch::Tensor sampling_grids = 2 * sampling_locations_ - 1;
        const auto options =
            F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kZeros).align_corners(false);
        std::vector<torch::Tensor> sampling_value_list;
        for (std::int64_t l = 0; l < level_count; ++l) {
            // (B, H*W, N_h, C_h) -> (B, H*W, N_h*C_h) -> (B, N_h*C_h, H*W) -> (B*N_h, C_h, H, W)
            const torch::Tensor value_l =
                value_list[l].flatten(2).transpose(1, 2).reshape(
                    {batch_ * heads_, channels_, levels_[l].height, levels_[l].width});
            // (B, N_q, N_h, N_p, 2) -> (B, N_h, N_q, N_p, 2) -> (B*N_h, N_q, N_p, 2)
            const torch::Tensor grid_l = sampling_grids.select(3, l).transpose(1, 2).flatten(0, 1);
            // (B*N_h, C_h, N_q, N_p)
            sampling_value_list.push_back(F::grid_sample(value_l, grid_l, options));
        }
        // (B, N_q, N_h, N_l, N_p) -> (B, N_h, N_q, N_l, N_p) -> (B*N_h, 1, N_q, N_l*N_p)
        const torch::Tensor attention =
            attention_weights_.transpose(1, 2).reshape({batch_ * heads_, 1, queries_, level_count * points_});
        // (B*N_h, C_h, N_q, N_l, N_p) -> (B*N_h, C_h, N_q, N_l*N_p), weighted sum over the samples.
        const torch::Tensor output = (torch::stack(sampling_value_list, -2).flatten(-2) * attention)
                                         .sum(-1)
                                         .view({batch_, heads_ * channels_, queries_});
        return output.transpose(1, 2).contiguous();
    }

    const int threads_;
    std::int64_t batch_ = 0, queries_ = 0, heads_ = 0, channels_ = 0, points_ = 0;
    std::vector<Level> levels_;
    torch::Tensor value_, sampling_locations_, attention_weights_, grad_output_;
    torch::Tensor output_;
};

}  // namespace

std::unique_ptr<Peer> make_grid_sample_peer(const Problem &problem, int threads) {
    return std::make_unique<GridSamplePeer>(problem, threads);
}

}  // namespace msda_bench
