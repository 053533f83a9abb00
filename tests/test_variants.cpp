// The registry of generated functions (msda::compiled_variants, msda info
// --variants): every entry belongs to this library's CPU family or to
// OpenCL, names
// are unique, and every operator, storage and locations dtype the SPEC
// promises has its generic code (any C_h, any N_l and N_p) for the forward,
// grad_value and the per-sample gradients, and a relayout per storage size.
#include <gtest/gtest.h>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

namespace {

TEST(Variants, BelongToTheLibrarysFamily) {
    const msda::CpuDispatch dispatch = msda::cpu_dispatch();
#if defined(__x86_64__)
    EXPECT_EQ(dispatch.family, "x86");
    EXPECT_EQ(dispatch.cap_variable, "MSDA_X86_TARGET");
#else
    EXPECT_EQ(dispatch.family, "arm");
    EXPECT_EQ(dispatch.cap_variable, "MSDA_ARM_TARGET");
#endif
    const std::vector<msda::CompiledVariant> variants = msda::compiled_variants();
    ASSERT_FALSE(variants.empty());
    std::set<std::string> names;
    for (const msda::CompiledVariant &variant : variants) {
        // The CPU family's, or OpenCL's (whose host code is that CPU's).
        EXPECT_TRUE(variant.family == dispatch.family || variant.family == "opencl" || variant.family == "cuda")
            << variant.name;
        EXPECT_TRUE(names.insert(variant.name).second) << variant.name << " is listed twice";
        // A by-query variant fixes all three sizes, the others at most C_h.
        EXPECT_EQ(variant.levels == 0, variant.points == 0) << variant.name;
        if (variant.points != 0) EXPECT_GT(variant.channels, 0) << variant.name;
    }
}

bool has_generic(const std::vector<msda::CompiledVariant> &variants, const std::string &kind, msda::Operator op,
                 msda::DType dtype, msda::DType locations, const std::string &family = msda::cpu_dispatch().family) {
    for (const msda::CompiledVariant &variant : variants) {
        if (variant.family == family && variant.kind == kind && variant.op == op && variant.dtype == dtype &&
            variant.locations_dtype == locations && variant.channels == 0 && variant.points == 0) {
            return true;
        }
    }
    return false;
}

TEST(Variants, EveryPromisedCallHasGenericCode) {
    const std::vector<msda::CompiledVariant> variants = msda::compiled_variants();
    using msda::DType;
    const std::vector<std::tuple<DType, DType>> storages = {{DType::f32, DType::f32}, {DType::f16, DType::f32},
                                                            {DType::f16, DType::f16}, {DType::bf16, DType::f32},
                                                            {DType::bf16, DType::bf16}, {DType::f64, DType::f64}};
    for (const auto &[dtype, locations] : storages) {
        SCOPED_TRACE(std::string(msda::dtype_name(dtype)) + " storage, " + msda::dtype_name(locations) +
                     " locations");
        for (const char *kind : {"forward", "grad_value", "grad_sample", "grad_attention_weights",
                                 "grad_sampling_locations"}) {
            EXPECT_TRUE(has_generic(variants, kind, msda::Operator::msda, dtype, locations)) << "MSDA " << kind;
        }
        // GKA: no location gradient.
        for (const char *kind : {"forward", "grad_value", "grad_attention_weights"}) {
            EXPECT_TRUE(has_generic(variants, kind, msda::Operator::gka, dtype, locations)) << "GKA " << kind;
        }
    }
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
        EXPECT_TRUE(has_generic(variants, "relayout", msda::Operator::msda, dtype, dtype)) << msda::dtype_name(dtype);
    }
}

// Where a GPU family's code was built (MSDA_OPENCL, MSDA_CUDA), it serves
// every float32 call, in both grad_value modes, and every float64 call (its
// grad_value, the ordered sum, serves both modes).
void expect_serves_every_float32_and_float64_call(const char *family) {
    const std::vector<msda::CompiledVariant> variants = msda::compiled_variants();
    using msda::DType;
    for (const char *kind : {"forward", "grad_value", "grad_sample", "grad_attention_weights",
                             "grad_sampling_locations"}) {
        EXPECT_TRUE(has_generic(variants, kind, msda::Operator::msda, DType::f64, DType::f64, family)) << kind;
    }
    for (const char *kind : {"forward", "grad_value", "grad_attention_weights"}) {
        EXPECT_TRUE(has_generic(variants, kind, msda::Operator::gka, DType::f64, DType::f64, family)) << kind;
    }
    for (const char *kind : {"forward", "grad_value", "grad_value_atomic", "grad_sample", "grad_attention_weights",
                             "grad_sampling_locations"}) {
        EXPECT_TRUE(has_generic(variants, kind, msda::Operator::msda, DType::f32, DType::f32, family)) << kind;
    }
    for (const char *kind : {"forward", "grad_value", "grad_value_atomic", "grad_attention_weights"}) {
        EXPECT_TRUE(has_generic(variants, kind, msda::Operator::gka, DType::f32, DType::f32, family)) << kind;
    }
}

TEST(Variants, OpenClServesEveryFloat32AndFloat64Call) {
    if (!msda::testing::opencl_built()) GTEST_SKIP() << "this build has no OpenCL code (MSDA_OPENCL=OFF)";
    expect_serves_every_float32_and_float64_call("opencl");
    // Devices without 64-bit integer atomics: the serial deterministic scatter.
    const std::vector<msda::CompiledVariant> variants = msda::compiled_variants();
    for (const msda::Operator op : {msda::Operator::msda, msda::Operator::gka}) {
        EXPECT_TRUE(has_generic(variants, "grad_value_serial", op, msda::DType::f32, msda::DType::f32, "opencl"));
    }
}

TEST(Variants, CudaServesEveryFloat32AndFloat64Call) {
    if (!msda::testing::cuda_built()) GTEST_SKIP() << "this build has no CUDA code (MSDA_CUDA=OFF)";
    expect_serves_every_float32_and_float64_call("cuda");
    // Deformable DETR's sizes compiled in (C_h 32, N_l 4, N_p 4), for the
    // forward and every kind the full backward runs.
    const std::vector<msda::CompiledVariant> variants = msda::compiled_variants();
    for (const char *kind : {"forward", "grad_value", "grad_value_atomic", "grad_sample"}) {
        const bool found = std::any_of(variants.begin(), variants.end(), [&](const msda::CompiledVariant &v) {
            return v.family == "cuda" && v.kind == kind && v.channels == 32 && v.levels == 4 && v.points == 4;
        });
        EXPECT_TRUE(found) << kind;
    }
}

}  // namespace
