// Helpers shared by the suites that check the library against the double
// reference: deterministic random inputs, strided host tensors that realise a
// layout as a permutation of strides (with optional padding and guard bands),
// the problem description both sides are built from, and SPEC's f32
// comparison rule.
#pragma once

#include <gtest/gtest.h>

#include <msda/diagnostics.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "msda/half.hpp"
#include "msda/msda.hpp"
#include "msda_reference.h"

namespace msda::testing {

// A value no correct call ever writes: outputs are pre-filled with it so a
// test can tell "left alone" from "written".
inline constexpr float kSentinel = -12345.5f;
// What fills the gaps and guard bands of input tensors: a NaN, so that a
// read outside a view would poison the results.
inline const float kPoison = std::numeric_limits<float>::quiet_NaN();

// ----------------------------------------------------------------------------
// Random numbers: one engine per problem, seeded explicitly, so every failure
// reproduces.

class Random {
public:
    explicit Random(std::uint64_t seed) : engine_(seed) {}

    float uniform(float low, float high) { return std::uniform_real_distribution<float>(low, high)(engine_); }
    std::int64_t integer(std::int64_t low, std::int64_t high) {  // inclusive
        return std::uniform_int_distribution<std::int64_t>(low, high)(engine_);
    }
    std::vector<float> uniform_vector(std::size_t count, float low, float high) {
        std::vector<float> values(count);
        for (float &v : values) v = uniform(low, high);
        return values;
    }

private:
    std::mt19937_64 engine_;
};

// ----------------------------------------------------------------------------
// Storage dtypes: a float32 value as a tensor of `dtype` holds it, and back.

inline bool is_half(msda::DType dtype) { return dtype == msda::DType::f16 || dtype == msda::DType::bf16; }

inline std::uint16_t to_half(float value, msda::DType dtype) {
    return dtype == msda::DType::f16 ? msda::float_to_f16(value) : msda::float_to_bf16(value);
}
inline float from_half(std::uint16_t bits, msda::DType dtype) {
    return dtype == msda::DType::f16 ? msda::f16_to_float(bits) : msda::bf16_to_float(bits);
}

// `value` as a tensor of `dtype` stores it (rounded to nearest, ties to even).
inline float stored(float value, msda::DType dtype) {
    return is_half(dtype) ? from_half(to_half(value, dtype), dtype) : value;
}
inline std::vector<float> stored(std::vector<float> values, msda::DType dtype) {
    for (float &v : values) v = stored(v, dtype);
    return values;
}

// ----------------------------------------------------------------------------
// A strided tensor in host memory, float32 or a half-precision dtype.
//
// Elements are addressed by their canonical multi-index (the reference's
// layout) and exchanged as float32 (rounded to nearest even when the tensor
// is half precision). The view's dimension i is canonical dimension
// order[i]; memory is allocated in the view's row-major order, so `order` is
// the layout. With padding > 0 every stride but the innermost grows by that
// many elements (every stride outside the innermost `dense_dimensions`),
// leaving gaps no call may touch; innermost_stride > 1 spreads
// the innermost dimension too (allowed for the per-sample tensors, whose
// innermost dimension is not a channel dimension). Guard bands of the same
// sentinel surround the view, so any write outside it shows.

class StridedTensor {
public:
    StridedTensor() = default;

