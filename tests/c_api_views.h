// The C API's structs from the C++ API's, for tests that drive both.
#pragma once

#include <msda/msda.h>
#include <msda/msda.hpp>

namespace msda::testing {

inline msda_tensor to_c(const msda::TensorView &view) {
    msda_tensor tensor{};
    tensor.data = view.data;
    tensor.dtype = static_cast<msda_dtype>(view.dtype);
    tensor.rank = view.rank;
    for (int axis = 0; axis < MSDA_MAX_RANK; ++axis) {
        tensor.shape[axis] = view.shape[axis];
        tensor.strides[axis] = view.strides[axis];
    }
    tensor.device_type = static_cast<std::int32_t>(view.device_type);
    tensor.device_id = view.device_id;
    tensor.byte_offset = view.byte_offset;
    return tensor;
}

inline msda_forward_args to_c(const msda::ForwardArgs &args) {
    return {to_c(args.value),           to_c(args.spatial_shapes), to_c(args.level_start_index),
            to_c(args.sampling_locations), to_c(args.attention_weights), to_c(args.output)};
}

inline msda_backward_args to_c(const msda::BackwardArgs &args) {
    return {to_c(args.value),
            to_c(args.spatial_shapes),
            to_c(args.level_start_index),
            to_c(args.sampling_locations),
            to_c(args.attention_weights),
            to_c(args.grad_output),
            to_c(args.grad_value),
            to_c(args.grad_sampling_locations),
            to_c(args.grad_attention_weights)};
}

}  // namespace msda::testing
