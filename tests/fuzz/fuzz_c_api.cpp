// libFuzzer target over msda's C API: each input decodes into one call's
// worth of tensors and options (ranks, sizes, strides, layouts, dtypes,
// options, values, level tables), laid out in heap blocks that hold exactly
// what each view reaches, so AddressSanitizer sees any read or write outside
// a tensor. Then forward and, when a gradient is asked for, backward. Every
// call must either
//   - fail with a message ("msda: <tensor>: ...") and leave every output's
//     bytes as they were, or
//   - succeed, leave every byte outside the outputs' elements as it was,
//     and give results within the SPEC's tolerance of the double-precision
//     references (reference/), NaN where they are NaN and the same
//     infinity where they are infinite.
// Anything else aborts (a crash the fuzzer reports), as do sanitizer
// findings. The values come from a palette of ordinary numbers, zeros,
// denormals, NaN, +-Inf and, for locations, 1e30; the inputs' shapes and
// strides are sometimes broken (a rank, an extent, a negative or zero or
// overlapping stride, a level table that disagrees) so validation is
// fuzzed too. Built by the asan tree (CMakePresets.json) with
// -fsanitize=fuzzer,address,undefined; seeds in tests/fuzz_corpus/c_api.
#include <msda/half.hpp>
#include <msda/msda.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gka_reference.h"
#include "msda_reference.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/common_interface_defs.h>
#define MSDA_FUZZ_SANITIZED 1
#endif
#endif

namespace {

// What the input being run decoded into, for a finding's report.
std::string current_call;

[[noreturn]] void bug(const std::string &what) {
    std::fprintf(stderr, "fuzz_c_api: %s\n", what.c_str());
    if (std::getenv("MSDA_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", current_call.c_str());
    std::fflush(stderr);
    std::abort();
}

// A number as the verbose report prints it.
std::string number(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", v);
    return text;
}

// The input, read front to back; past its end every read is 0.
class Input {
public:
    Input(const std::uint8_t *data, std::size_t size) : data_(data), size_(size) {}
    std::uint8_t byte() { return position_ < size_ ? data_[position_++] : 0; }
    std::uint32_t word() {
        std::uint32_t w = 0;
        for (int i = 0; i < 4; ++i) w = (w << 8) | byte();
        return w;
    }
    int pick(int n) { return static_cast<int>(byte() % n); }
    bool chance(int one_in) { return byte() % one_in == 0; }

private:
    const std::uint8_t *data_;
    std::size_t size_, position_ = 0;
};

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// What a float tensor holds, for the palette.
enum class Role { value, weights, grad_output, locations };

// A stored value. The huge ones (1e15) are value's only, so that no product
// the operators form (at most grad_output * weight * value * a level's
// size) leaves float32's range where float64's reference stays finite.
float palette(Input &in, Role role) {
    const bool location = role == Role::locations;
    switch (in.pick(16)) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return kNaN;
    case 3: return in.chance(2) ? kInf : -kInf;
    case 4: return 1e-40f;  // denormal
    case 5:
        if (location) return in.chance(2) ? 1e30f : -1e30f;
        return role == Role::value ? (in.chance(2) ? 1e15f : -1e15f) : 1e3f;
    case 6: return location ? 0.5f : -1e-20f;
    default: break;
    }
    const float unit = static_cast<float>(in.word() % 20001) / 10000.0f - 1.0f;  // [-1, 1]
    return location ? unit * 0.75f + 0.5f : unit;                                 // locations mostly in [-0.25, 1.25]
}

std::size_t dtype_bytes(msda_dtype dtype) {
    return dtype == MSDA_F16 || dtype == MSDA_BF16 ? 2 : dtype == MSDA_F64 || dtype == MSDA_I64 ? 8 : 4;
}

// One tensor: its view, and the heap block that holds exactly what the view
// reaches (so any access outside it is a sanitizer finding).
struct Tensor {
    msda_tensor view{};
    std::unique_ptr<std::uint8_t[]> block;
    std::size_t bytes = 0;
    std::int64_t low = 0;  // the lowest element offset the strides reach
    std::vector<std::uint8_t> before;  // the block as it was before the calls
    std::vector<std::int64_t> shape;   // the view's extents, in the layout's order
    std::vector<int> order;            // the dimensions from outermost to innermost in memory

    std::uint8_t *element(std::int64_t offset) const {
        return block.get() + (offset - low) * static_cast<std::int64_t>(dtype_bytes(view.dtype));
    }
};

constexpr std::int64_t kMaxBytes = std::int64_t{1} << 22;

// The view's element offset of an index.
std::int64_t offset_of(const Tensor &t, const std::vector<std::int64_t> &index) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < t.shape.size(); ++d) offset += index[d] * t.view.strides[d];
    return offset;
}

// Calls `visit(index, element offset)` for every element, in row-major order
// of the view's dimensions.
template <class Visit>
void for_each_element(const Tensor &t, Visit visit) {
    std::vector<std::int64_t> index(t.shape.size(), 0);
    std::int64_t count = 1;
    for (std::int64_t e : t.shape) count *= e;
    for (std::int64_t n = 0; n < count; ++n) {
        visit(index, offset_of(t, index));
        for (int d = static_cast<int>(index.size()) - 1; d >= 0 && ++index[d] == t.shape[d]; --d) index[d] = 0;
    }
}

