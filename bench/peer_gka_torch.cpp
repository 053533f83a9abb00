// The GKA peer: geometric kernel attention as a PyTorch user writes it
// without a vendor kernel, through LibTorch's C++ API: per level, the pixel
// indices (floor or round half to even, clamped into the level, NaN samples
// masked), a gather of the value rows, the attention-weighted sum over
// points; the backward is autograd's (gather's backward is a scatter-add into
// grad_value, the weights' a product and sum). Compiled only with LibTorch
// (MSDA_BENCH_HAVE_TORCH).
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

class GkaTorchPeer final : public Peer {
public:
    GkaTorchPeer(const Problem &problem, int threads, bool nearest)
        : threads_(threads < 1 ? 1 : threads), nearest_(nearest) {
        const Shape &shape = problem.shape;
        batch_ = shape.batch;
        queries_ = shape.queries;
        heads_ = shape.heads;
        channels_ = shape.channels;
        points_ = shape.points;
        levels_ = shape.levels;
        const std::int64_t level_count = static_cast<std::int64_t>(levels_.size());
        value_ = copy_of(problem.value, {batch_, shape.value_length(), heads_, channels_}).requires_grad_(true);
        // Absolute pixel coordinates: GKA's locations. Not a leaf of the
        // graph: GKA has no location gradient.
        locations_ = copy_of(problem.sampling_locations, {batch_, queries_, heads_, level_count, points_, 2});
        attention_weights_ =
            copy_of(problem.attention_weights, {batch_, queries_, heads_, level_count, points_}).requires_grad_(true);
        grad_output_ = copy_of(problem.grad_output, {batch_, queries_, heads_ * channels_});
        at::set_num_threads(threads_);
    }

    const char *name() const override { return "gka_torch"; }

    void forward() override {
        use_threads();
        torch::NoGradGuard no_grad;
        output_ = compute();
    }

    void prepare_backward() override {
        use_threads();
        for (torch::Tensor *leaf : {&value_, &attention_weights_}) leaf->mutable_grad().reset();
        output_ = compute();
    }

    void backward() override {
        use_threads();
        output_.backward(grad_output_);
    }

    Results results() const override {
        return {to_vector(output_), to_vector(value_.grad()), {}, to_vector(attention_weights_.grad())};
    }

private:
    void use_threads() const {
        if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
    }

    // The index one coordinate reads along an axis of `size` pixels.
    torch::Tensor pixel_index(const torch::Tensor &coordinate, std::int64_t size) const {
        const torch::Tensor clamped = coordinate.nan_to_num(0.0).clamp(0.0, static_cast<double>(size - 1));
        return (nearest_ ? clamped.round() : clamped.floor()).to(torch::kLong);
    }

    torch::Tensor compute() const {
        std::vector<std::int64_t> level_sizes;
        for (const Level &level : levels_) level_sizes.push_back(level.height * level.width);
        const std::vector<torch::Tensor> value_list = value_.split_with_sizes(level_sizes, 1);
        torch::Tensor output = torch::zeros({batch_, heads_, queries_, channels_}, value_.options());
        for (std::size_t l = 0; l < levels_.size(); ++l) {
            const std::int64_t level = static_cast<std::int64_t>(l);
            // (B, N_q, N_h, N_p) each
            const torch::Tensor x = locations_.select(3, level).select(-1, 0);
            const torch::Tensor y = locations_.select(3, level).select(-1, 1);
            const torch::Tensor counts = (~(x.isnan() | y.isnan())).to(torch::kFloat32);
            const torch::Tensor rows = pixel_index(y, levels_[l].height) * levels_[l].width +
                                       pixel_index(x, levels_[l].width);
            // (B, N_h, N_q * N_p, C_h): the value row of every sample.
            const torch::Tensor index = rows.permute({0, 2, 1, 3}).reshape({batch_, heads_, queries_ * points_, 1})
                                            .expand({batch_, heads_, queries_ * points_, channels_});
            const torch::Tensor value_l = value_list[l].permute({0, 2, 1, 3});  // (B, N_h, H*W, C_h)
            const torch::Tensor sampled =
                value_l.gather(2, index).reshape({batch_, heads_, queries_, points_, channels_});
            // (B, N_h, N_q, N_p, 1): attention weights, 0 for NaN samples.
            const torch::Tensor weights =
                (attention_weights_.select(3, level) * counts).permute({0, 2, 1, 3}).unsqueeze(-1);
            output = output + (sampled * weights).sum(3);
        }
        // (B, N_h, N_q, C_h) -> (B, N_q, N_h * C_h)
        return output.permute({0, 2, 1, 3}).reshape({batch_, queries_, heads_ * channels_});
    }

    int threads_;
    bool nearest_;
    std::int64_t batch_ = 0, queries_ = 0, heads_ = 0, channels_ = 0, points_ = 0;
    std::vector<Level> levels_;
    torch::Tensor value_, locations_, attention_weights_, grad_output_, output_;
};

}  // namespace

std::unique_ptr<Peer> make_gka_torch_peer(const Problem &problem, int threads, bool nearest) {
    return std::make_unique<GkaTorchPeer>(problem, threads, nearest);
}

}  // namespace msda_bench
