# Ahead-of-time instantiation of msda's generators.
#
# The libraries are built for the CPU family of the processor this build
# targets (CMAKE_SYSTEM_PROCESSOR: x86-64, or aarch64 in a cross or native ARM
# build), and are multi-target: the generated code picks the best of the
# family's targets the CPU can run, at run time. Never `host`.
#
# Each target belongs to one of the tiers the runtime's CPU check knows
# (runtime/src/x86_cpu.cpp, arm_cpu.cpp list the CPU features each tier's
# code may use): MSDA_CPU_TIERS holds the tier of each of MSDA_CPU_TARGETS,
# which must run from best to worst, one per tier (the multi-target wrapper
# takes the first the CPU may run, and runs the last without asking).
if (CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
    set(MSDA_CPU_FAMILY arm)
    set(MSDA_ARM_TARGETS
        arm-64-linux-arm_fp16
        arm-64-linux
        CACHE STRING "Halide targets of the ARM libraries, best first")
    set(MSDA_CPU_TARGETS ${MSDA_ARM_TARGETS})
    set(_msda_tier_variable MSDA_ARM_TARGETS)
    set(_msda_target_prefix arm-64-linux)
    # tier | its rank | the Halide features that make it
    set(_msda_tiers "arm_fp16|1|arm_fp16" "arm-64|0|")
else ()
    set(MSDA_CPU_FAMILY x86)
    set(MSDA_X86_TARGETS
        x86-64-linux-avx512_zen4
        x86-64-linux-avx-avx2-f16c-fma-sse41
        x86-64-linux
        CACHE STRING "Halide targets of the x86 libraries, best first")
    set(MSDA_CPU_TARGETS ${MSDA_X86_TARGETS})
    set(_msda_tier_variable MSDA_X86_TARGETS)
    set(_msda_target_prefix x86-64-linux)
    set(_msda_tiers "avx512_zen4|2|avx512_zen4" "avx2|1|sse41,avx,avx2,fma,f16c" "x86-64|0|")
endif ()

# The tier table, read once: each tier's rank, the tier each feature makes,
# the base tier (rank 0) and every feature a tier knows.
set(_msda_known_features "")
foreach (entry IN LISTS _msda_tiers)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 tier)
    list(GET parts 1 rank)
    set(_msda_rank_${tier} ${rank})
    if (rank EQUAL 0)
        set(_msda_base_tier ${tier})
    endif ()
    list(LENGTH parts count)
    if (count GREATER 2)
        list(GET parts 2 tier_features)
        string(REPLACE "," ";" tier_features "${tier_features}")
        foreach (feature IN LISTS tier_features)
            set(_msda_tier_of_${feature} ${tier})
        endforeach ()
        list(APPEND _msda_known_features ${tier_features})
    endif ()
endforeach ()

# msda_cpu_tier(HALIDE_TARGET OUT) sets OUT to the target's tier (the best
# tier any of its features makes) and OUT_RANK to its rank, or fails: a
# target whose code the runtime could not match to a CPU check must not be
# built.
function(msda_cpu_tier HALIDE_TARGET OUT)
    if (NOT HALIDE_TARGET MATCHES "^${_msda_target_prefix}(-.*)?$")
        message(FATAL_ERROR "${_msda_tier_variable}: ${HALIDE_TARGET} is not a ${_msda_target_prefix} target")
    endif ()
    string(REGEX REPLACE "^${_msda_target_prefix}-?" "" features "${HALIDE_TARGET}")
    string(REPLACE "-" ";" features "${features}")
    set(best_tier ${_msda_base_tier})
    foreach (feature IN LISTS features)
        if (NOT feature IN_LIST _msda_known_features)
            message(FATAL_ERROR "${_msda_tier_variable}: ${HALIDE_TARGET}: msda's CPU check knows no tier for the "
                                "feature \"${feature}\" (known: ${_msda_known_features})")
        endif ()
        set(tier ${_msda_tier_of_${feature}})
        if (_msda_rank_${tier} GREATER _msda_rank_${best_tier})
            set(best_tier ${tier})
        endif ()
    endforeach ()
    set(${OUT} ${best_tier} PARENT_SCOPE)
    set(${OUT}_RANK ${_msda_rank_${best_tier}} PARENT_SCOPE)
endfunction()

set(MSDA_CPU_TIERS "")
set(_msda_previous_rank 1000)
foreach (target IN LISTS MSDA_CPU_TARGETS)
    msda_cpu_tier(${target} tier)
    if (NOT tier_RANK LESS _msda_previous_rank)
        message(FATAL_ERROR "${_msda_tier_variable} must list targets best first, one per tier: ${MSDA_CPU_TARGETS}")
    endif ()
    set(_msda_previous_rank ${tier_RANK})
    list(APPEND MSDA_CPU_TIERS ${tier})
endforeach ()

