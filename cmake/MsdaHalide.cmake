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

# The variants the runtime can dispatch to (schedules/variants.cmake lists
# them, one msda_variant row each): MSDA_VARIANTS holds the names of those
# this tree builds, MSDA_VARIANT_ENTRY_<name> each one's line of
# msda_variants.h; MSDA_VARIANT_ROWS every row's name, in or out of this tree.
set_property(GLOBAL PROPERTY MSDA_VARIANTS "")
set_property(GLOBAL PROPERTY MSDA_VARIANT_ROWS "")
set_property(GLOBAL PROPERTY MSDA_SCHEDULE_CONFIGS "")

# msda_schedule_config(NAME [PARAM=VALUE ...]): a named set of schedule knob
# values (the generators' GeneratorParams: query_tile, vector_width), which
# a variant row names in its config column. Defined once each.
function(msda_schedule_config NAME)
    get_property(configs GLOBAL PROPERTY MSDA_SCHEDULE_CONFIGS)
    if (NAME IN_LIST configs)
        message(FATAL_ERROR "msda_schedule_config(${NAME}): defined twice")
    endif ()
    foreach (param IN LISTS ARGN)
        if (NOT param MATCHES "^[a-z_]+=[^ ]+$")
            message(FATAL_ERROR "msda_schedule_config(${NAME}): \"${param}\" is not a PARAM=VALUE")
        endif ()
    endforeach ()
    set_property(GLOBAL APPEND PROPERTY MSDA_SCHEDULE_CONFIGS ${NAME})
    set_property(GLOBAL PROPERTY MSDA_SCHEDULE_CONFIG_${NAME} ${ARGN})
endfunction()

