// msda: conversions between float32 and the half-precision storage types
// (IEEE binary16 "float16" and bfloat16), for callers that prepare or read
// tensors of DType::f16 and DType::bf16. A half tensor's elements are the
// 16-bit patterns these functions produce and read.
//
// Float32 to half rounds to nearest, ties to even (what the generated code
// does when it rounds a result); overflow gives +-Inf, NaN stays a (quiet)
// NaN, signed zeros and float16 subnormals are kept. Half to float32 is
// exact.
#pragma once

#include <cstdint>
#include <cstring>

namespace msda {

inline std::uint32_t float_bits(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

inline float float_from_bits(std::uint32_t bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

inline std::uint16_t float_to_bf16(float value) {
    const std::uint32_t bits = float_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // NaN
    const std::uint32_t ties_to_even = 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>((bits + ties_to_even) >> 16);
}

inline float bf16_to_float(std::uint16_t half) { return float_from_bits(static_cast<std::uint32_t>(half) << 16); }

inline std::uint16_t float_to_f16(float value) {
    const std::uint32_t bits = float_bits(value);
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    const std::uint32_t exponent = (bits >> 23) & 0xffu;
    const std::uint32_t mantissa = bits & 0x7fffffu;
    if (exponent == 0xffu) {  // Inf, or NaN (kept quiet, with its top payload bits)
        return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
    }
    // Round the significand (implicit bit included for normal floats) right
    // by `shift` bits, to nearest, ties to even.
    auto round_right = [](std::uint32_t significand, std::uint32_t shift) {
        if (shift > 24) return 0u;
        const std::uint32_t kept = significand >> shift;
        const std::uint32_t rest = significand & ((1u << shift) - 1u);
        const std::uint32_t half_way = 1u << (shift - 1);
        return kept + ((rest > half_way || (rest == half_way && (kept & 1u))) ? 1u : 0u);
    };
    if (exponent >= 113) {  // a normal float16, or overflow
        if (exponent > 142) return static_cast<std::uint16_t>(sign | 0x7c00u);
        // Exponent and mantissa side by side: a carry out of the mantissa
        // steps the exponent, and out of the largest finite value to Inf.
        const std::uint32_t packed = ((exponent - 112) << 23) | mantissa;
        return static_cast<std::uint16_t>(sign | round_right(packed, 13));
    }
    // A float16 subnormal (or zero): units of 2^-24.
    const std::uint32_t significand = exponent ? (mantissa | 0x800000u) : mantissa;
    const std::uint32_t shift = exponent ? 126 - exponent : 126;
    return static_cast<std::uint16_t>(sign | round_right(significand, shift));
}

inline float f16_to_float(std::uint16_t half) {
    const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
    const std::uint32_t exponent = (half >> 10) & 0x1fu;
    std::uint32_t mantissa = half & 0x3ffu;
    if (exponent == 0x1fu) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
    if (exponent != 0) return float_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
    if (mantissa == 0) return float_from_bits(sign);
    // Subnormal: normalise.
    std::uint32_t e = 113;
    while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        e--;
    }
    return float_from_bits(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

}  // namespace msda
