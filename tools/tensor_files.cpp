#include "tensor_files.h"

#include <msda/half.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

namespace msda_cli {

namespace {

std::string shape_text(const std::vector<std::int64_t> &shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + (shape.size() == 1 ? ",)" : ")");
}

msda::DType api_dtype(npy::DType dtype) {
    switch (dtype) {
    case npy::DType::float32: return msda::DType::f32;
    case npy::DType::float64: return msda::DType::f64;
    case npy::DType::int32: return msda::DType::i32;
    case npy::DType::int64: return msda::DType::i64;
    }
    throw std::logic_error("unknown npy dtype");
}

// "value: V.npy": how messages point at a tensor and its file.
std::string describe(const std::string &name, const std::string &path) { return name + ": " + path; }

// The file, read as any .npy; its own messages start with the path, and get
// the tensor's name in front.
npy::Array read_file(const std::string &name, const std::string &path) {
    try {
        return npy::read(path);
    } catch (const npy::Error &error) {
        throw npy::Error(name + ": " + error.what());
    }
}

void check_rank(const std::string &name, const std::string &path, const npy::Array &array,
                const Expected &expected) {
    if (array.rank() != expected.rank)
        throw npy::Error(describe(name, path) + ": expected rank " + std::to_string(expected.rank) + " " +
                         expected.shape + ", got shape " + shape_text(array.shape()));
}

bool is_half(msda::DType dtype) { return dtype == msda::DType::f16 || dtype == msda::DType::bf16; }

// A finite element that became infinite in the storage dtype: an error
// naming the tensor, the file, the element and the dtype's range.
void check_in_range(const std::string &name, const std::string &path, std::size_t index, double given, float stored,
                    msda::DType storage) {
    if (!std::isfinite(given) || std::isfinite(stored)) return;
    const char *largest = storage == msda::DType::f16 ? "65504" : "3.4028235e+38";
    char text[64];
    std::snprintf(text, sizeof text, "%.9g", given);
    throw npy::Error(describe(name, path) + ": element " + std::to_string(index) + " is " + text + ", beyond " +
                     msda::dtype_name(storage) + "'s range (its largest finite value is " + largest +
                     "), the dtype msda stores " + name + " in");
}

// Exact: every float32 is a float64.
npy::Array to_float64(const npy::Array &floats) {
    npy::Array doubles(npy::DType::float64, floats.shape());
    std::ranges::copy(floats.elements<float>(), doubles.elements<double>().begin());
    return doubles;
}

npy::Array to_float32(const std::string &name, const std::string &path, const npy::Array &doubles) {
    npy::Array floats(npy::DType::float32, doubles.shape());
    std::span<const double> from = doubles.elements<double>();
    std::span<float> to = floats.elements<float>();
    for (std::size_t i = 0; i < from.size(); ++i) {
        to[i] = static_cast<float>(from[i]);
        check_in_range(name, path, i, from[i], to[i], msda::DType::f32);
    }
    return floats;
}

// A double rounded to float32 toward zero, with the lowest significand bit
// set when that was inexact ("round to odd"). Rounding this to a half type
// (at most 11 significand bits of float32's 24) gives what rounding the
// double itself would: rounding to nearest float32 first could land on a
// tie the double was not at (1 + 2^-11 + 2^-40 would become 1 + 2^-11, then
// float16's even 1 instead of the nearer 1 + 2^-10).
float round_to_odd_float32(double x) {
    float rounded = static_cast<float>(x);
    if (std::isnan(x) || static_cast<double>(rounded) == x) return rounded;
    if (std::abs(static_cast<double>(rounded)) > std::abs(x)) rounded = std::nextafter(rounded, 0.0f);
    std::uint32_t bits;
    std::memcpy(&bits, &rounded, sizeof bits);
    bits |= 1u;
    std::memcpy(&rounded, &bits, sizeof bits);
    return rounded;
}

std::uint16_t to_half(msda::DType storage, float x) {
    return storage == msda::DType::f16 ? msda::float_to_f16(x) : msda::float_to_bf16(x);
}

float half_to_float(msda::DType storage, std::uint16_t half) {
    return storage == msda::DType::f16 ? msda::f16_to_float(half) : msda::bf16_to_float(half);
}

std::vector<std::uint16_t> to_halves(const std::string &name, const std::string &path, const npy::Array &array,
                                     msda::DType storage) {
    std::vector<std::uint16_t> halves(static_cast<std::size_t>(array.numel()));
    const bool doubles = array.dtype() == npy::DType::float64;
    for (std::size_t i = 0; i < halves.size(); ++i) {
        const double given = doubles ? array.elements<double>()[i] : array.elements<float>()[i];
        halves[i] = to_half(storage, doubles ? round_to_odd_float32(given) : static_cast<float>(given));
        check_in_range(name, path, i, given, half_to_float(storage, halves[i]), storage);
    }
    return halves;
}

// Exact: every float16 and bfloat16 value is a float32.
npy::Array halves_to_float32(const TensorFile &tensor) {
    npy::Array floats(npy::DType::float32, tensor.shape);
    std::ranges::transform(tensor.halves, floats.elements<float>().begin(),
                           [&tensor](std::uint16_t half) { return half_to_float(tensor.dtype, half); });
    return floats;
}

}  // namespace

msda::TensorView TensorFile::view() const {
    msda::TensorView view;
    view.data = is_half(dtype) ? const_cast<std::uint16_t *>(halves.data()) : const_cast<void *>(array.data());
    view.dtype = dtype;
    view.rank = static_cast<int>(shape.size());
    std::int64_t stride = 1;
    for (int d = view.rank - 1; d >= 0; --d) {
        view.shape[d] = shape[d];
        view.strides[d] = stride;
        stride *= shape[d];
    }
    return view;
}

TensorFile read_float_tensor(const std::string &name, const std::string &path, const Expected &expected,
                             msda::DType storage) {
    npy::Array array = read_file(name, path);
    if (array.dtype() != npy::DType::float32 && array.dtype() != npy::DType::float64)
        throw npy::Error(describe(name, path) + ": expected dtype float32 or float64, got " +
                         npy::dtype_name(array.dtype()));
    check_rank(name, path, array, expected);
    TensorFile tensor{name, path, array.shape(), storage, {}, {}};
    if (is_half(storage))
        tensor.halves = to_halves(name, path, array, storage);  // the file's elements are not kept
    else if (storage == msda::DType::f64)
        tensor.array = array.dtype() == npy::DType::float32 ? to_float64(array) : std::move(array);
    else
        tensor.array = array.dtype() == npy::DType::float64 ? to_float32(name, path, array) : std::move(array);
    return tensor;
}

TensorFile read_index_tensor(const std::string &name, const std::string &path, const Expected &expected) {
    npy::Array array = read_file(name, path);
    if (array.dtype() != npy::DType::int32 && array.dtype() != npy::DType::int64)
        throw npy::Error(describe(name, path) + ": expected dtype int32 or int64, got " +
                         npy::dtype_name(array.dtype()));
    check_rank(name, path, array, expected);
    return {name, path, array.shape(), api_dtype(array.dtype()), std::move(array), {}};
}

TensorFile make_result(const std::string &name, const std::string &path, std::vector<std::int64_t> shape,
                       msda::DType storage) {
    if (storage == msda::DType::f64) return {name, path, shape, storage, npy::Array(npy::DType::float64, shape), {}};
    if (!is_half(storage)) return {name, path, shape, storage, npy::Array(npy::DType::float32, shape), {}};
    // A result has the shape of an input held in memory, or one the API has
    // checked (the output), so its element count does not overflow.
    std::int64_t count = 1;
    for (std::int64_t extent : shape) count *= extent;
    return {name, path, std::move(shape), storage, {}, std::vector<std::uint16_t>(static_cast<std::size_t>(count))};
}

void write_tensors(const std::vector<const TensorFile *> &tensors) {
    std::vector<std::unique_ptr<npy::PendingWrite>> pending;
    for (const TensorFile *tensor : tensors) {
        if (is_half(tensor->dtype)) {
            pending.push_back(std::make_unique<npy::PendingWrite>(tensor->path, halves_to_float32(*tensor)));
        } else {
            pending.push_back(std::make_unique<npy::PendingWrite>(tensor->path, tensor->array));
        }
    }
    for (auto &file : pending) file->commit();
}

}  // namespace msda_cli