    StridedTensor(std::vector<std::int64_t> canonical_shape, std::vector<int> order, std::int64_t padding = 0,
                  std::int64_t innermost_stride = 1, float fill = kSentinel, msda::DType dtype = msda::DType::f32,
                  int dense_dimensions = 1)
        : canonical_shape_(std::move(canonical_shape)), order_(std::move(order)), dtype_(dtype) {
        const int rank = static_cast<int>(canonical_shape_.size());
        if (order_.empty()) {
            order_.resize(rank);
            std::iota(order_.begin(), order_.end(), 0);
        }
        view_shape_.resize(rank);
        view_strides_.resize(rank);
        for (int i = 0; i < rank; i++) view_shape_[i] = canonical_shape_[order_[i]];
        std::int64_t stride = innermost_stride;
        for (int i = rank - 1; i >= 0; i--) {
            view_strides_[i] = stride;
            stride = stride * view_shape_[i] + (i > 0 && i <= rank - dense_dimensions ? padding : 0);
        }
        numel_ = 1;
        for (std::int64_t extent : canonical_shape_) numel_ *= extent;
        std::int64_t span = 0;  // one past the largest offset the view addresses
        if (numel_ > 0) {
            span = 1;
            for (int i = 0; i < rank; i++) span += (view_shape_[i] - 1) * view_strides_[i];
        }
        const std::size_t elements = static_cast<std::size_t>(span + 2 * kGuard);
        if (is_half(dtype_)) {
            half_.assign(elements, to_half(fill, dtype_));
        } else {
            storage_.assign(elements, fill);
        }
        build_offsets();
    }

    std::int64_t numel() const { return numel_; }
    msda::DType dtype() const { return dtype_; }
    // float32 tensors only.
    float *data() { return storage_.data() + kGuard; }
    const float *data() const { return storage_.data() + kGuard; }

    msda::TensorView view() const {
        msda::TensorView v;
        v.data = is_half(dtype_) ? static_cast<void *>(const_cast<std::uint16_t *>(half_.data() + kGuard))
                                 : static_cast<void *>(const_cast<float *>(data()));
        v.dtype = dtype_;
        v.rank = static_cast<int>(view_shape_.size());
        for (int i = 0; i < v.rank; i++) {
            v.shape[i] = view_shape_[i];
            v.strides[i] = view_strides_[i];
        }
        return v;
    }

    // Every storage element (gaps and guard bands included) set to `value`.
    void fill(float value) {
        if (is_half(dtype_)) {
            std::fill(half_.begin(), half_.end(), to_half(value, dtype_));
        } else {
            std::fill(storage_.begin(), storage_.end(), value);
        }
    }

    // Writes the view's elements from canonical row-major order.
    void set_canonical(const std::vector<float> &values) {
        EXPECT_EQ(static_cast<std::int64_t>(values.size()), numel_);
        for (std::int64_t k = 0; k < numel_; k++) {
            if (is_half(dtype_)) {
                half_[kGuard + offsets_[k]] = to_half(values[k], dtype_);
            } else {
                data()[offsets_[k]] = values[k];
            }
        }
    }

    // Reads the view's elements in canonical row-major order.
    std::vector<float> canonical() const {
        std::vector<float> values(static_cast<std::size_t>(numel_));
        for (std::int64_t k = 0; k < numel_; k++) {
            values[k] = is_half(dtype_) ? from_half(half_[kGuard + offsets_[k]], dtype_) : data()[offsets_[k]];
        }
        return values;
    }

    // True when every storage element the view does not address (padding
    // gaps and guard bands) still holds `value` (as this dtype stores it).
    bool outside_view_holds(float value) const {
        std::vector<bool> addressed(element_count(), false);
        for (std::int64_t offset : offsets_) addressed[offset + kGuard] = true;
        for (std::size_t i = 0; i < element_count(); i++) {
            if (!addressed[i] && !element_holds(i, value)) return false;
        }
        return true;
    }

    // True when every element of the storage holds `value`, bit for bit.
    bool all_hold(float value) const {
        for (std::size_t i = 0; i < element_count(); i++) {
            if (!element_holds(i, value)) return false;
        }
        return true;
    }

    // The whole storage (guard bands included), in place: the view's first
    // element is guard_bytes() into it.
    std::uint8_t *storage_bytes() {
        return is_half(dtype_) ? reinterpret_cast<std::uint8_t *>(half_.data())
                               : reinterpret_cast<std::uint8_t *>(storage_.data());
    }
    std::size_t storage_size() const { return element_count() * msda::dtype_size(dtype_); }
    std::size_t guard_bytes() const { return kGuard * msda::dtype_size(dtype_); }

