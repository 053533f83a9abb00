#include "registry.h"

#include <array>
#include <string>
#include <vector>

#include <msda/diagnostics.hpp>

#include "backends/backends.h"
#include "cpu_dispatch.h"
#include "msda_variants.h"

namespace msda::detail {

namespace {

constexpr Variant kVariants[] = {
#define MSDA_VARIANT(name, family, kind, channels, dtype, locations, op, levels, points)                  \
    {#name, TargetFamily::family, Kind::kind, channels, DType::dtype, DType::locations, Operator::op, levels, \
     points, &name},
    MSDA_FOR_EACH_VARIANT(MSDA_VARIANT)
#undef MSDA_VARIANT
};

// A library holds the code of the CPU family it runs on, and OpenCL and
// CUDA code (whose host side is that CPU's), nothing else.
constexpr bool all_of_library_family() {
    for (const Variant &variant : kVariants) {
        if (variant.family != kLibraryFamily && !is_gpu(variant.family)) return false;
    }
    return true;
}
static_assert(all_of_library_family(),
              "msda_variants.h lists a variant of another CPU family than this library's");

// One variant a key: a second configuration of the same key would shadow
// the first (schedules/variants.cmake refuses it too, at configure time).
constexpr bool one_variant_a_key() {
    for (const Variant &a : kVariants) {
        int same = 0;
        for (const Variant &b : kVariants) {
            same += a.family == b.family && a.kind == b.kind && a.channels == b.channels && a.dtype == b.dtype &&
                    a.locations_dtype == b.locations_dtype && a.op == b.op && a.levels == b.levels &&
                    a.points == b.points;
        }
        if (same != 1) return false;
    }
    return true;
}
static_assert(one_variant_a_key(), "msda_variants.h lists two variants of one key");

// Each family's names: its id (msda_variants.h, compiled_variants), its name
// in messages and the CMake option that leaves its code out of a build.
struct FamilyNames {
    TargetFamily family;
    const char *id, *display, *option;
};
constexpr FamilyNames kFamilies[] = {{TargetFamily::x86, "x86", "x86", ""},
                                     {TargetFamily::arm, "arm", "ARM", ""},
                                     {TargetFamily::opencl, "opencl", "OpenCL", "MSDA_OPENCL"},
                                     {TargetFamily::cuda, "cuda", "CUDA", "MSDA_CUDA"}};
const FamilyNames &names_of(TargetFamily family) {
    for (const FamilyNames &names : kFamilies) {
        if (names.family == family) return names;
    }
    return kFamilies[0];
}

// A kind's name in msda_variants.h (and msda::compiled_variants).
const char *kind_id(Kind kind) {
    switch (kind) {
    case Kind::forward: return "forward";
    case Kind::grad_value: return "grad_value";
    case Kind::grad_value_atomic: return "grad_value_atomic";
    case Kind::grad_value_serial: return "grad_value_serial";
    case Kind::grad_sample: return "grad_sample";
    case Kind::grad_attention_weights: return "grad_attention_weights";
    case Kind::grad_sampling_locations: return "grad_sampling_locations";
    case Kind::relayout: return "relayout";
    }
    return "unknown";
}

bool serves_dtypes(const Variant &variant, Kind kind, const ProblemSize &size, Operator op, TargetFamily family) {
    return variant.family == family && variant.kind == kind && variant.op == op && variant.dtype == size.dtype &&
           variant.locations_dtype == size.locations_dtype;
}

// The family's by-query variant of this kind for the sizes (compile-time
// C_h, N_l and N_p all matching), or null (the GPU family walks by level:
// its compile-time sizes are select_variant's).
const Variant *by_query_variant(Kind kind, const ProblemSize &size, Operator op, TargetFamily family) {
    if (is_gpu(family)) return nullptr;
    for (const Variant &variant : kVariants) {
        if (serves_dtypes(variant, kind, size, op, family) && variant.points != 0 &&
            variant.channels == size.channels && variant.levels == size.levels && variant.points == size.points) {
            return &variant;
        }
    }
    return nullptr;
}

// The family's variant of this kind for the call's operator and dtypes, if
// the build has one (the serial scatter and the float atomics exist for
// some families and dtypes only).
const Variant *optional_variant(Kind kind, const ProblemSize &size, Operator op, TargetFamily family) {
    for (const Variant &variant : kVariants) {
        if (serves_dtypes(variant, kind, size, op, family)) return &select_variant(kind, size, op, family);
    }
    return nullptr;
}

}  // namespace

const char *kind_name(Kind kind) {
    return kind == Kind::grad_sample ? "grad_attention_weights and grad_sampling_locations" : kind_id(kind);
}

const char *family_name(TargetFamily family) { return names_of(family).id; }

const Variant &select_variant(Kind kind, const ProblemSize &size, Operator op, TargetFamily family) {
    const Variant *generic = nullptr, *channels = nullptr;
    bool family_built = false;
    for (const Variant &variant : kVariants) {
        family_built = family_built || variant.family == family;
        if (!serves_dtypes(variant, kind, size, op, family)) continue;
        if (variant.points != 0) {
            // The CPU family's are by-query walks (by_query_variant); the GPU
            // family's serve exactly their compile-time C_h, N_l and N_p.
            if (is_gpu(family) && variant.channels == size.channels && variant.levels == size.levels &&
                variant.points == size.points) {
                return variant;
            }
            continue;
        }
        if (variant.channels == size.channels) channels = &variant;
        if (variant.channels == 0) generic = &variant;
    }
    if (channels != nullptr) return *channels;
    if (generic != nullptr) return *generic;
    const FamilyNames &names = names_of(family);
    const std::string device = names.display;
    if (!family_built && is_gpu(family)) {
        throw Error("msda: Options::device asks for " + device + ", and this build has no " + device +
                    " code (it was configured with " + names.option + "=OFF)");
    }
    if (is_gpu(family)) {
        throw TypeError("msda: the " + device + " code computes float32 storage with float32 locations and float64 " +
                        "with float64 locations; this call has " + dtype_name(size.dtype) + " storage and " +
                        dtype_name(size.locations_dtype) + " locations (use Device::cpu for half precision)");
    }
    throw TypeError(std::string("msda: this build has no generated code for ") + (op == Operator::gka ? "GKA " : "") +
                kind_name(kind) + " with " + dtype_name(size.dtype) + " storage and " +
                dtype_name(size.locations_dtype) + " locations");
}

const Variant *find_relayout(DType dtype) {
    // Looked up once for the process: every CPU plan asks for its dtype's.
    static const auto copies = [] {
        std::array<const Variant *, 4> found{};  // f32, f16, bf16, f64
        for (const Variant &variant : kVariants) {
            const int storage = static_cast<int>(variant.dtype);
            if (variant.kind == Kind::relayout && storage >= 0 && storage < 4) found[storage] = &variant;
        }
        return found;
    }();
    const int storage = static_cast<int>(dtype);
    return storage >= 0 && storage < 4 ? copies[storage] : nullptr;
}

Kernels select_kernels(const ProblemSize &size, const Options &options, TargetFamily family) {
    Kernels kernels;
    const Operator op = options.op;
    // GKA has no location gradient (validation requires its view absent).
    const bool locations = options.grad_sampling_locations && op == Operator::msda;
    kernels.forward = &select_variant(Kind::forward, size, op, family);
    kernels.forward_by_query = by_query_variant(Kind::forward, size, op, family);
    if (options.grad_value) {
        // The float-atomic scatter only where it was asked for and exists
        // (float64 has none: its ordered sum runs).
        const bool atomic = !options.deterministic && is_gpu(family) &&
                            optional_variant(Kind::grad_value_atomic, size, op, family) != nullptr;
        kernels.grad_value = &select_variant(atomic ? Kind::grad_value_atomic : Kind::grad_value, size, op, family);
        if (!atomic) kernels.grad_value_serial = optional_variant(Kind::grad_value_serial, size, op, family);
        kernels.grad_value_by_query = by_query_variant(Kind::grad_value, size, op, family);
    }
    // The per-sample gradients asked for, in one pass; by query where a
    // variant walks so for exactly this set (each set has one, or none has,
    // so a gradient walks the same way whatever else is asked).
    const Kind per_sample = options.grad_attention_weights && locations ? Kind::grad_sample
                            : options.grad_attention_weights           ? Kind::grad_attention_weights
                                                                       : Kind::grad_sampling_locations;
    if (options.grad_attention_weights || locations) {
        kernels.grad_sample = &select_variant(per_sample, size, op, family);
        kernels.grad_sample_by_query = by_query_variant(per_sample, size, op, family);
    }
    // The CPU family stages value through it (and float32 sums of
    // grad_value back); a call that needs it fails if the build has none.
    if (!is_gpu(family)) kernels.relayout = find_relayout(size.dtype);
    return kernels;
}

Kernels select_kernels(const ProblemSize &size, const Options &options) {
    return select_kernels(size, options, backend_for(options.device).family());
}

}  // namespace msda::detail

namespace msda {

std::vector<CompiledVariant> compiled_variants() {
    std::vector<CompiledVariant> list;
    for (const detail::Variant &variant : detail::kVariants) {
        list.push_back({variant.name, detail::family_name(variant.family), detail::kind_id(variant.kind), variant.op,
                        variant.dtype, variant.locations_dtype, variant.channels, variant.levels, variant.points});
    }
    return list;
}

}  // namespace msda
