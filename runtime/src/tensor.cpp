// TensorView helpers and dtype names.
#include <msda/msda.hpp>

#include <limits>

namespace msda {

const char *dtype_name(DType dtype) {
    switch (dtype) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    }
    return "unknown dtype";
}

std::size_t dtype_size(DType dtype) {
    switch (dtype) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64:
    case DType::i64: return 8;
    }
    return 0;
}

TensorView TensorView::contiguous(const void *data, DType dtype,
                                  std::initializer_list<std::int64_t> shape) {
    if (shape.size() > static_cast<std::size_t>(kMaxRank)) {
        throw ValueError("msda: TensorView::contiguous: rank " + std::to_string(shape.size()) +
                    " exceeds the maximum of " + std::to_string(kMaxRank));
    }
    TensorView view;
    view.data = const_cast<void *>(data);
    view.dtype = dtype;
    view.rank = static_cast<int>(shape.size());
    int d = 0;
    for (std::int64_t extent : shape) view.shape[d++] = extent;
    std::int64_t stride = 1;
    for (d = view.rank - 1; d >= 0; d--) {
        view.strides[d] = stride;
        // The next dimension's dense stride. A shape whose strides do not
        // fit 64 bits saturates them (validation then refuses the tensor
        // by name: it spans more than can be addressed).
        if (d > 0 && __builtin_mul_overflow(stride, view.shape[d], &stride)) {
            stride = std::numeric_limits<std::int64_t>::max();
        }
    }
    return view;
}

TensorView TensorView::strided(const void *data, DType dtype,
                               std::initializer_list<std::int64_t> shape,
                               std::initializer_list<std::int64_t> strides) {
    if (shape.size() != strides.size()) {
        throw ValueError("msda: TensorView::strided: " + std::to_string(shape.size()) + " extents but " +
                    std::to_string(strides.size()) + " strides");
    }
    TensorView view = contiguous(data, dtype, shape);
    int d = 0;
    for (std::int64_t stride : strides) view.strides[d++] = stride;
    return view;
}

std::int64_t TensorView::numel() const {
    // Saturates instead of overflowing, and reads no more than kMaxRank
    // extents: validation rejects such shapes and ranks.
    const int dimensions = rank < kMaxRank ? rank : kMaxRank;
    for (int d = 0; d < dimensions; d++) {
        if (shape[d] == 0) return 0;
    }
    std::int64_t count = 1;
    for (int d = 0; d < dimensions; d++) {
        if (__builtin_mul_overflow(count, shape[d], &count)) {
            return std::numeric_limits<std::int64_t>::max();
        }
    }
    return count;
}

}  // namespace msda
