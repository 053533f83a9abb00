# Ahead-of-time instantiation of msda's generators.
#
# Shipped x86 libraries are multi-target: the generated code picks the best
# of avx512_zen4, avx2 and plain x86-64 at run time. Never `host`.
set(MSDA_X86_TARGETS
    x86-64-linux-avx512_zen4
    x86-64-linux-avx-avx2-f16c-fma-sse41
    x86-64-linux
    CACHE STRING "Halide targets of the x86 libraries, best first")
# Each x86 target belongs to one of the tiers the runtime's CPU check knows
# (runtime/src/x86_cpu.cpp lists the CPU features each tier's code may use):
# x86-64 (the baseline), avx2 (sse41, avx, avx2, fma, f16c) and avx512_zen4.
# msda_x86_tier(HALIDE_TARGET OUT) sets OUT to its tier, or fails: a target
# whose code the runtime could not match to a CPU check must not be built.
function(msda_x86_tier HALIDE_TARGET OUT)
    if (NOT HALIDE_TARGET MATCHES "^x86-64-linux(-.*)?$")
        message(FATAL_ERROR "MSDA_X86_TARGETS: ${HALIDE_TARGET} is not an x86-64-linux target")
    endif ()
    string(REGEX REPLACE "^x86-64-linux-?" "" features "${HALIDE_TARGET}")
    string(REPLACE "-" ";" features "${features}")
    set(tier x86-64)
    foreach (feature IN LISTS features)
        if (feature STREQUAL "avx512_zen4")
            set(tier avx512_zen4)
        elseif (feature MATCHES "^(sse41|avx|avx2|fma|f16c)$")
            if (tier STREQUAL "x86-64")
                set(tier avx2)
            endif ()
        else ()
            message(FATAL_ERROR "MSDA_X86_TARGETS: ${HALIDE_TARGET}: msda's CPU check knows no tier for the feature "
                                "\"${feature}\" (known: sse41 avx avx2 fma f16c avx512_zen4)")
        endif ()
    endforeach ()
    set(${OUT} ${tier} PARENT_SCOPE)
endfunction()

# The tiers of MSDA_X86_TARGETS, which must run from best to worst: the
# multi-target wrapper takes the first the CPU may run, and runs the last
# without asking.
set(MSDA_X86_TIERS "")
set(_msda_rank_avx512_zen4 2)
set(_msda_rank_avx2 1)
set(_msda_rank_x86-64 0)
set(_msda_previous_rank 3)
foreach (target IN LISTS MSDA_X86_TARGETS)
    msda_x86_tier(${target} tier)
    if (NOT _msda_rank_${tier} LESS _msda_previous_rank)
        message(FATAL_ERROR "MSDA_X86_TARGETS must list targets best first, one per tier: ${MSDA_X86_TARGETS}")
    endif ()
    set(_msda_previous_rank ${_msda_rank_${tier}})
    list(APPEND MSDA_X86_TIERS ${tier})
endforeach ()

# user_context: errors reach the calling thread's msda::Error.
# large_buffers: 64-bit index arithmetic for tensors past 2^31 elements.
set(MSDA_HALIDE_FEATURES user_context large_buffers)

add_halide_runtime(msda_halide_runtime TARGETS ${MSDA_X86_TARGETS})

# The variants the runtime can dispatch to; msda_variants.h lists them.
set_property(GLOBAL PROPERTY MSDA_VARIANTS "")

# msda_add_variant(NAME GENERATOR gen KIND kind CHANNELS c
#                  [DTYPE f32|f16|bf16] [LOCATIONS f32|f16|bf16] [PARAMS ...])
#   KIND: forward | grad_value | grad_sample | grad_attention_weights
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
function(msda_add_variant NAME)
    cmake_parse_arguments(ARG "" "GENERATOR;KIND;CHANNELS;DTYPE;LOCATIONS;OP;LEVELS;POINTS" "PARAMS" ${ARGN})
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
    add_halide_library(${NAME}
        FROM msda_generators
        GENERATOR ${ARG_GENERATOR}
        FUNCTION_NAME ${NAME}
        TARGETS ${MSDA_X86_TARGETS}
        FEATURES ${MSDA_HALIDE_FEATURES}
        USE_RUNTIME msda_halide_runtime
        PARAMS ${params}
        STMT ${NAME}_STMT)
    set_property(GLOBAL APPEND PROPERTY MSDA_VARIANTS
                 "${NAME}|${ARG_KIND}|${ARG_CHANNELS}|${ARG_DTYPE}|${ARG_LOCATIONS}|${ARG_OP}|${ARG_LEVELS}|${ARG_POINTS}")
endfunction()

# Writes msda_variants.h: one X-macro line per variant, and the includes.
function(msda_write_variant_header OUT)
    get_property(variants GLOBAL PROPERTY MSDA_VARIANTS)
    set(includes "")
    set(entries "")
    foreach (v IN LISTS variants)
        string(REPLACE "|" ";" parts "${v}")
        list(GET parts 0 name)
        list(GET parts 1 kind)
        list(GET parts 2 channels)
        list(GET parts 3 dtype)
        list(GET parts 4 locations)
        list(GET parts 5 op)
        list(GET parts 6 levels)
        list(GET parts 7 points)
        string(APPEND includes "#include \"${name}.h\"\n")
        string(APPEND entries
               "    MSDA_VARIANT(${name}, ${kind}, ${channels}, ${dtype}, ${locations}, ${op}, ${levels}, ${points}) \\\n")
    endforeach ()
    # The x86 targets, best first, with their tiers (x86-64 is x86_64 in C++).
    set(targets "")
    foreach (target tier IN ZIP_LISTS MSDA_X86_TARGETS MSDA_X86_TIERS)
        string(REPLACE "-" "_" tier "${tier}")
        string(APPEND targets "    MSDA_X86_TARGET_ENTRY(\"${target}\", ${tier}) \\\n")
    endforeach ()
    file(WRITE "${OUT}.tmp"
        "// Generated by cmake/MsdaHalide.cmake: the compiled variants.\n#pragma once\n"
        "${includes}\n#define MSDA_FOR_EACH_VARIANT(MSDA_VARIANT) \\\n${entries}\n"
        "#define MSDA_FOR_EACH_X86_TARGET(MSDA_X86_TARGET_ENTRY) \\\n${targets}\n")
    file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
endfunction()