    // The whole storage as bytes, for bitwise comparisons.
    std::vector<std::uint8_t> bytes() const {
        const auto *begin = is_half(dtype_) ? reinterpret_cast<const std::uint8_t *>(half_.data())
                                            : reinterpret_cast<const std::uint8_t *>(storage_.data());
        return std::vector<std::uint8_t>(begin, begin + element_count() * msda::dtype_size(dtype_));
    }

private:
    static constexpr std::int64_t kGuard = 16;

    std::size_t element_count() const { return is_half(dtype_) ? half_.size() : storage_.size(); }

    bool element_holds(std::size_t i, float value) const {
        if (is_half(dtype_)) return half_[i] == to_half(value, dtype_);
        return std::memcmp(&storage_[i], &value, sizeof(float)) == 0;
    }

    void build_offsets() {
        const int rank = static_cast<int>(canonical_shape_.size());
        // Stride of each canonical dimension.
        std::vector<std::int64_t> canonical_strides(rank);
        for (int i = 0; i < rank; i++) canonical_strides[order_[i]] = view_strides_[i];
        offsets_.assign(static_cast<std::size_t>(numel_), 0);
        std::vector<std::int64_t> index(rank, 0);
        for (std::int64_t k = 0; k < numel_; k++) {
            std::int64_t offset = 0;
            for (int d = 0; d < rank; d++) offset += index[d] * canonical_strides[d];
            offsets_[k] = offset;
            for (int d = rank - 1; d >= 0; d--) {
                if (++index[d] < canonical_shape_[d]) break;
                index[d] = 0;
            }
        }
    }

    std::vector<std::int64_t> canonical_shape_;
    std::vector<int> order_;
    msda::DType dtype_ = msda::DType::f32;
    std::vector<std::int64_t> view_shape_, view_strides_;
    std::int64_t numel_ = 0;
    std::vector<float> storage_;        // float32 tensors
    std::vector<std::uint16_t> half_;   // half-precision tensors: the stored bit patterns
    std::vector<std::int64_t> offsets_;  // canonical linear index -> offset from the view's start
};

// The view order of each layout, as canonical dimensions.
inline std::vector<int> value_order(msda::ValueLayout layout) {
    // canonical (B, L, N_h, C_h)
    return layout == msda::ValueLayout::BLNC ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 2, 1, 3};
}
inline std::vector<int> locations_order(msda::LocationsLayout layout) {
    // canonical (B, N_q, N_h, N_l, N_p, 2)
    return layout == msda::LocationsLayout::BQHLP2 ? std::vector<int>{0, 1, 2, 3, 4, 5}
                                                   : std::vector<int>{0, 5, 1, 2, 3, 4};
}

inline const char *layout_name(msda::ValueLayout layout) {
    return layout == msda::ValueLayout::BLNC ? "BLNC" : "BNLC";
}
inline const char *layout_name(msda::LocationsLayout layout) {
    return layout == msda::LocationsLayout::BQHLP2 ? "BQHLP2" : "B2QHLP";
}

// ----------------------------------------------------------------------------
// Where sampling locations are drawn.

enum class Locations {
    inside,         // uniform in [0, 1]
    outside,        // uniform in [-0.3, 1.3]
    pixel_centres,  // exactly on pixel centres (or on the last pixel's edge)
    gate_boundary,  // x = -1 or x = W (or y = -1, y = H) exactly, plus just inside
    non_finite,     // inside, with NaN, +Inf and -Inf mixed in
    far_outside,    // huge finite values (up to FLT_MAX) mixed with [-0.3, 1.3]
};

inline const char *locations_name(Locations kind) {
    switch (kind) {
        case Locations::inside:
            return "inside";
        case Locations::outside:
            return "outside";
        case Locations::pixel_centres:
            return "pixel_centres";
        case Locations::gate_boundary:
            return "gate_boundary";
        case Locations::non_finite:
            return "non_finite";
        case Locations::far_outside:
            return "far_outside";
    }
    return "?";
}

