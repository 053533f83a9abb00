# The row functions of the declarative tables under schedules/: the CPU
# tiers (cpu_tiers.cmake), the schedule configurations and the tuned knob
# values (tuned.cmake). Function definitions only, so a script (cmake -P,
# tests/scripts/check_tuned.cmake) can read the tables as the build does.

# The tier table's rows (schedules/cpu_tiers.cmake describes them), kept in
# global properties: MSDA_TIERS_<family> the tiers worst first,
# MSDA_TIER_<family>_<tier>_HALIDE and _IMPLIED their Halide features,
# MSDA_ISA_FEATURES_<family>, and the lines of msda_cpu_tiers.h for the
# CPU features (MSDA_X86_CPUID_ENTRIES, MSDA_ARM_HWCAP_ENTRIES).
function(msda_cpu_tier FAMILY TIER)
    cmake_parse_arguments(ARG "" "" "HALIDE;IMPLIED" ${ARGN})
    set(row "msda_cpu_tier(${FAMILY} ${TIER})")
    if (NOT FAMILY MATCHES "^(x86|arm)$")
        message(FATAL_ERROR "${row}: the family is x86 or arm")
    endif ()
    if (ARG_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "${row}: unexpected ${ARG_UNPARSED_ARGUMENTS}")
    endif ()
    get_property(tiers GLOBAL PROPERTY MSDA_TIERS_${FAMILY})
    if (TIER IN_LIST tiers)
        message(FATAL_ERROR "${row}: a second row of that tier")
    endif ()
    if (NOT tiers AND (ARG_HALIDE OR ARG_IMPLIED))
        message(FATAL_ERROR "${row}: the first tier is the base every target has, made by no feature")
    endif ()
    if (tiers AND NOT ARG_HALIDE)
        message(FATAL_ERROR "${row}: a tier above the base needs the HALIDE features that make it")
    endif ()
    set_property(GLOBAL APPEND PROPERTY MSDA_TIERS_${FAMILY} ${TIER})
    set_property(GLOBAL PROPERTY MSDA_TIER_${FAMILY}_${TIER}_HALIDE ${ARG_HALIDE})
    set_property(GLOBAL PROPERTY MSDA_TIER_${FAMILY}_${TIER}_IMPLIED ${ARG_IMPLIED})
endfunction()

function(msda_cpu_isa_features FAMILY)
    set_property(GLOBAL PROPERTY MSDA_ISA_FEATURES_${FAMILY} ${ARGN})
endfunction()

# A tier's C++ name (x86-64 is x86_64, arm-64 arm_64), or a failure where the
# family has no such tier.
function(_msda_tier_id FAMILY TIER ROW OUT)
    get_property(tiers GLOBAL PROPERTY MSDA_TIERS_${FAMILY})
    if (NOT TIER IN_LIST tiers)
        message(FATAL_ERROR "${ROW}: ${FAMILY} has no tier ${TIER} (msda_cpu_tier: ${tiers})")
    endif ()
    string(REPLACE "-" "_" id "${TIER}")
    set(${OUT} ${id} PARENT_SCOPE)
endfunction()

function(msda_x86_cpuid NAME TIER LEAF SUBLEAF REGISTER BIT)
    cmake_parse_arguments(ARG "" "XCR0" "" ${ARGN})
    set(row "msda_x86_cpuid(${NAME})")
    _msda_tier_id(x86 ${TIER} "${row}" tier)
    if (NOT REGISTER MATCHES "^e[abcd]x$" OR NOT LEAF MATCHES "^0x[0-9a-f]+$" OR NOT SUBLEAF MATCHES "^[0-9]+$"
        OR NOT BIT MATCHES "^[0-9]+$" OR ARG_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "${row}: expected name tier leaf(0x...) subleaf register(eax..edx) bit [XCR0 mask]")
    endif ()
    if (NOT ARG_XCR0)
        set(ARG_XCR0 0x0)
    endif ()
    set_property(GLOBAL APPEND PROPERTY MSDA_X86_CPUID_ENTRIES
                 "MSDA_CPUID(\"${NAME}\", ${tier}, ${LEAF}u, ${SUBLEAF}, ${REGISTER}, ${BIT}, ${ARG_XCR0})")
endfunction()

function(msda_arm_hwcap NAME TIER BIT)
    set(row "msda_arm_hwcap(${NAME})")
    _msda_tier_id(arm ${TIER} "${row}" tier)
    if (NOT BIT MATCHES "^[0-9]+$" OR ARGN)
        message(FATAL_ERROR "${row}: expected name tier bit")
    endif ()
    set_property(GLOBAL APPEND PROPERTY MSDA_ARM_HWCAP_ENTRIES "MSDA_HWCAP(\"${NAME}\", ${tier}, ${BIT})")
endfunction()

# The knobs' values (schedules/knobs.h, docs/knobs.md) reach the generators
# as one parameter, knobs=CLASS@knob:value,...[/CLASS@...] (knobs_for_target
# picks the entry of the target it compiles for); each entry comes from a
# row of schedules/tuned.cmake, and a variant's configuration adds an `all`
# entry over every class.

