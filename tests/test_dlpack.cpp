// msda/dlpack.hpp: DLPack tensors exported by torch (at::toDLPack) become
// views of the same memory, and msda computes on them what the torch
// operator computes on the tensors; what msda cannot read is refused.
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

TEST(DLPack, ByteOffsetAndCompactStridesAreHonoured) {
    const at::Tensor storage = torch::arange(24, torch::kFloat32);
    const Exported exported(storage);
    DLTensor tensor = exported.managed->dl_tensor;
    int64_t shape[3] = {2, 3, 2};
    tensor.ndim = 3;
    tensor.shape = shape;
    tensor.strides = nullptr;  // compact row-major
    tensor.byte_offset = 8 * sizeof(float);
    const msda::TensorView view = msda::from_dlpack(tensor, "value");
    EXPECT_EQ(view.data, storage.data_ptr<float>() + 8);
    EXPECT_EQ(view.strides[0], 6);
    EXPECT_EQ(view.strides[1], 2);
    EXPECT_EQ(view.strides[2], 1);
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

void expect_refused(const DLTensor &tensor, const std::string &expected_text) {
    try {
        msda::from_dlpack(tensor, "value");
        ADD_FAILURE() << "accepted; expected an error saying \"" << expected_text << "\"";
    } catch (const msda::Error &error) {
        EXPECT_NE(std::string(error.what()).find(expected_text), std::string::npos) << error.what();
    }
}

TEST(DLPack, WhatMsdaCannotReadIsRefused) {
    const at::Tensor source = torch::randn({2, 3});
    const Exported exported(source);
    const DLTensor good = exported.managed->dl_tensor;

    DLTensor tensor = good;
    tensor.device = {kDLCUDA, 1};
    expect_refused(tensor, "msda: value: is in CUDA memory (DLPack device type 2, id 1)");
    tensor = good;
    tensor.device = {kDLOpenCL, 0};
    expect_refused(tensor, "is in OpenCL memory");
    tensor = good;
    tensor.dtype = {kDLFloat, 32, 4};
    expect_refused(tensor, "has 4 lanes per element");
    tensor = good;
    tensor.dtype = {kDLUInt, 8, 1};
    expect_refused(tensor, "has DLPack dtype uint8");
    tensor = good;
    tensor.dtype = {kDLComplex, 64, 1};
    expect_refused(tensor, "has DLPack dtype complex64");
    tensor = good;
    tensor.ndim = 7;
    expect_refused(tensor, "has 7 dimensions; msda's tensors have at most 6");
    tensor = good;
    int64_t negative[2] = {2, -3};
    tensor.shape = negative;
    expect_refused(tensor, "dimension 1 has extent -3");
    tensor = good;
    tensor.byte_offset = 2;
    expect_refused(tensor, "is not aligned to its 4-byte elements");
    tensor = good;
    tensor.data = nullptr;
    expect_refused(tensor, "has elements and null data");
    EXPECT_THROW(msda::from_dlpack(static_cast<const DLManagedTensor *>(nullptr), "value"), msda::Error);

    // Pinned host memory is host memory.
    tensor = good;
    tensor.device = {kDLCUDAHost, 0};
    EXPECT_EQ(msda::from_dlpack(tensor, "value").data, source.data_ptr());
}

}  // namespace