// A float32 location whose pixel coordinate, rounded as the generated code
// rounds it, is exactly `target`. Searches a few ulps around the nearest
// float of the exact solution; returns that nearest float when no neighbour
// hits (sizes whose transform cannot land on `target` exactly, e.g. W = 1
// with align_corners, where every location maps to 0).
inline float location_for_pixel(double target, std::int64_t size, bool align_corners, bool *exact = nullptr) {
    const double scale = align_corners ? static_cast<double>(size - 1) : static_cast<double>(size);
    const double shift = align_corners ? 0.0 : 0.5;
    const float nearest = scale > 0 ? static_cast<float>((target + shift) / scale) : 0.0f;
    float candidate = nearest;
    for (int step = 0; step <= 8; step++) {
        for (float direction : {1.0f, -1.0f}) {
            candidate = nearest;
            for (int k = 0; k < step; k++) candidate = std::nextafter(candidate, direction * 10.0f);
            if (msda::reference::pixel_coordinate(candidate, size, align_corners) == target) {
                if (exact) *exact = true;
                return candidate;
            }
        }
    }
    if (exact) *exact = false;
    return nearest;
}

// ----------------------------------------------------------------------------
// One problem: its sizes, options and float32 inputs in canonical layout.

// The device the suite's calls run on: MSDA_TEST_DEVICE=opencl or cuda (the
// opencl and cuda labels, tests/opencl.cmake and cuda.cmake) runs the same
// cases on Device::opencl or Device::cuda.
inline msda::Device test_device() {
    const char *device = std::getenv("MSDA_TEST_DEVICE");
    const std::string name = device != nullptr ? device : "";
    return name == "opencl" ? msda::Device::opencl : name == "cuda" ? msda::Device::cuda : msda::Device::cpu;
}

// Whether this build has OpenCL code (MSDA_OPENCL).
inline bool opencl_built() {
    for (const msda::CompiledVariant &variant : msda::compiled_variants()) {
        if (variant.family == "opencl") return true;
    }
    return false;
}

// What a test binary prints when its whole run is skipped (its environment,
// expected_target.cpp), before the reason: GoogleTest counts such a run's
// tests as passed, so ctest reports the run SKIPPED by this line
// (kSkipPattern, tests/CMakeLists.txt).
inline constexpr const char *kSkippedRun = "msda tests: the whole run is SKIPPED: ";

// Why Device::opencl cannot run here, or empty when it can.
inline std::string opencl_unavailable() {
    if (!opencl_built()) return "this build has no OpenCL code (MSDA_OPENCL=OFF)";
    const msda::OpenClReport report = msda::opencl_devices();
    return report.devices.empty() ? "no OpenCL device: " + report.error : "";
}

// Whether this build has CUDA code (MSDA_CUDA), and why Device::cuda
// cannot run here (empty when it can).
inline bool cuda_built() {
    for (const msda::CompiledVariant &variant : msda::compiled_variants()) {
        if (variant.family == "cuda") return true;
    }
    return false;
}
inline std::string cuda_unavailable() {
    if (!cuda_built()) return "this build has no CUDA code (MSDA_CUDA=OFF)";
    const msda::CudaReport report = msda::cuda_devices();
    return report.devices.empty() ? "no CUDA device: " + report.error : "";
}

// A test body's first line where it needs an OpenCL device: SKIPPED with
// the reason when there is none.
#define MSDA_REQUIRE_OPENCL()                                                                               \
    do {                                                                                                    \
        if (const std::string why = msda::testing::opencl_unavailable(); !why.empty()) GTEST_SKIP() << why; \
    } while (0)

