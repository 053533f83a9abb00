// DLPack tensors as msda views, without copying. Header-only; needs
// <dlpack/dlpack.h> (DLPack 0.6, Debian's libdlpack-dev, the layout torch,
// NumPy, JAX and CuPy exchange).
//
//   msda::TensorView value = msda::from_dlpack(managed_value, "value");
//
// Host memory: the view points at the DLTensor's data plus its byte_offset.
// CUDA memory (kDLCUDA, and kDLCUDAManaged): the same, a device address
// (DeviceType::cuda, with its device_id); a call with it runs on CUDA.
// OpenCL memory (kDLOpenCL): the view's data is the DLTensor's data, the
// cl_mem, and its byte_offset the DLTensor's (DeviceType::opencl, with its
// device_id); a call with it runs on OpenCL (Options::device). Either way
// the view has the shape, and the strides (in elements) or, when there are
// none, the compact row-major ones. The DLManagedTensor stays owned by the
// caller: call its deleter once msda is done with the view. What msda cannot
// read is an msda::Error naming the tensor: memory of another device, a
// dtype msda has no code for (it takes float32, float16, bfloat16, float64,
// int32 and int64), vector lanes, more than 6 dimensions, a
// negative extent, or a first element not aligned to its size.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>

#include <msda/msda.hpp>

namespace msda {

namespace dlpack_detail {

[[noreturn]] inline void refuse(const char *name, const std::string &what) {
    throw Error(std::string("msda: ") + name + ": " + what);
}

inline const char *device_name(int type) {
    switch (type) {
    case kDLCPU: return "CPU";
    case kDLCUDA: return "CUDA";
    case kDLCUDAHost: return "CUDA host (pinned)";
    case kDLOpenCL: return "OpenCL";
    case kDLVulkan: return "Vulkan";
    case kDLMetal: return "Metal";
    case kDLVPI: return "VPI";
    case kDLROCM: return "ROCm";
    case kDLROCMHost: return "ROCm host (pinned)";
    case kDLExtDev: return "an extension device";
    case kDLCUDAManaged: return "CUDA managed";
    default: return "an unknown device";
    }
}

inline DType dtype_of(const DLDataType &type, const char *name) {
    if (type.lanes != 1) {
        refuse(name, "has " + std::to_string(type.lanes) + " lanes per element; msda reads scalar elements (lanes 1)");
    }
    if (type.code == kDLFloat && type.bits == 32) return DType::f32;
    if (type.code == kDLFloat && type.bits == 16) return DType::f16;
    if (type.code == kDLFloat && type.bits == 64) return DType::f64;
    if (type.code == kDLBfloat && type.bits == 16) return DType::bf16;
    if (type.code == kDLInt && type.bits == 32) return DType::i32;
    if (type.code == kDLInt && type.bits == 64) return DType::i64;
    const char *code = type.code == kDLInt       ? "int"
                       : type.code == kDLUInt    ? "uint"
                       : type.code == kDLFloat   ? "float"
                       : type.code == kDLBfloat  ? "bfloat"
                       : type.code == kDLComplex ? "complex"
                       : type.code == kDLOpaqueHandle ? "opaque handle"
                                                      : "unknown code ";
    refuse(name, std::string("has DLPack dtype ") + code +
                     (type.code <= kDLComplex ? "" : std::to_string(type.code)) + std::to_string(type.bits) +
                     "; msda takes float32, float16, bfloat16 or float64 (and int32 or int64 for spatial_shapes "
                     "and level_start_index)");
}

}  // namespace dlpack_detail

// The view of `tensor`'s memory: host memory (kDLCPU, and the pinned host
// memory of kDLCUDAHost and kDLROCMHost), CUDA device memory (kDLCUDA,
// kDLCUDAManaged) or an OpenCL buffer (kDLOpenCL).
inline TensorView from_dlpack(const DLTensor &tensor, const char *name = "tensor") {
    using dlpack_detail::refuse;
    const int device = static_cast<int>(tensor.device.device_type);
    const bool cuda = device == kDLCUDA || device == kDLCUDAManaged;
    if (device != kDLCPU && device != kDLCUDAHost && device != kDLROCMHost && device != kDLOpenCL && !cuda) {
        refuse(name, std::string("is in ") + dlpack_detail::device_name(device) + " memory (DLPack device type " +
                         std::to_string(device) + ", id " + std::to_string(tensor.device.device_id) +
                         "); msda reads host memory (kDLCPU, kDLCUDAHost or kDLROCMHost), CUDA memory (kDLCUDA, "
                         "kDLCUDAManaged) and OpenCL buffers (kDLOpenCL)");
    }
    if (tensor.ndim < 0 || tensor.ndim > kMaxRank) {
        refuse(name, "has " + std::to_string(tensor.ndim) + " dimensions; msda's tensors have at most " +
                         std::to_string(kMaxRank));
    }
    if (tensor.ndim > 0 && tensor.shape == nullptr) refuse(name, "has a null shape array");
    TensorView view;
    view.dtype = dlpack_detail::dtype_of(tensor.dtype, name);
    view.rank = tensor.ndim;
    bool empty = false;
    for (int d = 0; d < view.rank; ++d) {
        if (tensor.shape[d] < 0) {
            refuse(name, "dimension " + std::to_string(d) + " has extent " + std::to_string(tensor.shape[d]));
        }
        view.shape[d] = tensor.shape[d];
        empty = empty || tensor.shape[d] == 0;
    }
    if (tensor.strides != nullptr) {
        for (int d = 0; d < view.rank; ++d) view.strides[d] = tensor.strides[d];
    } else {
        // DLPack's compact row-major strides.
        std::int64_t stride = 1;
        for (int d = view.rank - 1; d >= 0; --d) {
            view.strides[d] = stride;
            if (view.shape[d] > 0 && __builtin_mul_overflow(stride, view.shape[d], &stride)) {
                refuse(name, "its shape's element count overflows 64 bits");
            }
        }
    }
    if (tensor.data == nullptr) {
        if (!empty && view.rank > 0) refuse(name, "has elements and null data");
        view.data = nullptr;
        return view;
    }
    const std::size_t element = dtype_size(view.dtype);
    if (device == kDLOpenCL) {
        if (tensor.byte_offset % element != 0 || tensor.byte_offset > static_cast<std::uint64_t>(INT64_MAX)) {
            refuse(name, "its byte_offset " + std::to_string(tensor.byte_offset) + " into its cl_mem is not a multiple of its " +
                             std::to_string(element) + "-byte elements");
        }
        view.data = tensor.data;
        view.device_type = DeviceType::opencl;
        view.device_id = tensor.device.device_id;
        view.byte_offset = static_cast<std::int64_t>(tensor.byte_offset);
        return view;
    }
    const auto address = reinterpret_cast<std::uintptr_t>(tensor.data) + tensor.byte_offset;
    if (address % element != 0) {
        refuse(name, "its data (data + byte_offset " + std::to_string(tensor.byte_offset) +
                         ") is not aligned to its " + std::to_string(element) + "-byte elements");
    }
    view.data = reinterpret_cast<void *>(address);
    if (cuda) {
        view.device_type = DeviceType::cuda;
        view.device_id = tensor.device.device_id;
    }
    return view;
}

inline TensorView from_dlpack(const DLManagedTensor *tensor, const char *name = "tensor") {
    if (tensor == nullptr) dlpack_detail::refuse(name, "is a null DLManagedTensor");
    return from_dlpack(tensor->dl_tensor, name);
}

}  // namespace msda
