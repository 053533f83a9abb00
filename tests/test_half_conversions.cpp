// msda/half.hpp, the conversions callers (and these tests) use to fill and
// read half-precision tensors, against independent references: the
// compiler's own _Float16 conversions for float16 (round to nearest even in
// hardware or soft-float), and for bfloat16 a search for the nearest of the
// two neighbouring bfloat16 values in double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "msda/half.hpp"

namespace {

using msda::bf16_to_float;
using msda::f16_to_float;
using msda::float_to_bf16;
using msda::float_to_f16;

// The compiler's IEEE half type: _Float16, or on aarch64 (where g++ 12 has
// no _Float16 in C++) and with clang 14 (the sanitizer trees; no _Float16
// on x86 before clang 15) __fp16, its storage type with the same
// conversions.
#if defined(__aarch64__) || (defined(__clang__) && __clang_major__ < 15)
using Half = __fp16;
#else
using Half = _Float16;
#endif

// The compiler's conversions (no Half in a signature: __fp16 may not be a
// parameter or a result).
std::uint16_t compiler_f16_bits(float f) {
    const Half h = static_cast<Half>(f);
    std::uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
}

float compiler_f16_value(std::uint16_t bits) {
    Half h;
    std::memcpy(&h, &bits, sizeof h);
    return static_cast<float>(h);
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

// Floats that exercise every branch: zeros, subnormals of both formats, the
// float16 overflow edge, ties, infinities, NaNs, and random bit patterns.
std::vector<float> probe_floats() {
    std::vector<float> values = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -1.0f,
                                 65504.0f,
                                 65519.99f,
                                 65520.0f,
                                 -65520.0f,
                                 1e-8f,
                                 5.960464477539063e-8f,   // 2^-24, the smallest float16 subnormal
                                 2.9802322387695312e-8f,  // 2^-25, a tie between 0 and 2^-24
                                 4.470348358154297e-8f,   // 1.5 * 2^-25... rounds up
                                 6.103515625e-5f,         // 2^-14, the smallest float16 normal
                                 1.0009765625f,           // 1 + 2^-10
                                 1.00048828125f,          // 1 + 2^-11, a tie: rounds to even (1)
                                 1.00146484375f,          // 1 + 3 * 2^-11, a tie: rounds to even (1 + 2^-9)
                                 1.00390625f,             // 1 + 2^-8
                                 1.001953125f,            // 1 + 2^-9
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::min(),
                                 std::numeric_limits<float>::max(),
                                 -std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 -std::numeric_limits<float>::quiet_NaN()};
    std::mt19937 engine(5);
    for (int i = 0; i < 2000000; i++) {
        std::uint32_t bits = engine();
        float f;
        std::memcpy(&f, &bits, 4);
        values.push_back(f);
    }
    // Floats near float16's range, where rounding matters most.
    std::uniform_real_distribution<float> near(-70000.0f, 70000.0f);
    for (int i = 0; i < 200000; i++) values.push_back(near(engine));
    std::uniform_real_distribution<float> tiny(-1e-4f, 1e-4f);
    for (int i = 0; i < 200000; i++) values.push_back(tiny(engine));
    return values;
}

TEST(HalfConversions, Float16ToFloatIsExactForEveryPattern) {
    for (std::uint32_t bits = 0; bits <= 0xffff; bits++) {
        const float expected = compiler_f16_value(static_cast<std::uint16_t>(bits));
        ASSERT_TRUE(same_float(f16_to_float(static_cast<std::uint16_t>(bits)), expected)) << std::hex << bits;
    }
}

TEST(HalfConversions, FloatToFloat16RoundsToNearestEven) {
    for (float f : probe_floats()) {
        const std::uint16_t expected = compiler_f16_bits(f);
        const std::uint16_t actual = float_to_f16(f);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(f16_to_float(actual))) << f;
            ASSERT_EQ(actual & 0x8000, expected & 0x8000) << "sign of a NaN";
            continue;
        }
        ASSERT_EQ(actual, expected) << "float " << f << " (bits " << std::hex << msda::float_bits(f) << ")";
    }
}

TEST(HalfConversions, Bfloat16RoundTripsEveryPattern) {
    for (std::uint32_t bits = 0; bits <= 0xffff; bits++) {
        const float f = bf16_to_float(static_cast<std::uint16_t>(bits));
        EXPECT_EQ(msda::float_bits(f), bits << 16);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << std::hex << bits;
        } else {
            ASSERT_EQ(float_to_bf16(f), bits) << std::hex << bits;
        }
    }
}

TEST(HalfConversions, FloatToBfloat16RoundsToNearestEven) {
    for (float f : probe_floats()) {
        const std::uint16_t actual = float_to_bf16(f);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(bf16_to_float(actual))) << f;
            continue;
        }
        // The two bfloat16 values around f: truncation, and the next one
        // away from zero (which may be Inf).
        const std::uint16_t down = static_cast<std::uint16_t>(msda::float_bits(f) >> 16);
        const std::uint16_t up = static_cast<std::uint16_t>(down + 1);
        const double d_down = std::abs(static_cast<double>(bf16_to_float(down)) - f);
        const double up_value =
            (down & 0x7fff) == 0x7f7f ? std::copysign(std::ldexp(1.0, 128), f) : bf16_to_float(up);
        const double d_up = std::abs(up_value - f);
        std::uint16_t expected = d_down < d_up ? down : d_up < d_down ? up : ((down & 1) ? up : down);
        if (std::isinf(f)) expected = down;
        ASSERT_EQ(actual, expected) << "float " << f << " (bits " << std::hex << msda::float_bits(f) << ")";
    }
}

}  // namespace
