// Trains a deformable-attention layer with msda's LibTorch operator.
//
// The layer is Deformable DETR's: a value projection of the multi-scale
// feature maps; per query, sampling offsets around its reference point and
// attention logits, both linear in the query; a softmax over each head's
// levels and points; msda::ms_deform_attn; an output projection. The task
// is synthetic: a teacher layer with fixed random weights (and wide sampling
// offsets) maps random feature maps, queries and reference points to
// targets, and a student layer of the same shape learns to reproduce them
// (mean squared error, Adam). Everything is seeded, and msda's backward is
// deterministic, so a run's loss curve is the same bits every time.
//
//   train_deformable_layer [--steps N] [--threads T] [--seed S]
//                          [--print-every K] [--losses FILE]
//
// --losses writes every step's loss, exactly (hexadecimal floating point),
// one a line, for comparing runs.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <msda/torch.hpp>

namespace {

struct Level {
    int64_t height, width;
};

class DeformableAttentionImpl : public torch::nn::Module {
public:
    DeformableAttentionImpl(int64_t model_dim, int64_t heads, int64_t levels, int64_t points)
        : heads_(heads), levels_(levels), points_(points), head_dim_(model_dim / heads),
          value_projection_(register_module("value_projection", torch::nn::Linear(model_dim, model_dim))),
          sampling_offsets_(
              register_module("sampling_offsets", torch::nn::Linear(model_dim, heads * levels * points * 2))),
          attention_logits_(
              register_module("attention_logits", torch::nn::Linear(model_dim, heads * levels * points))),
          output_projection_(register_module("output_projection", torch::nn::Linear(model_dim, model_dim))) {}

    // Offsets start as Deformable DETR's: each head looks in its own
    // direction, point k at k+1 pixels; `spread` scales them.
    void initialize_offsets(double spread) {
        torch::NoGradGuard no_grad;
        sampling_offsets_->weight.zero_();
        const torch::Tensor angles = torch::arange(heads_, torch::kFloat32) * (2.0 * M_PI / heads_);
        torch::Tensor directions = torch::stack({angles.cos(), angles.sin()}, -1);
        directions = directions / std::get<0>(directions.abs().max(-1, true));
        torch::Tensor bias = directions.view({heads_, 1, 1, 2}).repeat({1, levels_, points_, 1});
        for (int64_t k = 0; k < points_; ++k) bias.select(2, k).mul_(spread * static_cast<double>(k + 1));
        sampling_offsets_->bias.copy_(bias.flatten());
    }

    // query (B, N_q, D); reference_points (B, N_q, 2) in [0, 1];
    // memory (B, L, D), the levels' feature maps flattened row-major.
    torch::Tensor forward(const torch::Tensor &query, const torch::Tensor &reference_points,
                          const torch::Tensor &memory, const torch::Tensor &spatial_shapes,
                          const torch::Tensor &level_start_index) {
        const int64_t batch = query.size(0), queries = query.size(1), length = memory.size(1);
        const torch::Tensor value = value_projection_(memory).view({batch, length, heads_, head_dim_});
        const torch::Tensor offsets =
            sampling_offsets_(query).view({batch, queries, heads_, levels_, points_, 2});
        // Offsets are in pixels of each level: (W, H) normalizes them.
        const torch::Tensor normalizer = spatial_shapes.flip(-1).to(torch::kFloat32).view({1, 1, 1, levels_, 1, 2});
        const torch::Tensor sampling_locations =
            reference_points.view({batch, queries, 1, 1, 1, 2}) + offsets / normalizer;
        const torch::Tensor attention_weights =
            torch::softmax(attention_logits_(query).view({batch, queries, heads_, levels_ * points_}), -1)
                .view({batch, queries, heads_, levels_, points_});
        const torch::Tensor sampled = msda_torch::ms_deform_attn(value, spatial_shapes, level_start_index,
                                                                 sampling_locations, attention_weights);
        return output_projection_(sampled);
    }

private:
    int64_t heads_, levels_, points_, head_dim_;
    torch::nn::Linear value_projection_, sampling_offsets_, attention_logits_, output_projection_;
};
TORCH_MODULE(DeformableAttention);

struct Arguments {
    int steps = 300;
    int threads = 0;  // torch's default
    int seed = 0;
    int print_every = 25;
    std::string losses;
};

[[noreturn]] void usage(const std::string &problem) {
    std::cerr << "train_deformable_layer: " << problem << "\n"
              << "usage: train_deformable_layer [--steps N] [--threads T] [--seed S] [--print-every K] "
                 "[--losses FILE]\n";
    std::exit(2);
}

int positive_integer(const char *flag, const char *text, int minimum) {
    char *end = nullptr;
    const long parsed = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || parsed < minimum || parsed > 1000000) {
        usage(std::string(flag) + " expects an integer >= " + std::to_string(minimum) + ", got \"" + text + "\"");
    }
    return static_cast<int>(parsed);
}