# _msda_knob_settings(ROW OUT knob=value ...): the settings as knob:value,...
# (the generator checks the names and ranges).
function(_msda_knob_settings ROW OUT)
    set(settings "")
    foreach (setting IN LISTS ARGN)
        if (NOT setting MATCHES "^([a-z_]+)=(0|[1-9][0-9]*)$")
            message(FATAL_ERROR "${ROW}: \"${setting}\" is not knob=value (a count)")
        endif ()
        list(APPEND settings "${CMAKE_MATCH_1}:${CMAKE_MATCH_2}")
    endforeach ()
    list(JOIN settings "," settings)
    set(${OUT} "${settings}" PARENT_SCOPE)
endfunction()

# msda_schedule_config(NAME [knob=value ...]): a named set of knob values
# over every class, which a variant row names in its config column (over
# the tuned values). Defined once each.
function(msda_schedule_config NAME)
    set(row "msda_schedule_config(${NAME})")
    get_property(configs GLOBAL PROPERTY MSDA_SCHEDULE_CONFIGS)
    if (NAME IN_LIST configs)
        message(FATAL_ERROR "${row}: defined twice")
    endif ()
    _msda_knob_settings("${row}" settings ${ARGN})
    set_property(GLOBAL APPEND PROPERTY MSDA_SCHEDULE_CONFIGS ${NAME})
    set_property(GLOBAL PROPERTY MSDA_SCHEDULE_CONFIG_${NAME} "${settings}")
endfunction()

# msda_tuned(CLASS SCHEDULE knob=value ...): one row of schedules/tuned.cmake,
# the knob values a sweep chose for one schedule (forward, grad_value,
# grad_sample: also grad_attention_weights and grad_sampling_locations, which
# sum in the same order, or relayout) on one class: a CPU tier of
# schedules/cpu_tiers.cmake, opencl or cuda. A class without a row keeps the
# family's defaults; a second row of one class and schedule is an error.
set(MSDA_TUNED_SCHEDULES forward grad_value grad_sample relayout)
function(msda_tuned CLASS SCHEDULE)
    set(row "msda_tuned(${CLASS} ${SCHEDULE})")
    get_property(x86_tiers GLOBAL PROPERTY MSDA_TIERS_x86)
    get_property(arm_tiers GLOBAL PROPERTY MSDA_TIERS_arm)
    if (NOT CLASS IN_LIST x86_tiers AND NOT CLASS IN_LIST arm_tiers AND NOT CLASS MATCHES "^(opencl|cuda)$")
        message(FATAL_ERROR "${row}: the class is a CPU tier (${x86_tiers} ${arm_tiers}), opencl or cuda")
    endif ()
    if (NOT SCHEDULE IN_LIST MSDA_TUNED_SCHEDULES)
        message(FATAL_ERROR "${row}: the schedule is one of ${MSDA_TUNED_SCHEDULES}")
    endif ()
    get_property(rows GLOBAL PROPERTY MSDA_TUNED_ROWS)
    if ("${CLASS}/${SCHEDULE}" IN_LIST rows)
        message(FATAL_ERROR "${row}: a second row of that class and schedule")
    endif ()
    _msda_knob_settings("${row}" settings ${ARGN})
    set_property(GLOBAL APPEND PROPERTY MSDA_TUNED_ROWS "${CLASS}/${SCHEDULE}")
    set_property(GLOBAL PROPERTY MSDA_TUNED_${CLASS}_${SCHEDULE} "${settings}")
endfunction()

# _msda_knobs_param(KIND FAMILY CONFIG OUT): the knobs parameter of a variant
# of that kind and family (x86 or arm: the CPU family, opencl, cuda) and
# configuration: the tuned
# rows of the family's classes, best first, then the configuration's.
function(_msda_knobs_param KIND FAMILY CONFIG OUT)
    if (KIND MATCHES "^grad_value")
        set(schedule grad_value)
    elseif (KIND MATCHES "^grad_")
        set(schedule grad_sample)
    else ()
        set(schedule ${KIND})
    endif ()
    set(entries "")
    if (FAMILY MATCHES "^(x86|arm)$")
        get_property(tiers GLOBAL PROPERTY MSDA_TIERS_${FAMILY})
        list(REVERSE tiers)
        foreach (tier IN LISTS tiers)
            get_property(settings GLOBAL PROPERTY MSDA_TUNED_${tier}_${schedule})
            if (NOT settings)
                continue()
            endif ()
            # The class as the generator sees it: a Halide feature of the
            # tier (its name, where it is one), or base for the base tier.
            get_property(features GLOBAL PROPERTY MSDA_TIER_${FAMILY}_${tier}_HALIDE)
            if (NOT features)
                set(key base)
            elseif (tier IN_LIST features)
                set(key ${tier})
            else ()
                list(GET features 0 key)
            endif ()
            list(APPEND entries "${key}@${settings}")
        endforeach ()
    else ()
        get_property(settings GLOBAL PROPERTY MSDA_TUNED_${FAMILY}_${schedule})
        if (settings)
            list(APPEND entries "${FAMILY}@${settings}")
        endif ()
    endif ()
    get_property(settings GLOBAL PROPERTY MSDA_SCHEDULE_CONFIG_${CONFIG})
    if (settings)
        list(APPEND entries "all@${settings}")
    endif ()
    list(JOIN entries "/" param)
    set(${OUT} "${param}" PARENT_SCOPE)
endfunction()