struct ProblemSpec {
    std::string name;
    std::int64_t batch = 1, queries = 1, heads = 1, channels = 1, points = 1;
    std::vector<msda::reference::Level> levels;
    msda::Options options;
    Locations locations = Locations::inside;
    std::int64_t padding = 0;  // extra stride elements on every non-innermost dimension
    // Innermost stride of sampling_locations, attention_weights and their
    // gradients (value, output and their gradients keep channels dense).
    std::int64_t per_sample_innermost_stride = 1;
    // Padding leaves the (N_l, N_p, 2) and (N_l, N_p) blocks of the
    // per-sample tensors and their gradients dense, padding only their (B,
    // N_q, N_h) strides (as the by-query order needs; BQHLP2 locations).
    bool dense_sample_blocks = false;
    msda::DType shapes_dtype = msda::DType::i32;
    msda::DType start_dtype = msda::DType::i32;
    // Storage: value, attention_weights, grad_output, output and their
    // gradients in `dtype`; sampling_locations and its gradient in
    // `locations_dtype`.
    msda::DType dtype = msda::DType::f32;
    msda::DType locations_dtype = msda::DType::f32;
    std::uint64_t seed = 1;

    std::int64_t value_length() const {
        std::int64_t total = 0;
        for (const auto &level : levels) total += level.height * level.width;
        return total;
    }
    std::int64_t samples() const {  // B * N_q * N_h * N_l * N_p
        return batch * queries * heads * static_cast<std::int64_t>(levels.size()) * points;
    }

    std::string describe() const {
        std::ostringstream out;
        out << name << ": B=" << batch << " N_q=" << queries << " N_h=" << heads << " C_h=" << channels
            << " N_p=" << points << " levels=[";
        for (std::size_t l = 0; l < levels.size(); l++) {
            out << (l ? " " : "") << levels[l].height << "x" << levels[l].width;
        }
        out << "] value=" << layout_name(options.value_layout)
            << " locations=" << layout_name(options.locations_layout)
            << " align_corners=" << options.align_corners
            << " padding_mode=" << (options.padding_mode == msda::PaddingMode::zeros ? "zeros" : "border")
            << " sampled=" << locations_name(locations) << " stride_padding=" << padding
            << " per_sample_innermost_stride=" << per_sample_innermost_stride
            << (dense_sample_blocks ? " dense_sample_blocks" : "")
            << " spatial_shapes=" << msda::dtype_name(shapes_dtype)
            << " level_start_index=" << msda::dtype_name(start_dtype) << " dtype=" << msda::dtype_name(dtype)
            << " locations_dtype=" << msda::dtype_name(locations_dtype) << " seed=" << seed;
        return out.str();
    }
};

// gtest prints a parameter with this instead of its bytes.
inline void PrintTo(const ProblemSpec &spec, std::ostream *out) {
    *out << spec.describe();
}

// The inputs of a problem, canonical layout, as float32 values that their
// storage dtypes hold exactly (drawn in float32, then rounded to the dtype).
// The reference sees exactly these values, widened to double.
struct ProblemData {
    ProblemSpec spec;
    std::vector<float> value;               // (B, L, N_h, C_h)
    std::vector<float> sampling_locations;  // (B, N_q, N_h, N_l, N_p, 2)
    std::vector<float> attention_weights;   // (B, N_q, N_h, N_l, N_p)
    std::vector<float> grad_output;         // (B, N_q, N_h * C_h)
    // pixel_centres / gate_boundary: coordinates aimed at an exact pixel
    // coordinate that some float reaches, and how many hit it exactly.
    std::int64_t exact_attempts = 0, exact_hits = 0;

    explicit ProblemData(const ProblemSpec &problem) : spec(problem) {
        Random random(spec.seed);
        const std::int64_t rows = spec.value_length();
        value = random.uniform_vector(spec.batch * rows * spec.heads * spec.channels, -1.0f, 1.0f);
        attention_weights = random.uniform_vector(spec.samples(), -0.5f, 1.0f);
        grad_output =
            random.uniform_vector(spec.batch * spec.queries * spec.heads * spec.channels, -1.0f, 1.0f);
        sampling_locations.resize(spec.samples() * 2);
        const std::int64_t levels = static_cast<std::int64_t>(spec.levels.size());
        for (std::int64_t sample = 0; sample < spec.samples(); sample++) {
            const auto &level = spec.levels[(sample / spec.points) % levels];
            float &x = sampling_locations[2 * sample];
            float &y = sampling_locations[2 * sample + 1];
            draw_location(random, level, x, y);
        }
        value = stored(std::move(value), spec.dtype);
        attention_weights = stored(std::move(attention_weights), spec.dtype);
        grad_output = stored(std::move(grad_output), spec.dtype);
        sampling_locations = stored(std::move(sampling_locations), spec.locations_dtype);
    }