// Lays out a tensor of `shape` with its dimensions in memory in `order`:
// dense, padded, broadcast (stride 0) or flipped (negative stride) by the
// input's choice, in a block of exactly its reach. False when it would be
// too large to hold.
bool lay_out(Tensor &t, Input &in, msda_dtype dtype, const std::vector<std::int64_t> &shape,
             const std::vector<int> &order, bool output) {
    t.shape = shape;
    t.order = order;
    t.view.dtype = dtype;
    t.view.rank = static_cast<int>(shape.size());
    t.view.device_type = MSDA_DEVICE_TYPE_CPU;
    const int style = in.pick(8);  // 0-4 dense, 5 padded, 6 a broadcast input, 7 a flipped dimension
    // The view's dimensions are the layout's; their strides follow `order`
    // in memory (a permutation of the outer dimensions, or none).
    std::int64_t stride = 1;
    for (int k = t.view.rank - 1; k >= 0; --k) {
        const int d = order[k];
        t.view.shape[d] = shape[d];
        t.view.strides[d] = stride;
        stride *= std::max<std::int64_t>(t.view.shape[d], 1) + (style == 5 && k < t.view.rank - 1 ? 1 : 0);
    }
    if (style == 6 && !output && t.view.rank > 0) t.view.strides[0] = 0;
    if (style == 7 && t.view.rank > 1) {
        const int d = in.pick(t.view.rank - 1);  // not the innermost: channels stay dense
        t.view.strides[d] = -t.view.strides[d];
    }
    std::int64_t high = 0, low = 0;
    bool empty = false;
    for (int d = 0; d < t.view.rank; ++d) {
        empty = empty || t.view.shape[d] == 0;
        const std::int64_t reach = (t.view.shape[d] - 1) * t.view.strides[d];
        (reach < 0 ? low : high) += reach;
    }
    t.low = empty ? 0 : low;
    const std::int64_t elements = empty ? 1 : high - low + 1;
    t.bytes = static_cast<std::size_t>(elements) * dtype_bytes(dtype);
    if (static_cast<std::int64_t>(t.bytes) > kMaxBytes) return false;
    t.block.reset(new std::uint8_t[t.bytes]);
    std::memset(t.block.get(), output ? 0x5A : 0x7F, t.bytes);  // 0x7F7F...: a NaN-like filler
    t.view.data = t.block.get() + (empty ? 0 : -low * static_cast<std::int64_t>(dtype_bytes(dtype)));
    if (empty && in.chance(2)) t.view.data = nullptr;
    return true;
}

// Stores float `x` in the tensor's dtype at an element; returns the stored
// value as a double (what the reference sees).
double store(const Tensor &t, std::int64_t offset, float x) {
    std::uint8_t *at = t.element(offset);
    switch (t.view.dtype) {
    case MSDA_F16: {
        const std::uint16_t h = msda::float_to_f16(x);
        std::memcpy(at, &h, 2);
        return msda::f16_to_float(h);
    }
    case MSDA_BF16: {
        const std::uint16_t h = msda::float_to_bf16(x);
        std::memcpy(at, &h, 2);
        return msda::bf16_to_float(h);
    }
    case MSDA_F64: {
        const double d = x;
        std::memcpy(at, &d, 8);
        return d;
    }
    default: std::memcpy(at, &x, 4); return x;
    }
}

double load(const Tensor &t, std::int64_t offset) {
    const std::uint8_t *at = t.element(offset);
    std::uint16_t h;
    float f;
    switch (t.view.dtype) {
    case MSDA_F16: std::memcpy(&h, at, 2); return msda::f16_to_float(h);
    case MSDA_BF16: std::memcpy(&h, at, 2); return msda::bf16_to_float(h);
    case MSDA_F64: {
        double d;
        std::memcpy(&d, at, 8);
        return d;
    }
    default: std::memcpy(&f, at, 4); return f;
    }
}

// A level table's element (a float32 table, refused, as its value).
std::int64_t load_index(const Tensor &t, std::int64_t offset) {
    if (t.view.dtype == MSDA_I64) {
        std::int64_t v;
        std::memcpy(&v, t.element(offset), 8);
        return v;
    }
    if (t.view.dtype == MSDA_I32) {
        std::int32_t v;
        std::memcpy(&v, t.element(offset), 4);
        return v;
    }
    float f;
    std::memcpy(&f, t.element(offset), 4);
    return static_cast<std::int64_t>(f);
}

void store_index(const Tensor &t, std::int64_t offset, std::int64_t v) {
    if (t.view.dtype == MSDA_I64) {
        std::memcpy(t.element(offset), &v, 8);
    } else if (t.view.dtype == MSDA_I32) {
        const std::int32_t narrow = static_cast<std::int32_t>(v);
        std::memcpy(t.element(offset), &narrow, 4);
    } else {
        const float f = static_cast<float>(v);
        std::memcpy(t.element(offset), &f, 4);
    }
}

// Fills a float input from the palette, in canonical order; the stored
// values, canonical, go to `values`.
void fill(const Tensor &t, Input &in, Role role, std::vector<double> &values) {
    std::int64_t count = 1;
    for (std::int64_t e : t.shape) count *= e;
    values.assign(static_cast<std::size_t>(count), 0.0);
    std::size_t n = 0;
    for_each_element(t, [&](const std::vector<std::int64_t> &, std::int64_t offset) {
        values[n++] = store(t, offset, palette(in, role));
    });
    // A broadcast dimension stores several canonical elements in one place:
    // the last written wins, so read them back.
    n = 0;
    for_each_element(t, [&](const std::vector<std::int64_t> &, std::int64_t offset) { values[n++] = load(t, offset); });
}

