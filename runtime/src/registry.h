// The registry of generated functions: every variant the build compiled
// (msda_variants.h, generated from the variant table), typed by its
// declaration, and the choice of the ones that serve a plan.
#pragma once

#include <msda/msda.hpp>

#include <cstddef>
#include <utility>
#include <variant>

struct halide_buffer_t;

namespace msda::detail {

enum class Kind {
    forward,
    grad_value,
    grad_value_atomic,  // the GPU family's float-atomic scatter (Options::deterministic = false)
    grad_value_serial,  // the GPU family's deterministic scatter for devices without 64-bit integer atomics
    grad_sample,
    grad_attention_weights,
    grad_sampling_locations,
    relayout
};
// What a kind computes, for messages.
const char *kind_name(Kind kind);

// The types of the generated functions, as their headers declare them
// (msda_variants.h includes every one): MSDA's and GKA's take the same inputs
// (value, spatial_shapes, level_start_index, the two location planes,
// attention_weights, then align_corners, border and nearest) followed by
// their outputs, one to four buffers; the relayout copy takes one buffer in
// and one out. A registry entry holds its function as the one of these its
// declaration is (the compiler checks each at registration, nothing is
// cast), and a call names the outputs it passes, so a call with the wrong
// outputs fails with an msda::Error instead of calling through the wrong
// signature.
template <std::size_t... Output>
auto pipeline_function_type(std::index_sequence<Output...>)
    -> int (*)(const void *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
               halide_buffer_t *, halide_buffer_t *, bool, bool, bool,
               decltype((void)Output, static_cast<halide_buffer_t *>(nullptr))...);
template <std::size_t Outputs>
using PipelineFunction = decltype(pipeline_function_type(std::make_index_sequence<Outputs>{}));
using RelayoutFunction = int (*)(const void *, halide_buffer_t *, halide_buffer_t *);
using GeneratedFunction = std::variant<PipelineFunction<1>, PipelineFunction<2>, PipelineFunction<3>,
                                       PipelineFunction<4>, RelayoutFunction>;

// The target families msda's libraries are compiled for; a library holds
// the variants of its CPU's family and of the GPU family's devices.
enum class TargetFamily { x86, arm, opencl, cuda };
// The GPU schedule family's libraries: OpenCL and CUDA.
constexpr bool is_gpu(TargetFamily family) { return family == TargetFamily::opencl || family == TargetFamily::cuda; }
#if defined(__x86_64__)
constexpr TargetFamily kLibraryFamily = TargetFamily::x86;
#elif defined(__aarch64__)
constexpr TargetFamily kLibraryFamily = TargetFamily::arm;
#else
#error "msda's runtime is built for x86-64 and 64-bit ARM only"
#endif
const char *family_name(TargetFamily family);

struct Variant {
    const char *name;  // the generated function's name
    TargetFamily family;
    Kind kind;
    int channels;  // compile-time C_h, 0 for any
    DType dtype;            // storage of value, weights, outputs and gradients
    DType locations_dtype;  // storage of sampling_locations and its gradient
    Operator op;
    int levels, points;  // compile-time N_l and N_p of a by-query variant, 0 for any
    GeneratedFunction function;
};

// The variant for this kind, storage dtypes and channel count in a family:
// a compile-time C_h when one was built for it, else the generic one.
const Variant &select_variant(Kind kind, const ProblemSize &size, Operator op,
                              TargetFamily family = kLibraryFamily);
// The relayout copy of a storage dtype, or null.
const Variant *find_relayout(DType dtype);

// The generated functions a plan runs.
struct Kernels {
    const Variant *forward = nullptr;
    // The forward, the per-sample gradients and grad_value's scatter walked
    // query by query (Options::sample_order), where one was built for the
    // plan's sizes (for the per-sample gradients: the set asked for); null
    // otherwise.
    const Variant *forward_by_query = nullptr;
    const Variant *grad_sample_by_query = nullptr;
    const Variant *grad_value_by_query = nullptr;
    const Variant *grad_value = nullptr;
    // The deterministic scatter for a device without 64-bit integer
    // atomics, where the family has one; null otherwise.
    const Variant *grad_value_serial = nullptr;
    const Variant *grad_sample = nullptr;  // the asked-for per-sample gradients
    const Variant *relayout = nullptr;     // the plan's dtype's copy between layouts, or null
};
Kernels select_kernels(const ProblemSize &size, const Options &options, TargetFamily family);
// The same, in the family of Options::device's backend.
Kernels select_kernels(const ProblemSize &size, const Options &options);

}  // namespace msda::detail
