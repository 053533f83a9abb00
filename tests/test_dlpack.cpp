// msda/dlpack.hpp: DLPack tensors exported by torch (at::toDLPack) become
// views of the same memory, and msda computes on them what the torch
// operator computes on the tensors. Hand-made DLTensors, the refusals and
// the reference check are tests/test_dlpack_views.cpp's.
// msda/dlpack.hpp first: its <dlpack/dlpack.h> (libdlpack-dev) is the one
// compiled here; ATen's copy of the same header has the same include guard.
#include <msda/dlpack.hpp>

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>

#include <msda/torch.hpp>

namespace {

// An exported tensor, returned to its owner when the test is done with it.
struct Exported {
    explicit Exported(const at::Tensor &tensor) : managed(at::toDLPack(tensor)) {}
    ~Exported() { managed->deleter(managed); }
    Exported(const Exported &) = delete;
    Exported &operator=(const Exported &) = delete;
    DLManagedTensor *managed;
};

void expect_view_of(const msda::TensorView &view, const at::Tensor &tensor, msda::DType dtype) {
    EXPECT_EQ(view.data, tensor.data_ptr());
    EXPECT_EQ(view.dtype, dtype);
    ASSERT_EQ(view.rank, tensor.dim());
    for (int d = 0; d < view.rank; ++d) {
        EXPECT_EQ(view.shape[d], tensor.size(d)) << "dim " << d;
        EXPECT_EQ(view.strides[d], tensor.stride(d)) << "dim " << d;
    }
}

TEST(DLPack, TorchTensorsBecomeViewsOfTheirMemory) {
    const at::Tensor permuted = torch::randn({2, 3, 4, 5}).permute({0, 2, 1, 3});
    const at::Tensor sliced = torch::randn({6, 8}, torch::kFloat16).narrow(1, 3, 4);  // an offset into storage
    const at::Tensor bf16 = torch::randn({3, 2}, torch::kBFloat16).t();
    const at::Tensor indices = torch::arange(5, torch::kInt32);
    const at::Tensor longs = torch::arange(6, torch::kInt64).view({3, 2});
    for (const auto &[tensor, dtype] : {std::pair{permuted, msda::DType::f32}, std::pair{sliced, msda::DType::f16},
                                        std::pair{bf16, msda::DType::bf16}, std::pair{indices, msda::DType::i32},
                                        std::pair{longs, msda::DType::i64}}) {
        const Exported exported(tensor);
        expect_view_of(msda::from_dlpack(exported.managed, "tensor"), tensor, dtype);
    }
}

// msda's forward on DLPack views gives the torch operator's bits.
TEST(DLPack, MsdaComputesOnTheViewsWhatTheOperatorComputes) {
    torch::manual_seed(3);
    const int64_t batch = 2, queries = 5, heads = 2, channels = 4, points = 3;
    const at::Tensor spatial_shapes = torch::tensor({4, 6, 2, 3}, torch::kInt64).view({2, 2});
    const at::Tensor level_start_index = torch::tensor({0, 24}, torch::kInt64);
    const at::Tensor value = torch::randn({batch, heads, 30, channels}).permute({0, 2, 1, 3});  // BLNC view of BNLC
    const at::Tensor locations = torch::rand({batch, queries, heads, 2, points, 2});
    const at::Tensor weights = torch::rand({batch, queries, heads, 2, points});
    const at::Tensor expected = msda_torch::ms_deform_attn(value, spatial_shapes, level_start_index, locations, weights);

    const at::Tensor output = torch::full({batch, queries, heads * channels}, std::nan(""));
    const Exported value_dl(value), shapes_dl(spatial_shapes), starts_dl(level_start_index), locations_dl(locations),
        weights_dl(weights), output_dl(output);
    msda::ForwardArgs args;
    args.value = msda::from_dlpack(value_dl.managed, "value");
    args.spatial_shapes = msda::from_dlpack(shapes_dl.managed, "spatial_shapes");
    args.level_start_index = msda::from_dlpack(starts_dl.managed, "level_start_index");
    args.sampling_locations = msda::from_dlpack(locations_dl.managed, "sampling_locations");
    args.attention_weights = msda::from_dlpack(weights_dl.managed, "attention_weights");
    args.output = msda::from_dlpack(output_dl.managed, "output");
    msda::forward(args);
    EXPECT_TRUE(torch::equal(output, expected));
}

}  // namespace