double largest_finite(msda_dtype dtype) {
    return dtype == MSDA_F16    ? 65504.0
           : dtype == MSDA_BF16 ? 3.3895313892515355e38
           : dtype == MSDA_F64  ? std::numeric_limits<double>::max()
                                : 3.4028234663852886e38;
}

// Results within tolerance of the reference (SPEC.md's precision): NaN
// where it is NaN, the same infinity where it is infinite, within
// `tolerance` of the tensor's largest finite magnitude elsewhere, plus
// absolute_slack: float32 keeps a product below its normal range (a
// denormal weight times a corner weight) to 2^-149 absolute, not 24 bits,
// and such a product times a value of 1e15 is off by up to 1e-30 per
// term, where float64 is exact. A result at the
// edge of the storage type's range may round to the infinity of its sign.
//
// inf_may_be_nan: value, attention_weights or grad_output hold an infinity,
// so where the reference's result is infinite the library's may be NaN
// (never finite, never the other infinity). The library folds an attention
// weight into the four corner weights before summing over the channels,
// a * S = sum_i (a w_i) V_i, so an infinite weight meets corners of opposite
// signs (or a corner weight of 0) as Inf - Inf or 0 * Inf where the
// reference's a * S is an infinity; and a product float32 flushes to 0
// where float64 keeps it (a tiny weight times a corner weight) may meet an
// infinity as 0 * Inf. README, Semantics.
double absolute_slack = 0;

//
// magnitude: per element, the sum of the magnitudes of the terms its result
// sums (the references on |value|, |weights|, |grad_output|), which bounds
// the float32 sum's rounding error where terms cancel (1e15 - 1e15 leaves
// what float64 happens to keep); the tolerance is relative to the larger of
// it and the tensor's largest result.
//
// An infinite result's sign is the sign of the finite factor the infinity
// meets, and where that factor is within the tolerance of 0 (relative to
// the magnitudes it sums) the storage type's arithmetic cannot know its
// sign: such a result may be either infinity (README, Semantics). The
// harness finds the factor from the references on stand-in inputs, each
// infinity replaced by 2^300 of its sign (every finite term is then
// negligible beside the terms the infinities are in): `stand_in` (with its
// magnitudes) is what those give, empty where no input is infinite.
struct StandIn {
    std::vector<double> result, magnitude;
};

// Half the smallest spacing of a dtype (that of its subnormals): a result
// rounded once to nearest is at most this far from the exact one wherever
// it lies below the dtype's normal range, however small the tensor's
// largest magnitude is. The fuzzer found a float16 grad_value whose
// elements were all subnormal (largest 3.9e-6, spacing 2^-24): correctly
// rounded, 2.2e-8 from the reference, more than 5e-3 of 3.9e-6.
double rounding_floor(msda_dtype dtype) {
    return std::ldexp(1.0, dtype == MSDA_F16    ? -25
                           : dtype == MSDA_BF16 ? -134
                           : dtype == MSDA_F64  ? -1075
                                                : -150);
}

void check_close(const char *name, const Tensor &t, const std::vector<double> &expected, double tolerance,
                 bool inf_may_be_nan, const std::vector<double> &magnitude, const StandIn &stand_in) {
    double largest = 0;
    for (double x : expected) {
        if (std::isfinite(x)) largest = std::max(largest, std::abs(x));
    }
    const double edge = largest_finite(t.view.dtype) * (1 - tolerance);
    const double slack = absolute_slack + rounding_floor(t.view.dtype);
    std::size_t n = 0;
    for_each_element(t, [&](const std::vector<std::int64_t> &, std::int64_t offset) {
        const double m = magnitude[n];
        const double scale = std::isfinite(m) ? std::max(largest, m) : largest;
        const bool sign_unknown = !stand_in.result.empty() &&
                                  std::abs(stand_in.result[n]) <= tolerance * stand_in.magnitude[n];
        const double want = expected[n++], got = load(t, offset);
        const bool ok = std::isnan(want) ? std::isnan(got)
                        : std::isinf(want)
                            ? got == want || (inf_may_be_nan && std::isnan(got)) || (std::isinf(got) && sign_unknown)
                        : std::isinf(got) && std::abs(want) > edge ? (got > 0) == (want > 0)
                                                                   : std::abs(got - want) <= tolerance * scale + slack;
        if (!ok) {
            std::string all;
            std::size_t k = 0;
            for_each_element(t, [&](const std::vector<std::int64_t> &, std::int64_t at) {
                all += " " + number(load(t, at)) + "/" + number(expected[k++]);
            });
            current_call += std::string("\n") + name + " (got/reference):" + all;
            bug(std::string(name) + ": element " + std::to_string(n - 1) + " is " + std::to_string(got) +
                ", the reference " + std::to_string(want) + " (largest " + std::to_string(largest) + ")");
        }
    });
}

// The bytes of a tensor's block that are not its elements are as they were.
void check_gaps(const char *name, const Tensor &t) {
    std::vector<bool> is_element(t.bytes, false);
    const std::size_t size = dtype_bytes(t.view.dtype);
    for_each_element(t, [&](const std::vector<std::int64_t> &, std::int64_t offset) {
        const std::size_t at = static_cast<std::size_t>(offset - t.low) * size;
        for (std::size_t b = 0; b < size; ++b) is_element[at + b] = true;
    });
    for (std::size_t b = 0; b < t.bytes; ++b) {
        if (!is_element[b] && t.block[b] != t.before[b]) bug(std::string(name) + ": a byte outside it was written");
    }
}