Arguments parse(int argc, char **argv) {
    Arguments arguments;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) usage(flag + " needs a value");
        const char *text = argv[++i];
        if (flag == "--steps") {
            arguments.steps = positive_integer("--steps", text, 1);
        } else if (flag == "--threads") {
            arguments.threads = positive_integer("--threads", text, 1);
        } else if (flag == "--seed") {
            arguments.seed = positive_integer("--seed", text, 0);
        } else if (flag == "--print-every") {
            arguments.print_every = positive_integer("--print-every", text, 1);
        } else if (flag == "--losses") {
            arguments.losses = text;
        } else {
            usage("unknown option " + flag);
        }
    }
    return arguments;
}

}  // namespace

int main(int argc, char **argv) {
    const Arguments arguments = parse(argc, argv);
    if (arguments.threads > 0) torch::set_num_threads(arguments.threads);

    constexpr int64_t kModelDim = 64, kHeads = 4, kPoints = 4, kBatch = 4, kQueries = 64;
    const std::vector<Level> levels = {{24, 24}, {12, 12}, {6, 6}};
    const int64_t level_count = static_cast<int64_t>(levels.size());
    std::vector<int64_t> shapes, starts;
    int64_t length = 0;
    for (const Level &level : levels) {
        shapes.insert(shapes.end(), {level.height, level.width});
        starts.push_back(length);
        length += level.height * level.width;
    }
    const torch::Tensor spatial_shapes = torch::tensor(shapes, torch::kInt64).view({level_count, 2});
    const torch::Tensor level_start_index = torch::tensor(starts, torch::kInt64);

    torch::manual_seed(static_cast<uint64_t>(arguments.seed));
    DeformableAttention teacher(kModelDim, kHeads, level_count, kPoints);
    teacher->initialize_offsets(2.0);
    teacher->eval();
    for (torch::Tensor &parameter : teacher->parameters()) parameter.requires_grad_(false);
    DeformableAttention student(kModelDim, kHeads, level_count, kPoints);
    student->initialize_offsets(0.5);
    torch::optim::Adam optimizer(student->parameters(), torch::optim::AdamOptions(3e-3));

    std::ofstream losses;
    if (!arguments.losses.empty()) {
        losses.open(arguments.losses);
        if (!losses) usage("cannot write " + arguments.losses);
    }
    std::printf("training a deformable attention layer (D %lld, %lld heads, %lld levels, %lld points, "
                "batch %lld x %lld queries) on %d threads\n",
                static_cast<long long>(kModelDim), static_cast<long long>(kHeads),
                static_cast<long long>(level_count), static_cast<long long>(kPoints),
                static_cast<long long>(kBatch), static_cast<long long>(kQueries), torch::get_num_threads());
    double first = 0, last = 0;
    for (int step = 0; step < arguments.steps; ++step) {
        const torch::Tensor memory = torch::randn({kBatch, length, kModelDim});
        const torch::Tensor query = torch::randn({kBatch, kQueries, kModelDim});
        const torch::Tensor reference_points = torch::rand({kBatch, kQueries, 2});
        torch::Tensor target;
        {
            torch::NoGradGuard no_grad;
            target = teacher(query, reference_points, memory, spatial_shapes, level_start_index);
        }
        const torch::Tensor prediction = student(query, reference_points, memory, spatial_shapes, level_start_index);
        const torch::Tensor loss = torch::mse_loss(prediction, target);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();

        const float value = loss.item<float>();
        if (step == 0) first = value;
        last = value;
        if (losses) {
            char exact[64];
            std::snprintf(exact, sizeof exact, "%a\n", static_cast<double>(value));
            losses << exact;
        }
        if (step % arguments.print_every == 0 || step + 1 == arguments.steps) {
            std::printf("step %4d  loss %.6f\n", step, static_cast<double>(value));
        }
    }
    if (losses && !losses.flush()) usage("cannot write " + arguments.losses);
    std::printf("loss fell from %.6f to %.6f (%.2fx) in %d steps\n", first, last, first / last, arguments.steps);
    return 0;
}