    msda::reference::Problem reference_problem() const {
        msda::reference::Problem problem;
        problem.batch = spec.batch;
        problem.queries = spec.queries;
        problem.heads = spec.heads;
        problem.channels = spec.channels;
        problem.points = spec.points;
        problem.levels = spec.levels;
        problem.value.assign(value.begin(), value.end());
        problem.sampling_locations.assign(sampling_locations.begin(), sampling_locations.end());
        problem.attention_weights.assign(attention_weights.begin(), attention_weights.end());
        problem.align_corners = spec.options.align_corners;
        problem.border = spec.options.padding_mode == msda::PaddingMode::border;
        return problem;
    }

    std::vector<double> grad_output_double() const {
        return std::vector<double>(grad_output.begin(), grad_output.end());
    }

private:
    void draw_location(Random &random, const msda::reference::Level &level, float &x, float &y) {
        const bool align = spec.options.align_corners;
        switch (spec.locations) {
            case Locations::inside:
                x = random.uniform(0.0f, 1.0f);
                y = random.uniform(0.0f, 1.0f);
                return;
            case Locations::outside:
                x = random.uniform(-0.3f, 1.3f);
                y = random.uniform(-0.3f, 1.3f);
                return;
            case Locations::pixel_centres: {
                bool exact_x = false, exact_y = false;
                x = location_for_pixel(static_cast<double>(random.integer(0, level.width - 1)), level.width,
                                       align, &exact_x);
                y = location_for_pixel(static_cast<double>(random.integer(0, level.height - 1)), level.height,
                                       align, &exact_y);
                exact_attempts += 2;
                exact_hits += exact_x + exact_y;
                return;
            }
            case Locations::gate_boundary: {
                // One axis on (or a float step inside) the gate, the other anywhere.
                const bool on_x = random.integer(0, 1) == 1;
                const auto size = on_x ? level.width : level.height;
                const bool low = random.integer(0, 1) == 1;
                bool exact = false;
                float edge = location_for_pixel(low ? -1.0 : static_cast<double>(size), size, align, &exact);
                // With align_corners a size-1 axis maps every location to 0.
                if (!(align && size == 1)) {
                    exact_attempts += 1;
                    exact_hits += exact;
                }
                if (random.integer(0, 3) == 0) {  // just inside the gate
                    edge = std::nextafter(edge, 0.5f);
                }
                const float other = random.uniform(-0.1f, 1.1f);
                x = on_x ? edge : other;
                y = on_x ? other : edge;
                return;
            }
            case Locations::non_finite: {
                x = random.uniform(0.0f, 1.0f);
                y = random.uniform(0.0f, 1.0f);
                const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                          std::numeric_limits<float>::infinity(),
                                          -std::numeric_limits<float>::infinity()};
                switch (random.integer(0, 5)) {
                    case 0:
                        x = specials[random.integer(0, 2)];
                        break;
                    case 1:
                        y = specials[random.integer(0, 2)];
                        break;
                    case 2:
                        x = specials[random.integer(0, 2)];
                        y = specials[random.integer(0, 2)];
                        break;
                    default:
                        break;  // half of the samples stay finite
                }
                return;
            }
            case Locations::far_outside: {
                // Coordinates whose pixel coordinate overflows int32 or float.
                const float far[] = {3e9f,
                                     -3e9f,
                                     1e30f,
                                     -1e30f,
                                     std::numeric_limits<float>::max(),
                                     -std::numeric_limits<float>::max(),
                                     1e5f,
                                     -1e5f};
                x = random.integer(0, 1) ? far[random.integer(0, 7)] : random.uniform(-0.3f, 1.3f);
                y = random.integer(0, 1) ? far[random.integer(0, 7)] : random.uniform(-0.3f, 1.3f);
                return;
            }
        }
    }
};