# msda_variant(function op kind dtype locations channels levels points family
#              config set): one row of schedules/variants.cmake, one
# generated function (the columns are described there). Checks the row,
# refuses a second row of the same name or the same key (family, op, kind,
# dtypes, channels, levels, points: the runtime could call only one), and
# builds the function's library when this tree has its family and set.
#   kind decides the generator and its part (forward: msda_forward;
#   relayout: msda_relayout; the others msda_backward with part=value for
#   the grad_value kinds, sample, attention_weights or sampling_locations);
#   grad_value_atomic sums with sum=float32_atomic, and a GPU family's
#   grad_value (deterministic) with sum=fixed_point, which on OpenCL needs
#   64-bit integer atomics (the cl_atomics64 target feature; devices
#   without them run grad_value_serial).
function(msda_variant NAME OP KIND DTYPE LOCATIONS CHANNELS LEVELS POINTS FAMILY CONFIG SET)
    set(row "msda_variant(${NAME})")
    if (ARGN)
        message(FATAL_ERROR "${row}: more columns than the table's eleven: ${ARGN}")
    endif ()
    if (NOT NAME MATCHES "^msdak_[a-z0-9_]+$")
        # msdak_: the generated functions' prefix, apart from the C API's
        # msda_ (runtime/msda.map exports msda_* and keeps these local).
        message(FATAL_ERROR "${row}: a generated function's name is msdak_ and [a-z0-9_]")
    endif ()
    set(kinds forward grad_value grad_value_atomic grad_value_serial grad_sample grad_attention_weights
              grad_sampling_locations relayout)
    if (NOT OP MATCHES "^(msda|gka)$")
        message(FATAL_ERROR "${row}: op \"${OP}\" is neither msda nor gka")
    endif ()
    if (NOT KIND IN_LIST kinds)
        message(FATAL_ERROR "${row}: kind \"${KIND}\" is none of ${kinds}")
    endif ()
    if (NOT DTYPE MATCHES "^(f32|f16|bf16)$")
        message(FATAL_ERROR "${row}: dtype \"${DTYPE}\" is none of f32, f16, bf16")
    endif ()
    if (NOT LOCATIONS STREQUAL "f32" AND NOT LOCATIONS STREQUAL DTYPE)
        message(FATAL_ERROR "${row}: locations \"${LOCATIONS}\" is neither f32 nor the dtype")
    endif ()
    foreach (size IN ITEMS CHANNELS LEVELS POINTS)
        if (NOT ${size} MATCHES "^(0|[1-9][0-9]*)$")
            message(FATAL_ERROR "${row}: ${size} \"${${size}}\" is not a count (0: any)")
        endif ()
    endforeach ()
    if ((LEVELS EQUAL 0) AND NOT (POINTS EQUAL 0) OR NOT (LEVELS EQUAL 0) AND (POINTS EQUAL 0))
        message(FATAL_ERROR "${row}: levels and points are both compile-time or both 0")
    endif ()
    if (KIND STREQUAL "relayout" AND NOT "${OP} ${LOCATIONS} ${CHANNELS} ${LEVELS} ${POINTS}" STREQUAL
                                         "msda ${DTYPE} 0 0 0")
        message(FATAL_ERROR "${row}: a relayout is msda, its locations its dtype, any channels, levels and points")
    endif ()
    if (NOT FAMILY MATCHES "^(cpu|opencl|cuda)$")
        message(FATAL_ERROR "${row}: family \"${FAMILY}\" is none of cpu, opencl, cuda")
    endif ()
    get_property(configs GLOBAL PROPERTY MSDA_SCHEDULE_CONFIGS)
    if (NOT CONFIG IN_LIST configs)
        message(FATAL_ERROR "${row}: config \"${CONFIG}\" is not defined (msda_schedule_config: ${configs})")
    endif ()
    if (NOT SET MATCHES "^(concurrency|full)$")
        message(FATAL_ERROR "${row}: set \"${SET}\" is neither concurrency nor full")
    endif ()

    get_property(rows GLOBAL PROPERTY MSDA_VARIANT_ROWS)
    if (NAME IN_LIST rows)
        message(FATAL_ERROR "${row}: a second row of that name")
    endif ()
    set(key "${FAMILY} ${OP} ${KIND} ${DTYPE} ${LOCATIONS} ${CHANNELS} ${LEVELS} ${POINTS}")
    string(MAKE_C_IDENTIFIER "${key}" key_id)
    get_property(holder GLOBAL PROPERTY MSDA_VARIANT_KEY_${key_id})
    if (holder)
        message(FATAL_ERROR "${row}: the same key (family op kind dtype locations channels levels points: ${key}) "
                            "as msda_variant(${holder}); the runtime could call only one")
    endif ()
    set_property(GLOBAL PROPERTY MSDA_VARIANT_KEY_${key_id} ${NAME})
    set_property(GLOBAL APPEND PROPERTY MSDA_VARIANT_ROWS ${NAME})

    # This tree's rows: its set, and the GPU families it builds.
    if (SET STREQUAL "full" AND NOT MSDA_VARIANT_SET STREQUAL "full")
        return()
    endif ()
    if ((FAMILY STREQUAL "opencl" AND NOT MSDA_OPENCL) OR (FAMILY STREQUAL "cuda" AND NOT MSDA_CUDA))
        return()
    endif ()

    if (FAMILY STREQUAL "opencl")
        set(targets ${MSDA_OPENCL_TARGET})
    elseif (FAMILY STREQUAL "cuda")
        set(targets ${MSDA_CUDA_TARGET})
    else ()
        set(targets ${MSDA_CPU_TARGETS})
        set(FAMILY ${MSDA_CPU_FAMILY})
    endif ()
    if (_msda_sanitizer_suffix)
        list(TRANSFORM targets APPEND "${_msda_sanitizer_suffix}")
    endif ()
    if (KIND STREQUAL "grad_value" AND FAMILY STREQUAL "opencl")
        set(targets "${targets}-cl_atomics64")
    endif ()

    set(halide_type_f32 float32)
    set(halide_type_f16 float16)
    set(halide_type_bf16 bfloat16)
    if (KIND STREQUAL "relayout")
        set(generator msda_relayout)
        set(params storage=${halide_type_${DTYPE}})
    else ()
        set(params channels=${CHANNELS} storage=${halide_type_${DTYPE}} locations=${halide_type_${LOCATIONS}}
                   op=${OP} levels=${LEVELS} points=${POINTS})
        if (KIND STREQUAL "forward")
            set(generator msda_forward)
        else ()
            set(generator msda_backward)
            string(REGEX REPLACE "^grad_" "" part "${KIND}")
            string(REGEX REPLACE "^value_(atomic|serial)$" "value" part "${part}")
            list(APPEND params part=${part})
            if (KIND STREQUAL "grad_value_atomic")
                list(APPEND params sum=float32_atomic)
            elseif (KIND STREQUAL "grad_value" AND FAMILY MATCHES "^(opencl|cuda)$")
                list(APPEND params sum=fixed_point)
            endif ()
        endif ()
    endif ()
    get_property(config_params GLOBAL PROPERTY MSDA_SCHEDULE_CONFIG_${CONFIG})
    list(APPEND params ${config_params})

    set(review_outputs "")
    if (MSDA_KEEP_STMT)
        set(review_outputs STMT ${NAME}_STMT)
    endif ()
    add_halide_library(${NAME}
        FROM msda::halide_generators::msda_generators
        GENERATOR ${generator}
        FUNCTION_NAME ${NAME}
        TARGETS ${targets}
        FEATURES ${MSDA_HALIDE_FEATURES}
        USE_RUNTIME msda_halide_runtime
        PARAMS ${params}
        ${review_outputs})
    set_property(GLOBAL APPEND PROPERTY MSDA_VARIANTS ${NAME})
    set_property(GLOBAL PROPERTY MSDA_VARIANT_ENTRY_${NAME}
        "MSDA_VARIANT(${NAME}, ${FAMILY}, ${KIND}, ${CHANNELS}, ${DTYPE}, ${LOCATIONS}, ${OP}, ${LEVELS}, ${POINTS})")
endfunction()

# Writes msda_variants.h: one X-macro line per variant (its name, the target
# family its library was compiled for, what it computes), and the includes.
function(msda_write_variant_header OUT)
    get_property(variants GLOBAL PROPERTY MSDA_VARIANTS)
    set(includes "")
    set(entries "")
    foreach (name IN LISTS variants)
        get_property(entry GLOBAL PROPERTY MSDA_VARIANT_ENTRY_${name})
        string(APPEND includes "#include \"${name}.h\"\n")
        string(APPEND entries "    ${entry} \\\n")
    endforeach ()
    # The CPU targets, best first, with their tiers (x86-64 is x86_64 in C++,
    # arm-64 arm_64).
    set(targets "")
    foreach (target tier IN ZIP_LISTS MSDA_CPU_TARGETS MSDA_CPU_TIERS)
        string(REPLACE "-" "_" tier "${tier}")
        string(APPEND targets "    MSDA_CPU_TARGET_ENTRY(\"${target}\", ${tier}) \\\n")
    endforeach ()
    file(WRITE "${OUT}.tmp"
        "// Generated by cmake/MsdaHalide.cmake from schedules/variants.cmake: the compiled variants.\n#pragma once\n"
        "${includes}\n#define MSDA_FOR_EACH_VARIANT(MSDA_VARIANT) \\\n${entries}\n"
        "#define MSDA_FOR_EACH_CPU_TARGET(MSDA_CPU_TARGET_ENTRY) \\\n${targets}\n")
    file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
endfunction()
