// The bridge to the generated code: which compiled variant serves a plan, how
// tensors become Halide buffers (a layout is only a permutation of strides),
// and how the generated functions' errors come back as msda::Error.
#pragma once

#include <cstddef>
#include <utility>
#include <variant>

#include <string>

#include "validate.h"

struct halide_buffer_t;

namespace msda::detail {

// What the generated code gets as its user_context: the call's own error
// messages (Halide's error handler appends to them, so concurrent calls never
// mix them and nothing is printed or aborted) and, on OpenCL, the queue and
// context the call runs on (null: msda's own; see opencl.cpp's hooks), on
// CUDA its context and stream (cuda.cpp's hooks).
struct CallContext {
    std::string message;
    void *cl_context = nullptr;
    void *cl_queue = nullptr;
    void *cu_context = nullptr;  // CUDA: the call's context and stream (cuda.cpp's hooks)
    void *cu_stream = nullptr;
};
// Installs the error handler that fills CallContext::message (once).
void install_error_handler();

enum class Kind {
    forward,
    grad_value,
    grad_value_atomic,  // the GPU family's float-atomic scatter (Options::deterministic = false)
    grad_value_serial,  // OpenCL's deterministic scatter where the device has no 64-bit integer atomics
    grad_sample,
    grad_attention_weights,
    grad_sampling_locations,
    relayout
};

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
// the variants of one (msda_variants.h names each entry's).
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

// The variant for this kind, storage dtypes and channel count: a
// compile-time C_h when one was built for it, else the generic one.
// family: the library's CPU family, or the GPU family a call's
// Options::device asks for.
const Variant &select_variant(Kind kind, const ProblemSize &size, Operator op,
                              TargetFamily family = kLibraryFamily);

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
    // OpenCL, deterministic: the scatter for a device without 64-bit integer
    // atomics, which grad_value's fixed-point sum needs; null otherwise.
    const Variant *grad_value_serial = nullptr;
    const Variant *grad_sample = nullptr;  // the asked-for per-sample gradients
};
Kernels select_kernels(const ProblemSize &size, const Options &options);

// Scratch memory a plan's calls need, one region after the other: value
// copied head-major (Options::relayout), then the float32 sums of grad_value
// when it is stored in half precision or summed head-major.
// Offsets are from the workspace's first 64-byte boundary: a workspace that
// holds anything has kAlignment - 1 bytes more, so the regions start on cache
// lines (and the staged rows fill whole lines) whatever pointer the caller
// passes (a std::vector's data is 16-byte aligned).
struct Workspace {
    static constexpr std::size_t kAlignment = 64;
    std::size_t value_copy = 0;  // bytes at offset 0, a multiple of kAlignment
    std::size_t sums = 0;        // bytes at offset sums_offset()
    std::size_t sums_offset() const { return value_copy; }
    std::size_t forward_bytes() const { return padded(value_copy); }
    std::size_t bytes() const { return padded(value_copy + sums); }
    static std::size_t padded(std::size_t bytes) { return bytes == 0 ? 0 : bytes + kAlignment - 1; }
};
Workspace workspace_layout(const ProblemSize &size, const Options &options);
std::size_t workspace_bytes(const ProblemSize &size, const Options &options);

// Whether a call walks its samples query by query (Options::sample_order):
// the forward, or the backward's per-sample gradients (grad_value's scatter
// decides its own order the same way, from its own variant and whatever the
// size of the levels; its bits are the same in both). It does when a
// by-query variant serves the plan's sizes, the call's per-sample tensors
// have dense (l, p) blocks, and by_query was asked for, or (automatic) one
// head's largest level holds more than 1 MiB of value and a probe finds the
// queries' samples clustered.
bool walks_by_query(const Kernels &kernels, const ForwardArgs &args, const Options &options,
                    const CheckedCall &call);
bool walks_by_query(const Kernels &kernels, const BackwardArgs &args, const Options &options,
                    const CheckedCall &call);

void run_forward(const Kernels &kernels, const ForwardArgs &args, const Options &options,
                 const CheckedCall &call, void *workspace);
void run_backward(const Kernels &kernels, const BackwardArgs &args, const Options &options,
                  const CheckedCall &call, void *workspace);

}  // namespace msda::detail