// ----------------------------------------------------------------------------
// The library's tensors for one problem, in the problem's layouts. Outputs
// start filled with kSentinel; the gaps and guard bands of inputs hold
// kPoison.

struct LibraryTensors {
    StridedTensor value, sampling_locations, attention_weights, output, grad_output;
    StridedTensor grad_value, grad_sampling_locations, grad_attention_weights;
    std::vector<std::int32_t> shapes32, starts32;
    std::vector<std::int64_t> shapes64, starts64;
    msda::DType shapes_dtype = msda::DType::i32, start_dtype = msda::DType::i32;
    std::int64_t levels = 0;

    explicit LibraryTensors(const ProblemData &data) {
        const ProblemSpec &s = data.spec;
        const std::int64_t n_l = static_cast<std::int64_t>(s.levels.size());
        const std::int64_t pad = s.padding;
        const std::int64_t inner = s.per_sample_innermost_stride;
        const auto value_layout = value_order(s.options.value_layout);
        const auto locations_layout = locations_order(s.options.locations_layout);
        const msda::DType dtype = s.dtype, locations_dtype = s.locations_dtype;
        value = StridedTensor({s.batch, s.value_length(), s.heads, s.channels}, value_layout, pad, 1, kPoison,
                              dtype);
        const int location_block = s.dense_sample_blocks ? 3 : 1, weight_block = s.dense_sample_blocks ? 2 : 1;
        sampling_locations = StridedTensor({s.batch, s.queries, s.heads, n_l, s.points, 2}, locations_layout,
                                           pad, inner, kPoison, locations_dtype, location_block);
        attention_weights = StridedTensor({s.batch, s.queries, s.heads, n_l, s.points}, {}, pad, inner, kPoison,
                                          dtype, weight_block);
        output = StridedTensor({s.batch, s.queries, s.heads * s.channels}, {}, pad, 1, kSentinel, dtype);
        grad_output =
            StridedTensor({s.batch, s.queries, s.heads * s.channels}, {}, pad, 1, kPoison, dtype);
        grad_value = StridedTensor({s.batch, s.value_length(), s.heads, s.channels}, value_layout, pad, 1,
                                   kSentinel, dtype);
        grad_sampling_locations = StridedTensor({s.batch, s.queries, s.heads, n_l, s.points, 2}, locations_layout,
                                                pad, inner, kSentinel, locations_dtype, location_block);
        grad_attention_weights = StridedTensor({s.batch, s.queries, s.heads, n_l, s.points}, {}, pad, inner,
                                               kSentinel, dtype, weight_block);

        value.set_canonical(data.value);
        sampling_locations.set_canonical(data.sampling_locations);
        attention_weights.set_canonical(data.attention_weights);
        grad_output.set_canonical(data.grad_output);

        levels = n_l;
        shapes_dtype = s.shapes_dtype;
        start_dtype = s.start_dtype;
        std::int64_t start = 0;
        for (const auto &level : s.levels) {
            shapes32.push_back(static_cast<std::int32_t>(level.height));
            shapes32.push_back(static_cast<std::int32_t>(level.width));
            shapes64.push_back(level.height);
            shapes64.push_back(level.width);
            starts32.push_back(static_cast<std::int32_t>(start));
            starts64.push_back(start);
            start += level.height * level.width;
        }
    }

    msda::TensorView spatial_shapes() const {
        const void *data = shapes_dtype == msda::DType::i64 ? static_cast<const void *>(shapes64.data())
                                                            : static_cast<const void *>(shapes32.data());
        return msda::TensorView::contiguous(data, shapes_dtype, {levels, 2});
    }
    msda::TensorView level_start_index() const {
        const void *data = start_dtype == msda::DType::i64 ? static_cast<const void *>(starts64.data())
                                                           : static_cast<const void *>(starts32.data());
        return msda::TensorView::contiguous(data, start_dtype, {levels});
    }