struct Call {
    msda_options options = msda_default_options();
    std::int64_t batch, queries, heads, channels, points;
    std::vector<msda::reference::Level> levels;
    Tensor value, shapes, starts, locations, weights, output, grad_output, grad_value, grad_locations, grad_weights;
    std::vector<double> value_data, location_data, weight_data, grad_output_data;

    std::int64_t length() const {
        std::int64_t total = 0;
        for (const auto &l : levels) total += l.height * l.width;
        return total;
    }
};

// Between the reference's canonical orders and the call's layouts, either
// way (Direction): value is (B, L, N_h, C_h), BNLC holds (B, N_h, L, C_h);
// locations are (B, N_q, N_h, N_l, N_p, 2), B2QHLP holds (B, 2, N_q, ...).
enum class Direction { to_canonical, to_layout };

std::vector<double> relaid_value(const Call &c, const std::vector<double> &data, Direction direction) {
    if (c.options.value_layout == MSDA_BLNC) return data;
    std::vector<double> out(data.size());
    const std::int64_t L = c.length();
    for (std::int64_t b = 0; b < c.batch; ++b)
        for (std::int64_t h = 0; h < c.heads; ++h)
            for (std::int64_t r = 0; r < L; ++r)
                for (std::int64_t ch = 0; ch < c.channels; ++ch) {
                    const std::int64_t canonical = ((b * L + r) * c.heads + h) * c.channels + ch;
                    const std::int64_t laid_out = ((b * c.heads + h) * L + r) * c.channels + ch;
                    if (direction == Direction::to_canonical) out[canonical] = data[laid_out];
                    else out[laid_out] = data[canonical];
                }
    return out;
}

std::vector<double> relaid_locations(const Call &c, const std::vector<double> &data, Direction direction) {
    if (c.options.locations_layout == MSDA_BQHLP2) return data;
    std::vector<double> out(data.size());
    const std::int64_t samples = c.queries * c.heads * static_cast<std::int64_t>(c.levels.size()) * c.points;
    for (std::int64_t b = 0; b < c.batch; ++b)
        for (std::int64_t s = 0; s < samples; ++s)
            for (int k = 0; k < 2; ++k) {
                const std::int64_t canonical = (b * samples + s) * 2 + k, laid_out = (b * 2 + k) * samples + s;
                if (direction == Direction::to_canonical) out[canonical] = data[laid_out];
                else out[laid_out] = data[canonical];
            }
    return out;
}

// A bound on each location gradient's terms (canonical layout): a sample's
// d/dx sums, over the channels, |a| |g_c| times two differences of corner
// values weighted (1 - fy) and fy, times the level's scale (W or W - 1):
// at most |a| * sum |g_c| * 2 * max |V| over its level and head * max(H, W).
std::vector<double> location_gradient_magnitude(const Call &c, const msda::reference::Problem &magnitudes,
                                                const std::vector<double> &grad_output_magnitude) {
    const std::int64_t N_l = static_cast<std::int64_t>(c.levels.size()), L = c.length();
    std::vector<double> out(static_cast<std::size_t>(c.batch * c.queries * c.heads * N_l * c.points * 2), 0.0);
    std::size_t n = 0;
    for (std::int64_t b = 0; b < c.batch; ++b) {
        for (std::int64_t q = 0; q < c.queries; ++q) {
            for (std::int64_t h = 0; h < c.heads; ++h) {
                double g = 0;
                for (std::int64_t ch = 0; ch < c.channels; ++ch) {
                    g += grad_output_magnitude[static_cast<std::size_t>((b * c.queries + q) * c.heads * c.channels +
                                                                        h * c.channels + ch)];
                }
                std::int64_t start = 0;
                for (std::int64_t l = 0; l < N_l; ++l) {
                    const std::int64_t rows = c.levels[l].height * c.levels[l].width;
                    double v = 0;
                    for (std::int64_t r = start; r < start + rows && r < L; ++r) {
                        for (std::int64_t ch = 0; ch < c.channels; ++ch) {
                            const double x = magnitudes.value[static_cast<std::size_t>(
                                ((b * L + r) * c.heads + h) * c.channels + ch)];
                            if (std::isfinite(x)) v = std::max(v, x);
                        }
                    }
                    start += rows;
                    const double size = static_cast<double>(std::max(c.levels[l].height, c.levels[l].width));
                    for (std::int64_t pt = 0; pt < c.points; ++pt, n += 2) {
                        const double a = magnitudes.attention_weights[n / 2];
                        out[n] = out[n + 1] = a * g * 2 * v * size;
                    }
                }
            }
        }
    }
    return out;
}

// float64 computes in float64: far tighter than float32's 1e-5.
double tolerance_of(msda_dtype dtype) {
    return dtype == MSDA_F16 ? 5e-3 : dtype == MSDA_BF16 ? 2e-2 : dtype == MSDA_F64 ? 1e-9 : 1e-5;
}

msda_dtype storage_dtype(Input &in) {
    switch (in.pick(16)) {
    case 0: return MSDA_F64;  // with float64 locations only
    case 1: return MSDA_I32;  // refused
    case 2:
    case 3:
    case 4: return MSDA_F16;
    case 5:
    case 6:
    case 7: return MSDA_BF16;
    default: return MSDA_F32;
    }
}

std::string list(const std::vector<double> &values) {
    std::string out;
    for (double v : values) out += (out.empty() ? "" : " ") + number(v);
    return out;
}

