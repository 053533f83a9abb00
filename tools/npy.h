// Reading and writing NumPy .npy files: the format the msda command line
// takes its tensors in and gives its results back in.
//
// Only what the operators need is supported: little-endian float32, float64,
// int32 and int64 arrays in C order, format versions 1.0, 2.0 and 3.0. Any
// other file is rejected with an npy::Error that names the file and says
// what was expected, never read half-way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace npy {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class DType { float32, float64, int32, int64 };

std::size_t element_size(DType);
// NumPy's name for the type ("float32", ...), for messages.
const char *dtype_name(DType);

// An array as stored in a file: its element type, shape and raw
// little-endian bytes. The bytes are kept in a buffer of 8-byte words so the
// data can be viewed as any of the supported types without copying.
class Array {
public:
    Array() = default;
    Array(DType dtype, std::vector<std::int64_t> shape);

    DType dtype() const { return dtype_; }
    const std::vector<std::int64_t> &shape() const { return shape_; }
    int rank() const { return static_cast<int>(shape_.size()); }
    std::int64_t numel() const;
    std::size_t byte_size() const { return static_cast<std::size_t>(numel()) * element_size(dtype_); }

    void *data() { return storage_.data(); }
    const void *data() const { return storage_.data(); }

    // The elements as T, which must match dtype() (checked: a mismatch is a
    // programming error and throws std::logic_error).
    template <typename T> std::span<T> elements();
    template <typename T> std::span<const T> elements() const;

private:
    void check_element_type(DType requested) const;

    DType dtype_ = DType::float32;
    std::vector<std::int64_t> shape_;
    std::vector<std::uint64_t> storage_;
};

// Reads a whole .npy file. `path` is used in messages as given.
Array read(const std::string &path);

// Parses the bytes of a .npy file; `name` is what messages call it.
Array parse(std::string_view file_bytes, std::string_view name);

// A file written beside `path` (a temporary in the same folder) and
// renamed into place by commit(): a write that fails, or is never
// committed, leaves nothing at `path` (what was there stays) and no
// temporary behind. The constructor writes the whole file (throws npy::Error
// saying why it could not); several of them, committed one after the
// other, replace a set of files only once all were written.
class PendingWrite {
public:
    PendingWrite(const std::string &path, const Array &array);
    PendingWrite(const PendingWrite &) = delete;
    PendingWrite &operator=(const PendingWrite &) = delete;
    ~PendingWrite();
    void commit();

private:
    std::string path_, temporary_;
    bool committed_ = false;
};

// Writes `array` as a version 1.0 file (2.0 when the header needs it),
// through a PendingWrite.
void write(const std::string &path, const Array &array);

// The bytes of a .npy file holding `array`.
std::string serialize(const Array &array);

// The numeric type a DType stores, for the templates above.
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::int32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::int64; }

template <typename T> std::span<T> Array::elements() {
    check_element_type(dtype_of<std::remove_const_t<T>>());
    return {reinterpret_cast<T *>(storage_.data()), static_cast<std::size_t>(numel())};
}

template <typename T> std::span<const T> Array::elements() const {
    check_element_type(dtype_of<T>());
    return {reinterpret_cast<const T *>(storage_.data()), static_cast<std::size_t>(numel())};
}

}  // namespace npy
