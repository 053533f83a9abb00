// Operator tensors read from and written to .npy files, held in the form the
// msda API takes them: float tensors in the storage dtype of the call
// (float32, float16, bfloat16 or float64), index tensors as int32 or int64,
// C order. Files are float32 or float64 whatever the storage dtype; results
// are written as float32, or float64 for float64 storage.
#pragma once

#include <msda/msda.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "npy.h"

namespace msda_cli {

// One tensor of an operator call and the file it came from (or goes to).
struct TensorFile {
    std::string name;  // the tensor's name in the API, e.g. "value"
    std::string path;
    std::vector<std::int64_t> shape;
    msda::DType dtype = msda::DType::f32;  // as the API sees the tensor
    // The elements: of a float32 or index tensor in `array`, of a float16 or
    // bfloat16 tensor as bit patterns in `halves` (.npy has no bfloat16, and
    // the API reads the patterns), with `array` left empty.
    npy::Array array;
    std::vector<std::uint16_t> halves;

    // A row-major view of the elements for the API.
    msda::TensorView view() const;
};

// What a tensor file must hold: its rank and a description of its shape for
// messages, e.g. "(B, N_q, N_h, N_l, N_p)".
struct Expected {
    int rank;
    std::string shape;
};

// A float tensor in `storage` (f32, f16, bf16 or f64): a float32 or float64
// file, rounded once to nearest even (a float64 file straight to the storage
// dtype, not through float32; a float32 file to f64 exactly). Integer files are rejected, and so is a
// finite element beyond the storage dtype's range (it would become
// infinite).
TensorFile read_float_tensor(const std::string &name, const std::string &path, const Expected &expected,
                             msda::DType storage = msda::DType::f32);

// An index tensor (spatial_shapes, level_start_index): int32 or int64, used
// as stored. Float files are rejected.
TensorFile read_index_tensor(const std::string &name, const std::string &path, const Expected &expected);

// A zero-filled result of the given shape in `storage` (f32, f16, bf16 or f64),
// to be written to `path`.
TensorFile make_result(const std::string &name, const std::string &path, std::vector<std::int64_t> shape,
                       msda::DType storage = msda::DType::f32);

// Writes the tensors as float32 (half-precision elements convert exactly),
// each to a temporary beside its path, then, once every one is written,
// renamed into place (npy::PendingWrite): a failed write leaves every path
// as it was.
void write_tensors(const std::vector<const TensorFile *> &tensors);

}  // namespace msda_cli
