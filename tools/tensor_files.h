// Operator tensors read from and written to .npy files, held in the form the
// msda API takes them: float tensors as float32, index tensors as int32 or
// int64, C order.
#pragma once

#include <msda/msda.hpp>

#include <string>

#include "npy.h"

namespace msda_cli {

// One tensor of an operator call and the file it came from (or goes to).
struct TensorFile {
    std::string name;  // the tensor's name in the API, e.g. "value"
    std::string path;
    npy::Array array;

    // A row-major view of `array` for the API.
    msda::TensorView view() const;
};

// What a tensor file must hold: its rank and a description of its shape for
// messages, e.g. "(B, N_q, N_h, N_l, N_p)".
struct Expected {
    int rank;
    std::string shape;
};

// A float tensor: float32 is used as stored, float64 is rounded to float32
// (the API computes on float32 storage). Integer files are rejected.
TensorFile read_float_tensor(const std::string &name, const std::string &path, const Expected &expected);

// An index tensor (spatial_shapes, level_start_index): int32 or int64, used
// as stored. Float files are rejected.
TensorFile read_index_tensor(const std::string &name, const std::string &path, const Expected &expected);

// A zero-filled float32 result of the given shape, to be written to `path`.
TensorFile make_result(const std::string &name, const std::string &path, std::vector<std::int64_t> shape);

void write_tensor(const TensorFile &tensor);

}  // namespace msda_cli