# The OpenCL libraries (the GPU schedule family, schedules/gpu.cpp): their
# host code is the family's baseline CPU target, their kernels OpenCL C,
# compiled by the OpenCL driver when first run. Built where MSDA_OPENCL is
# on (by default natively, not in a cross tree).
if (MSDA_CPU_FAMILY STREQUAL "arm")
    set(MSDA_OPENCL_TARGET arm-64-linux-opencl)
else ()
    set(MSDA_OPENCL_TARGET x86-64-linux-opencl)
endif ()
# The CUDA libraries, the same family: host code at the baseline, kernels as
# PTX for compute capability 8.6, the highest Halide 21 names; the driver
# compiles that PTX for newer GPUs (an H200 is 9.0) when first run.
if (MSDA_CPU_FAMILY STREQUAL "arm")
    set(MSDA_CUDA_TARGET arm-64-linux-cuda-cuda_capability_86)
else ()
    set(MSDA_CUDA_TARGET x86-64-linux-cuda-cuda_capability_86)
endif ()

# Every variant's lowered statements (build/generators/*.stmt), for review.
# Off by default: Halide's helper declares one statement file for a library
# compiled for several targets, where the generator writes one per target,
# so with it on every build regenerates every CPU variant.
option(MSDA_KEEP_STMT "Keep each variant's Halide statement files in build/generators" OFF)

# user_context: errors reach the calling thread's msda::Error.
# large_buffers: 64-bit index arithmetic for tensors past 2^31 elements.
set(MSDA_HALIDE_FEATURES user_context large_buffers)
# A sanitizer tree (MSDA_SANITIZE) instruments the generated code too: its
# loads and stores checked by AddressSanitizer (Halide's asan), its memory
# accesses and the Halide runtime's thread pool seen by ThreadSanitizer
# (tsan; the runtime gets its libraries' features). The GPU kernels
# themselves are not instrumented (their host code is).
# They are part of each target (not FEATURES): Halide's helper also hands
# the runtime each library's target without its FEATURES, and one runtime
# cannot serve targets that differ in a sanitizer.
set(_msda_sanitizer_suffix "")
if ("address" IN_LIST MSDA_SANITIZE)
    set(_msda_sanitizer_suffix "-asan")
endif ()
if ("thread" IN_LIST MSDA_SANITIZE)
    set(_msda_sanitizer_suffix "-tsan")
endif ()

set(_msda_runtime_targets "")
foreach (target IN LISTS MSDA_CPU_TARGETS)
    list(APPEND _msda_runtime_targets ${target}${_msda_sanitizer_suffix})
endforeach ()
add_halide_runtime(msda_halide_runtime TARGETS ${_msda_runtime_targets})

# The variants the runtime can dispatch to; msda_variants.h lists them.
set_property(GLOBAL PROPERTY MSDA_VARIANTS "")