std::string view_text(const Tensor &t) {
    std::string out = "dtype " + std::to_string(static_cast<int>(t.view.dtype)) + " shape";
    for (int d = 0; d < static_cast<int>(t.order.size()); ++d) out += " " + std::to_string(t.view.shape[d]);
    out += " strides";
    for (int d = 0; d < static_cast<int>(t.order.size()); ++d) out += " " + std::to_string(t.view.strides[d]);
    return out;
}

// The decoded call, as MSDA_FUZZ_VERBOSE prints it with a finding: sizes,
// options, views, and the stored values in canonical order.
std::string describe(const Call &c) {
    const msda_options &o = c.options;
    std::string out = "B " + std::to_string(c.batch) + " N_q " + std::to_string(c.queries) + " N_h " +
                      std::to_string(c.heads) + " C_h " + std::to_string(c.channels) + " N_p " +
                      std::to_string(c.points) + " levels";
    for (const auto &l : c.levels) out += " " + std::to_string(l.height) + "x" + std::to_string(l.width);
    out += "\nop " + std::to_string(static_cast<int>(o.op)) + " rounding " + std::to_string(static_cast<int>(o.rounding)) +
           " value_layout " + std::to_string(static_cast<int>(o.value_layout)) + " locations_layout " +
           std::to_string(static_cast<int>(o.locations_layout)) + " align_corners " + std::to_string(o.align_corners) +
           " padding " + std::to_string(static_cast<int>(o.padding_mode)) + " relayout " +
           std::to_string(static_cast<int>(o.relayout)) + " order " + std::to_string(static_cast<int>(o.sample_order)) +
           " grads " + std::to_string(o.grad_value) + std::to_string(o.grad_sampling_locations) +
           std::to_string(o.grad_attention_weights);
    // The level tables as stored (they may disagree with the levels above).
    auto index_at = [](const Tensor &t, std::int64_t offset) { return std::to_string(load_index(t, offset)); };
    out += "\nspatial_shapes " + view_text(c.shapes) + ":";
    for (std::size_t l = 0; l < c.levels.size(); ++l) {
        const std::int64_t row = static_cast<std::int64_t>(l) * c.shapes.view.strides[0];
        out += " " + index_at(c.shapes, row) + "x" + index_at(c.shapes, row + c.shapes.view.strides[1]);
    }
    out += "\nlevel_start_index " + view_text(c.starts) + ":";
    for (std::size_t l = 0; l < c.levels.size(); ++l) {
        out += " " + index_at(c.starts, static_cast<std::int64_t>(l) * c.starts.view.strides[0]);
    }
    out += "\nvalue " + view_text(c.value) + ": " + list(c.value_data);
    out += "\nsampling_locations " + view_text(c.locations) + ": " + list(c.location_data);
    out += "\nattention_weights " + view_text(c.weights) + ": " + list(c.weight_data);
    out += "\ngrad_output " + view_text(c.grad_output) + ": " + list(c.grad_output_data);
    out += "\noutput " + view_text(c.output) + "\ngrad_value " + view_text(c.grad_value) +
           "\ngrad_sampling_locations " + view_text(c.grad_locations) + "\ngrad_attention_weights " +
           view_text(c.grad_weights);
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    static const bool once = [] {
        msda_set_num_threads(1);
#ifdef MSDA_FUZZ_SANITIZED
        // A sanitizer's finding (or a signal it catches) reports the call
        // too, not only the harness's own checks.
        if (std::getenv("MSDA_FUZZ_VERBOSE") != nullptr) {
            __sanitizer_set_death_callback([] { std::fprintf(stderr, "the call:\n%s\n", current_call.c_str()); });
        }
#endif
        return true;
    }();
    (void)once;
    Input in(data, size);
    current_call = "(the input is still being decoded)";
    Call c;
    msda_options &o = c.options;
    o.op = in.chance(4) ? MSDA_OP_GKA : MSDA_OP_MSDA;
    const bool gka = o.op == MSDA_OP_GKA;
    o.rounding = in.chance(2) ? MSDA_ROUNDING_NEAREST : MSDA_ROUNDING_FLOOR;
    o.value_layout = in.chance(2) ? MSDA_BNLC : MSDA_BLNC;
    o.locations_layout = in.chance(2) ? MSDA_B2QHLP : MSDA_BQHLP2;
    o.align_corners = !gka && in.chance(2);
    o.padding_mode = !gka && in.chance(2) ? MSDA_PADDING_BORDER : MSDA_PADDING_ZEROS;
    o.relayout = static_cast<msda_relayout>(in.pick(3));
    o.sample_order = static_cast<msda_sample_order>(in.pick(3));
    o.grad_value = in.pick(4) != 0;
    o.grad_sampling_locations = !gka && in.pick(4) != 0;
    o.grad_attention_weights = in.pick(4) != 0;
    // Codes outside the enums (refused), stored just before the calls: C
    // lets an enum field hold any int, C++ may not read one back.
    const bool bad_padding = in.chance(64), bad_layout = in.chance(64);

    c.batch = in.pick(3);
    c.queries = in.pick(5);
    c.heads = 1 + in.pick(3);
    c.channels = in.chance(4) ? 32 : 1 + in.pick(6);
    c.points = 1 + in.pick(3);
    const int level_count = 1 + in.pick(3);
    for (int l = 0; l < level_count; ++l) c.levels.push_back({1 + in.pick(4), 1 + in.pick(4)});
    if (in.chance(4) && !gka) {  // Deformable DETR's sizes, which have compile-time variants
        c.channels = 32;
        c.points = 4;
        c.levels.assign(4, {2, 3});
    }
    const std::int64_t L = c.length(), N_l = static_cast<std::int64_t>(c.levels.size());
    const msda_dtype storage = storage_dtype(in);
    const msda_dtype locations_dtype = in.chance(4) ? storage : MSDA_F32;
    const msda_dtype table_dtype = in.chance(32) ? MSDA_F32 : in.chance(2) ? MSDA_I64 : MSDA_I32;

    const bool blnc = o.value_layout == MSDA_BLNC, bqhlp2 = o.locations_layout == MSDA_BQHLP2;
    const std::vector<std::int64_t> value_shape = blnc ? std::vector<std::int64_t>{c.batch, L, c.heads, c.channels}
                                                       : std::vector<std::int64_t>{c.batch, c.heads, L, c.channels};
    const std::vector<std::int64_t> sample_shape = {c.batch, c.queries, c.heads, N_l, c.points};
    std::vector<std::int64_t> location_shape =
        bqhlp2 ? std::vector<std::int64_t>{c.batch, c.queries, c.heads, N_l, c.points, 2}
               : std::vector<std::int64_t>{c.batch, 2, c.queries, c.heads, N_l, c.points};
    const std::vector<std::int64_t> output_shape = {c.batch, c.queries, c.heads * c.channels};
    auto identity = [](int rank) {
        std::vector<int> order(rank);
        for (int d = 0; d < rank; ++d) order[d] = d;
        return order;
    };
    // Inputs may have their outer dimensions in any order; the innermost
    // (value's channels) stays innermost for value and the outputs.
    auto shuffled = [&](int rank, bool keep_innermost) {
        std::vector<int> order = identity(rank);
        if (in.chance(3)) {
            const int movable = keep_innermost ? rank - 1 : rank;
            for (int d = movable - 1; d > 0; --d) std::swap(order[d], order[in.pick(d + 1)]);
        }
        return order;
    };
    // A shape broken on purpose now and then: one extent off by one, or a
    // dimension too many or too few.
    auto maybe_broken = [&](std::vector<std::int64_t> shape) {
        if (!shape.empty() && in.chance(24)) shape[in.pick(static_cast<int>(shape.size()))] += in.chance(2) ? 1 : -1;
        if (in.chance(48)) {
            if ((in.chance(2) || shape.size() < 2) && shape.size() < MSDA_MAX_RANK) {
                shape.push_back(1 + in.pick(2));
            } else {
                shape.pop_back();
            }
        }
        for (std::int64_t &e : shape) e = std::max<std::int64_t>(e, 0);
        return shape;
    };
    const std::vector<std::int64_t> value_given = maybe_broken(value_shape);
    const std::vector<std::int64_t> locations_given = maybe_broken(location_shape);
    std::vector<std::int64_t> weights_given = maybe_broken(sample_shape);
    // Not both sampling_locations and attention_weights: broken alike they
    // agree with each other, and a call takes N_p from them alone (N_p 5
    // in both where the harness meant 4 is a consistent call of N_p 5).
    if (locations_given != location_shape) weights_given = sample_shape;
    auto rank = [](const std::vector<std::int64_t> &shape) { return static_cast<int>(shape.size()); };
    bool fits = lay_out(c.value, in, storage, value_given, shuffled(rank(value_given), true), false) &&
                lay_out(c.shapes, in, table_dtype, {N_l, 2}, identity(2), false) &&
                lay_out(c.starts, in, table_dtype, {N_l}, identity(1), false) &&
                lay_out(c.locations, in, locations_dtype, locations_given, shuffled(rank(locations_given), false),
                        false) &&
                lay_out(c.weights, in, storage, weights_given, shuffled(rank(weights_given), false), false) &&
                lay_out(c.output, in, storage, output_shape, identity(3), true) &&
                lay_out(c.grad_output, in, storage, output_shape, identity(3), false) &&
                lay_out(c.grad_value, in, storage, value_shape, identity(4), true) &&
                lay_out(c.grad_locations, in, locations_dtype, location_shape, identity(6), true) &&
                lay_out(c.grad_weights, in, storage, sample_shape, identity(5), true);
    if (!fits) return 0;
    if (in.chance(32)) c.output.view.strides[1] = 0;  // outputs overlapping themselves: refused

    // The level table, sometimes disagreeing with itself or with value.
    std::int64_t start = 0;
    for (std::int64_t l = 0; l < N_l; ++l) {
        std::int64_t h = c.levels[l].height, w = c.levels[l].width, s = start;
        if (in.chance(48)) h = in.chance(2) ? -h : std::int64_t{1} << (20 + in.pick(40));
        if (in.chance(48)) s += in.chance(2) ? 1 : -1;
        store_index(c.shapes, l * c.shapes.view.strides[0], h);
        store_index(c.shapes, l * c.shapes.view.strides[0] + c.shapes.view.strides[1], w);
        store_index(c.starts, l * c.starts.view.strides[0], s);
        start += c.levels[l].height * c.levels[l].width;
    }
    // What the tables hold decides (a broadcast table's rows are its last
    // one's; an int32 table holds a huge height truncated): broken unless
    // every level is at least 1 x 1, each starts where the last ended, and
    // they fill value's L. Consistent tables are the reference's levels.
    bool table_broken = false;
    std::vector<msda::reference::Level> stored;
    start = 0;
    for (std::int64_t l = 0; l < N_l && !table_broken; ++l) {
        const std::int64_t h = load_index(c.shapes, l * c.shapes.view.strides[0]);
        const std::int64_t w = load_index(c.shapes, l * c.shapes.view.strides[0] + c.shapes.view.strides[1]);
        const std::int64_t s = load_index(c.starts, l * c.starts.view.strides[0]);
        table_broken = h < 1 || w < 1 || h > L || w > L || s != start;
        start += h * w;
        stored.push_back({h, w});
    }
    table_broken = table_broken || start != L;
    if (!table_broken) c.levels = stored;
    fill(c.value, in, Role::value, c.value_data);
    fill(c.locations, in, Role::locations, c.location_data);
    fill(c.weights, in, Role::weights, c.weight_data);
    fill(c.grad_output, in, Role::grad_output, c.grad_output_data);
    // A rank the C API cannot hold, or none: refused before any element is
    // read.
    const Tensor *impossible = nullptr;
    if (in.chance(64)) {
        Tensor *const inputs[] = {&c.value, &c.locations, &c.weights, &c.shapes, &c.grad_output};
        const int ranks[] = {0, -1, MSDA_MAX_RANK + 1, 1000};
        Tensor *t = inputs[in.pick(5)];
        t->view.rank = ranks[in.pick(4)];
        impossible = t;
    }
    for (Tensor *t : {&c.value, &c.shapes, &c.starts, &c.locations, &c.weights, &c.output, &c.grad_output,
                      &c.grad_value, &c.grad_locations, &c.grad_weights}) {
        t->before.assign(t->block.get(), t->block.get() + t->bytes);
    }

    const msda_forward_args forward{c.value.view,     c.shapes.view,  c.starts.view,
                                    c.locations.view, c.weights.view, c.output.view};
    msda_backward_args backward{c.value.view,          c.shapes.view,         c.starts.view,
                                c.locations.view,      c.weights.view,        c.grad_output.view,
                                c.grad_value.view,     c.grad_locations.view, c.grad_weights.view};
    if (!o.grad_value && in.chance(2)) backward.grad_value = {};
    if (!o.grad_sampling_locations && (gka || in.chance(2))) backward.grad_sampling_locations = {};
    if (!o.grad_attention_weights && in.chance(2)) backward.grad_attention_weights = {};

    current_call = describe(c);
    auto store_code = [](auto &field, int code) { std::memcpy(&field, &code, sizeof field); };
    const msda_options valid_options = o;
    if (bad_padding) store_code(o.padding_mode, 5);
    if (bad_layout) store_code(o.value_layout, -1);
    // msda_last_error is the thread's last call's: read after each call.
    const msda_status forward_status = msda_forward(&forward, &o);
    const std::string forward_message = msda_last_error();
    const bool asked = o.grad_value || o.grad_sampling_locations || o.grad_attention_weights;
    const msda_status backward_status = asked ? msda_backward(&backward, &o) : MSDA_OK;
    const std::string backward_message = msda_last_error();
    o = valid_options;
    auto check_refusal = [&](msda_status status, const std::string &message,
                             std::initializer_list<const Tensor *> outputs) {
        if (status == MSDA_OK) return false;
        if (message.rfind("msda: ", 0) != 0 || message.size() < 10) bug("a refusal without a message: " + message);
        for (const Tensor *t : outputs) {
            if (std::memcmp(t->block.get(), t->before.data(), t->bytes) != 0) {
                bug("a refused call wrote an output: " + message);
            }
        }
        return true;
    };
    const bool forward_refused = check_refusal(forward_status, forward_message, {&c.output});
    const bool backward_refused =
        asked && check_refusal(backward_status, backward_message, {&c.grad_value, &c.grad_locations, &c.grad_weights});
    for (const Tensor *t : {&c.value, &c.shapes, &c.starts, &c.locations, &c.weights, &c.grad_output}) {
        if (std::memcmp(t->block.get(), t->before.data(), t->bytes) != 0) bug("an input was written");
    }
    if (forward_refused && (backward_refused || !asked)) return 0;

    // Inputs no call may accept: inconsistent shapes, a level table that
    // disagrees with itself or value, a dtype or option msda does not take.
    const bool inconsistent =
        value_given != value_shape || locations_given != location_shape || weights_given != sample_shape ||
        table_broken || table_dtype == MSDA_F32 || storage == MSDA_I32 ||
        (storage == MSDA_F64 && locations_dtype != MSDA_F64) || bad_padding || bad_layout;
    if (inconsistent) {
        const std::string why = std::string(value_given != value_shape ? " value's shape" : "") +
                                (locations_given != location_shape ? " sampling_locations' shape" : "") +
                                (weights_given != sample_shape ? " attention_weights' shape" : "") +
                                (table_broken ? " the level table" : "") +
                                (table_dtype == MSDA_F32 ? " the level tables' dtype" : "") +
                                (storage == MSDA_I32 ? " the storage dtype" : "") +
                                (storage == MSDA_F64 && locations_dtype != MSDA_F64 ? " float32 locations with float64"
                                                                                     : "") +
                                (bad_padding || bad_layout ? " an option's code" : "");
        if (!forward_refused) bug("a forward with inconsistent inputs ran:" + why);
        if (asked && !backward_refused) bug("a backward with inconsistent inputs ran:" + why);
    }
    if (impossible != nullptr && asked && !backward_refused) bug("a backward with a tensor of rank outside 1-6 ran");
    if (impossible != nullptr && impossible != &c.grad_output && !forward_refused) {
        bug("a forward with a tensor of rank outside 1-6 ran");
    }
    // The call was accepted: the inputs were consistent, and the results
    // must be the references'.
    msda::reference::Problem p;
    p.batch = c.batch, p.queries = c.queries, p.heads = c.heads, p.channels = c.channels, p.points = c.points;
    p.levels = c.levels;
    p.value = relaid_value(c, c.value_data, Direction::to_canonical);
    p.sampling_locations = relaid_locations(c, c.location_data, Direction::to_canonical);
    p.attention_weights = c.weight_data;
    p.align_corners = o.align_corners;
    p.border = o.padding_mode == MSDA_PADDING_BORDER;
    p.float64 = storage == MSDA_F64;  // the pixel transform in double
    const auto rounding = o.rounding == MSDA_ROUNDING_NEAREST ? msda::reference::GkaRounding::nearest
                                                              : msda::reference::GkaRounding::floor;
    const double tolerance = tolerance_of(storage);
    // (An infinite location contributes nothing, so only these count.)
    bool infinite = false;
    for (const std::vector<double> *values : {&c.value_data, &c.weight_data, &c.grad_output_data}) {
        for (double x : *values) infinite = infinite || std::isinf(x);
    }
    const bool inf_may_be_nan = infinite;
    // Each result sums up to 4 N_l N_p terms of (weight x corner weight)
    // times a value and a grad_output element (absolute_slack above).
    auto largest_of = [](const std::vector<double> &values) {
        double m = 1;
        for (double x : values) {
            if (std::isfinite(x)) m = std::max(m, std::abs(x));
        }
        return m;
    };
    absolute_slack = 1e-30 + std::ldexp(1.0, -149) * largest_of(c.value_data) * largest_of(c.grad_output_data) *
                                 largest_of(c.weight_data) * 8.0 * static_cast<double>(N_l * c.points);
    // Every reference the checks need, for one problem: the results, and
    // the results on magnitudes (check_close's `magnitude`).
    struct References {
        std::vector<double> output, output_size, value_grad, value_size, location_grad, location_size, weight_grad,
            weight_size;
    };
    auto references_of = [&](const msda::reference::Problem &problem, const std::vector<double> &grad_output) {
        msda::reference::Problem magnitudes = problem;
        for (double &x : magnitudes.value) x = std::abs(x);
        for (double &x : magnitudes.attention_weights) x = std::abs(x);
        std::vector<double> grad_output_magnitude = grad_output;
        for (double &x : grad_output_magnitude) x = std::abs(x);
        References r;
        if (!forward_refused) {
            r.output = gka ? msda::reference::gka_forward(problem, rounding) : msda::reference::forward(problem);
            r.output_size =
                gka ? msda::reference::gka_forward(magnitudes, rounding) : msda::reference::forward(magnitudes);
        }
        if (asked && !backward_refused) {
            if (gka) {
                const auto g = msda::reference::gka_backward(problem, grad_output, rounding);
                const auto m = msda::reference::gka_backward(magnitudes, grad_output_magnitude, rounding);
                r.value_grad = g.value, r.weight_grad = g.attention_weights;
                r.value_size = m.value, r.weight_size = m.attention_weights;
            } else {
                const auto g = msda::reference::backward(problem, grad_output);
                const auto m = msda::reference::backward(magnitudes, grad_output_magnitude);
                r.value_grad = g.value, r.location_grad = g.sampling_locations, r.weight_grad = g.attention_weights;
                r.value_size = m.value, r.weight_size = m.attention_weights;
                r.location_size = location_gradient_magnitude(c, magnitudes, grad_output_magnitude);
            }
        }
        return r;
    };
    const References want = references_of(p, c.grad_output_data);
    // The stand-in problem (check_close's StandIn): each infinity 2^300 of
    // its sign.
    References stand_in;
    if (infinite) {
        auto stand_in_for = [](std::vector<double> values) {
            for (double &x : values) {
                if (std::isinf(x)) x = std::copysign(std::ldexp(1.0, 300), x);
            }
            return values;
        };
        msda::reference::Problem finite = p;
        finite.value = stand_in_for(p.value);
        finite.attention_weights = stand_in_for(p.attention_weights);
        stand_in = references_of(finite, stand_in_for(c.grad_output_data));
    }
    auto value_layout = [&](const std::vector<double> &canonical) {
        return canonical.empty() ? canonical : relaid_value(c, canonical, Direction::to_layout);
    };
    auto locations_layout = [&](const std::vector<double> &canonical) {
        return canonical.empty() ? canonical : relaid_locations(c, canonical, Direction::to_layout);
    };
    if (!forward_refused) {
        check_close("output", c.output, want.output, tolerance, inf_may_be_nan, want.output_size,
                    {stand_in.output, stand_in.output_size});
        check_gaps("output", c.output);
    }
    if (asked && !backward_refused) {
        if (o.grad_value) {
            check_close("grad_value", c.grad_value, value_layout(want.value_grad), tolerance, inf_may_be_nan,
                        value_layout(want.value_size),
                        {value_layout(stand_in.value_grad), value_layout(stand_in.value_size)});
            check_gaps("grad_value", c.grad_value);
        }
        if (o.grad_sampling_locations) {
            check_close("grad_sampling_locations", c.grad_locations, locations_layout(want.location_grad),
                        tolerance_of(locations_dtype), inf_may_be_nan, locations_layout(want.location_size),
                        {locations_layout(stand_in.location_grad), locations_layout(stand_in.location_size)});
            check_gaps("grad_sampling_locations", c.grad_locations);
        }
        if (o.grad_attention_weights) {
            check_close("grad_attention_weights", c.grad_weights, want.weight_grad, tolerance, inf_may_be_nan,
                        want.weight_size, {stand_in.weight_grad, stand_in.weight_size});
            check_gaps("grad_attention_weights", c.grad_weights);
        }
    }
    return 0;
}
