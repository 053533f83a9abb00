#include "tensor_files.h"

#include <algorithm>

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

npy::Array to_float32(const npy::Array &doubles) {
    npy::Array floats(npy::DType::float32, doubles.shape());
    std::span<const double> from = doubles.elements<double>();
    std::ranges::transform(from, floats.elements<float>().begin(),
                           [](double x) { return static_cast<float>(x); });
    return floats;
}

}  // namespace

msda::TensorView TensorFile::view() const {
    msda::TensorView view;
    view.data = const_cast<void *>(array.data());
    view.dtype = api_dtype(array.dtype());
    view.rank = array.rank();
    std::int64_t stride = 1;
    for (int d = view.rank - 1; d >= 0; --d) {
        view.shape[d] = array.shape()[d];
        view.strides[d] = stride;
        stride *= array.shape()[d];
    }
    return view;
}

TensorFile read_float_tensor(const std::string &name, const std::string &path, const Expected &expected) {
    npy::Array array = read_file(name, path);
    if (array.dtype() != npy::DType::float32 && array.dtype() != npy::DType::float64)
        throw npy::Error(describe(name, path) + ": expected dtype float32 or float64, got " +
                         npy::dtype_name(array.dtype()));
    check_rank(name, path, array, expected);
    if (array.dtype() == npy::DType::float64) array = to_float32(array);
    return {name, path, std::move(array)};
}

TensorFile read_index_tensor(const std::string &name, const std::string &path, const Expected &expected) {
    npy::Array array = read_file(name, path);
    if (array.dtype() != npy::DType::int32 && array.dtype() != npy::DType::int64)
        throw npy::Error(describe(name, path) + ": expected dtype int32 or int64, got " +
                         npy::dtype_name(array.dtype()));
    check_rank(name, path, array, expected);
    return {name, path, std::move(array)};
}

TensorFile make_result(const std::string &name, const std::string &path, std::vector<std::int64_t> shape) {
    return {name, path, npy::Array(npy::DType::float32, std::move(shape))};
}

void write_tensor(const TensorFile &tensor) { npy::write(tensor.path, tensor.array); }

}  // namespace msda_cli