# msda_add_variant(NAME GENERATOR gen KIND kind CHANNELS c
#                  [DTYPE f32|f16|bf16] [LOCATIONS f32|f16|bf16] [PARAMS ...])
#   KIND: forward | grad_value | grad_value_atomic (the GPU family's float
#         atomic scatter, Options::deterministic = false) | grad_value_serial
#         (OpenCL: the deterministic scatter for devices without 64-bit
#         integer atomics) | grad_sample | grad_attention_weights
#         | grad_sampling_locations | relayout (a value-shaped copy between
#         layouts; takes DTYPE only)
#   CHANNELS: the compile-time C_h, 0 for any.
#   DTYPE: the storage of value, attention_weights, output, grad_output and
#          their gradients; LOCATIONS: of sampling_locations and its
#          gradient. Both default to f32.
#   OP: msda (default) or gka.
#   LEVELS, POINTS: a compile-time N_l and N_p (forward and grad_sample
#          only): the variant walks the samples query by query
#          (Options::sample_order) and requires canonical strides on the
#          (l, p) dimensions of sampling_locations, attention_weights and
#          their gradients. Default 0: any.
#   FAMILY: the build's CPU family (default: MSDA_CPU_FAMILY's targets),
#          opencl (MSDA_OPENCL_TARGET) or cuda (MSDA_CUDA_TARGET).
#   GPU_FEATURES: Halide target features this variant's GPU code needs
#          beyond its family's target (e.g. cl_atomics64).
function(msda_add_variant NAME)
    cmake_parse_arguments(ARG "" "GENERATOR;KIND;CHANNELS;DTYPE;LOCATIONS;OP;LEVELS;POINTS;FAMILY"
                          "PARAMS;GPU_FEATURES" ${ARGN})
    if (NOT ARG_FAMILY)
        set(ARG_FAMILY ${MSDA_CPU_FAMILY})
    endif ()
    if (ARG_FAMILY STREQUAL "opencl")
        set(targets ${MSDA_OPENCL_TARGET})
    elseif (ARG_FAMILY STREQUAL "cuda")
        set(targets ${MSDA_CUDA_TARGET})
    elseif (ARG_FAMILY STREQUAL MSDA_CPU_FAMILY)
        set(targets ${MSDA_CPU_TARGETS})
    else ()
        message(FATAL_ERROR "msda_add_variant(${NAME}): FAMILY ${ARG_FAMILY} is neither ${MSDA_CPU_FAMILY}, opencl nor cuda")
    endif ()
    if (_msda_sanitizer_suffix)
        list(TRANSFORM targets APPEND "${_msda_sanitizer_suffix}")
    endif ()
    if (ARG_GPU_FEATURES)
        if (ARG_FAMILY STREQUAL MSDA_CPU_FAMILY)
            message(FATAL_ERROR "msda_add_variant(${NAME}): GPU_FEATURES are for the opencl and cuda families")
        endif ()
        list(JOIN ARG_GPU_FEATURES "-" features)
        set(targets "${targets}-${features}")
    endif ()
    if (NOT ARG_LEVELS)
        set(ARG_LEVELS 0)
    endif ()
    if (NOT ARG_POINTS)
        set(ARG_POINTS 0)
    endif ()
    if (NOT ARG_OP)
        set(ARG_OP msda)
    endif ()
    if (NOT ARG_DTYPE)
        set(ARG_DTYPE f32)
    endif ()
    if (NOT ARG_LOCATIONS)
        set(ARG_LOCATIONS f32)
    endif ()
    set(halide_type_f32 float32)
    set(halide_type_f16 float16)
    set(halide_type_bf16 bfloat16)
    if (ARG_KIND STREQUAL "relayout")
        set(params storage=${halide_type_${ARG_DTYPE}})
    else ()
        set(params channels=${ARG_CHANNELS} storage=${halide_type_${ARG_DTYPE}}
                   locations=${halide_type_${ARG_LOCATIONS}} op=${ARG_OP} levels=${ARG_LEVELS}
                   points=${ARG_POINTS} ${ARG_PARAMS})
    endif ()
    set(review_outputs "")
    if (MSDA_KEEP_STMT)
        set(review_outputs STMT ${NAME}_STMT)
    endif ()
    add_halide_library(${NAME}
        FROM msda::halide_generators::msda_generators
        GENERATOR ${ARG_GENERATOR}
        FUNCTION_NAME ${NAME}
        TARGETS ${targets}
        FEATURES ${MSDA_HALIDE_FEATURES}
        USE_RUNTIME msda_halide_runtime
        PARAMS ${params}
        ${review_outputs})
    set_property(GLOBAL APPEND PROPERTY MSDA_VARIANTS
                 "${NAME}|${ARG_FAMILY}|${ARG_KIND}|${ARG_CHANNELS}|${ARG_DTYPE}|${ARG_LOCATIONS}|${ARG_OP}|${ARG_LEVELS}|${ARG_POINTS}")
endfunction()

# Writes msda_variants.h: one X-macro line per variant (its name, the target
# family its library was compiled for, what it computes), and the includes.
function(msda_write_variant_header OUT)
    get_property(variants GLOBAL PROPERTY MSDA_VARIANTS)
    set(includes "")
    set(entries "")
    foreach (v IN LISTS variants)
        string(REPLACE "|" ";" parts "${v}")
        list(GET parts 0 name)
        list(GET parts 1 family)
        list(GET parts 2 kind)
        list(GET parts 3 channels)
        list(GET parts 4 dtype)
        list(GET parts 5 locations)
        list(GET parts 6 op)
        list(GET parts 7 levels)
        list(GET parts 8 points)
        string(APPEND includes "#include \"${name}.h\"\n")
        string(APPEND entries
               "    MSDA_VARIANT(${name}, ${family}, ${kind}, ${channels}, ${dtype}, ${locations}, ${op}, ${levels}, "
               "${points}) \\\n")
    endforeach ()
    # The CPU targets, best first, with their tiers (x86-64 is x86_64 in C++,
    # arm-64 arm_64).
    set(targets "")
    foreach (target tier IN ZIP_LISTS MSDA_CPU_TARGETS MSDA_CPU_TIERS)
        string(REPLACE "-" "_" tier "${tier}")
        string(APPEND targets "    MSDA_CPU_TARGET_ENTRY(\"${target}\", ${tier}) \\\n")
    endforeach ()
    file(WRITE "${OUT}.tmp"
        "// Generated by cmake/MsdaHalide.cmake: the compiled variants.\n#pragma once\n"
        "${includes}\n#define MSDA_FOR_EACH_VARIANT(MSDA_VARIANT) \\\n${entries}\n"
        "#define MSDA_FOR_EACH_CPU_TARGET(MSDA_CPU_TARGET_ENTRY) \\\n${targets}\n")
    file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
endfunction()