    msda::ForwardArgs forward_args() const {
        msda::ForwardArgs args;
        args.value = value.view();
        args.spatial_shapes = spatial_shapes();
        args.level_start_index = level_start_index();
        args.sampling_locations = sampling_locations.view();
        args.attention_weights = attention_weights.view();
        args.output = output.view();
        return args;
    }

    msda::BackwardArgs backward_args() const {
        msda::BackwardArgs args;
        args.value = value.view();
        args.spatial_shapes = spatial_shapes();
        args.level_start_index = level_start_index();
        args.sampling_locations = sampling_locations.view();
        args.attention_weights = attention_weights.view();
        args.grad_output = grad_output.view();
        args.grad_value = grad_value.view();
        args.grad_sampling_locations = grad_sampling_locations.view();
        args.grad_attention_weights = grad_attention_weights.view();
        return args;
    }

    void fill_outputs(float value_to_fill) {
        output.fill(value_to_fill);
        grad_value.fill(value_to_fill);
        grad_sampling_locations.fill(value_to_fill);
        grad_attention_weights.fill(value_to_fill);
    }
};

// ----------------------------------------------------------------------------
// SPEC's f32 rule: max |actual - expected| <= 1e-5 * max |expected|. A
// reference that is all zeros must be matched within 1e-6. Any non-finite
// actual element fails (the reference never produces one for finite values).

// `floor`: an absolute error always allowed, for a storage dtype that cannot
// hold values as small as the tensor's to the relative tolerance (float16
// below 2^-14 has a fixed spacing of 2^-24).
inline ::testing::AssertionResult matches_reference(const std::string &name, const std::vector<float> &actual,
                                                    const std::vector<double> &expected,
                                                    double relative_tolerance = 1e-5, double floor = 0.0) {
    if (actual.size() != expected.size()) {
        return ::testing::AssertionFailure()
               << name << ": " << actual.size() << " elements, reference has " << expected.size();
    }
    double largest = 0.0;
    for (double e : expected) {
        if (!std::isfinite(e)) {
            return ::testing::AssertionFailure() << name << ": the reference holds a non-finite value";
        }
        largest = std::max(largest, std::abs(e));
    }
    const double tolerance = std::max(largest > 0.0 ? relative_tolerance * largest : 1e-6, floor);
    double worst = 0.0;
    std::size_t worst_index = 0;
    for (std::size_t i = 0; i < actual.size(); i++) {
        const double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
        if (!(error <= tolerance)) {  // NaN fails too
            if (!(error <= worst)) {
                worst = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
                worst_index = i;
            }
        }
    }
    if (worst > 0.0) {
        return ::testing::AssertionFailure()
               << name << ": max abs error " << worst << " > tolerance " << tolerance
               << " (largest |reference| " << largest << ") at canonical index " << worst_index
               << ": library " << actual[worst_index] << ", reference " << expected[worst_index];
    }
    return ::testing::AssertionSuccess();
}

// Bitwise equality of two buffers (float values, or a tensor's storage
// bytes), naming the first differing element.
template <typename Element>
::testing::AssertionResult bitwise_equal(const std::string &name, const std::vector<Element> &a,
                                         const std::vector<Element> &b) {
    if (a.size() != b.size()) {
        return ::testing::AssertionFailure() << name << ": sizes differ, " << a.size() << " vs " << b.size();
    }
    if (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(Element)) == 0) {
        return ::testing::AssertionSuccess();
    }
    for (std::size_t i = 0; i < a.size(); i++) {
        if (std::memcmp(&a[i], &b[i], sizeof(Element)) != 0) {
            return ::testing::AssertionFailure() << name << ": first difference at storage element " << i << ": "
                                                 << +a[i] << " vs " << +b[i];
        }
    }
    return ::testing::AssertionSuccess();
}

}  // namespace msda::testing
