// The geometry's floor and rounding from float-to-int conversions
// (algorithm/sampling.h: floor_as_int, and nearest_axis's rounding half to
// even built on it), which msda's generators use on x86 targets without
// SSE4.1 in place of Halide's floor and round (calls to libm there). They
// are JIT-compiled here for plain x86-64, vectorised as the schedules
// vectorise the tables, and compared with std::floor and rounding half to
// even (std::nearbyint in the default rounding mode) on every value of a
// grid of edges (whole numbers, halves, their neighbouring floats, powers of
// two up to 2^31) and on random floats spread over every binade below 2^31.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "Halide.h"
#include "sampling.h"

namespace {

using namespace Halide;

// x86-64 without SSE4.1: the target the generators choose the conversions
// for, which this machine runs.
Target plain_x86_64() { return Target("x86-64-linux"); }

template <typename T>
std::vector<T> edge_and_random_values(T below) {
    std::vector<T> values;
    const auto add_with_neighbours = [&](T x) {
        for (T v : {std::nextafter(x, T(-2)), x, std::nextafter(x, below)}) {
            if (v > T(-1) && v < below) values.push_back(v);
        }
    };
    add_with_neighbours(T(-0.0));
    add_with_neighbours(std::numeric_limits<T>::denorm_min());
    add_with_neighbours(-std::numeric_limits<T>::denorm_min());
    add_with_neighbours(std::numeric_limits<T>::min());
    for (int k = -1; k <= 300; k++) {
        add_with_neighbours(T(k));
        add_with_neighbours(T(k) + T(0.5));
        add_with_neighbours(T(k) + T(0.25));
    }
    for (int e = -30; e <= 31; e++) {
        const T p = std::ldexp(T(1), e);
        add_with_neighbours(p);
        add_with_neighbours(p + T(0.5));
        add_with_neighbours(-p);
        add_with_neighbours(p - T(0.5));
        add_with_neighbours(p + T(1.5));
    }
    std::mt19937 rng(20261207);
    std::uniform_real_distribution<double> mantissa(1.0, 2.0);
    std::uniform_int_distribution<int> exponent(-40, 30);
    std::uniform_real_distribution<double> fraction(-1.0, 1.0);
    for (int i = 0; i < 200000; i++) {
        const T x = static_cast<T>(std::ldexp(mantissa(rng), exponent(rng)));
        if (x < below) values.push_back(x);
        values.push_back(static_cast<T>(fraction(rng)));
    }
    while (values.size() % 16 != 0) values.push_back(T(0));
    return values;
}

// floor_as_int over `values`, compiled for plain x86-64, vectorised by 8.
template <typename T>
std::vector<std::int32_t> floor_by_conversion(const std::vector<T> &values) {
    Buffer<T> in(const_cast<T *>(values.data()), static_cast<int>(values.size()));
    Var i("i");
    Func f("floor_by_conversion");
    f(i) = msda::algebra::floor_as_int(in(i));
    f.vectorize(i, 8);
    Buffer<std::int32_t> out = f.realize({static_cast<int>(values.size())}, plain_x86_64());
    return std::vector<std::int32_t>(out.begin(), out.end());
}

// Every value's floor_as_int against std::floor.
template <typename T>
void expect_floors(const std::vector<T> &values, const char *what) {
    const std::vector<std::int32_t> floors = floor_by_conversion(values);
    int wrong = 0;
    for (size_t k = 0; k < values.size(); k++) {
        const auto expected = static_cast<std::int64_t>(std::floor(values[k]));
        if (floors[k] != expected && wrong++ < 10) {
            ADD_FAILURE() << "floor_as_int(" << values[k] << ") = " << floors[k] << ", floor is " << expected;
        }
    }
    EXPECT_EQ(wrong, 0) << "of " << values.size() << " " << what;
}

TEST(FloorByConversion, IsTheFloorOfEveryFloatAboveMinusOneAndBelowTwoTo31) {
    expect_floors(edge_and_random_values<float>(2147483648.0f), "floats");
}

TEST(FloorByConversion, IsTheFloorOfEveryDoubleAboveMinusOneAndBelowTwoTo31) {
    expect_floors(edge_and_random_values<double>(2147483648.0), "doubles");
}

// GKA's axis: the index nearest_axis reads, by conversion and by Halide's
// floor and round, for rounding half to even and for the floor, on a level
// 2^30 pixels wide (so no value here is clamped at its far edge), against
// std::nearbyint and std::floor clamped into the level.
TEST(FloorByConversion, GkaIndicesRoundHalfToEvenAndFloorAsHalidesDo) {
    ASSERT_EQ(std::fegetround(), FE_TONEAREST);
    const std::int32_t size = 1 << 30;
    std::vector<float> values = edge_and_random_values<float>(static_cast<float>(size));
    for (float special : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -5.5f, -1e30f, 3e9f}) {
        values.push_back(special);
    }
    while (values.size() % 16 != 0) values.push_back(0.0f);
    Buffer<float> in(values.data(), static_cast<int>(values.size()));
    Var i("i");
    Param<bool> nearest("nearest");
    std::vector<Func> indices;
    for (bool by_conversion : {true, false}) {
        Func f(by_conversion ? "by_conversion" : "by_halide");
        f(i) = msda::algebra::nearest_axis(in(i), Expr(size), nearest, msda::algebra::no_stage, "x", by_conversion)
                   .index;
        f.vectorize(i, 8);
        indices.push_back(f);
    }
    for (bool round_to_nearest : {true, false}) {
        nearest.set(round_to_nearest);
        Buffer<std::int32_t> converted = indices[0].realize({static_cast<int>(values.size())}, plain_x86_64());
        Buffer<std::int32_t> halide = indices[1].realize({static_cast<int>(values.size())}, get_host_target());
        int wrong = 0;
        for (size_t k = 0; k < values.size(); k++) {
            const float x = values[k];
            std::int64_t expected = 0;  // NaN reads pixel 0
            if (!std::isnan(x)) {
                const double clamped = std::min(std::max(static_cast<double>(x), 0.0), double(size - 1));
                expected = static_cast<std::int64_t>(round_to_nearest ? std::nearbyint(clamped) : std::floor(clamped));
            }
            const int at = static_cast<int>(k);
            if ((converted(at) != expected || halide(at) != expected) && wrong++ < 10) {
                ADD_FAILURE() << (round_to_nearest ? "nearest" : "floor") << " index of " << x << ": "
                              << converted(at) << " by conversion, " << halide(at) << " by Halide's, expected "
                              << expected;
            }
        }
        EXPECT_EQ(wrong, 0) << "of " << values.size() << " floats";
    }
}

}  // namespace
