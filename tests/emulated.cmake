# The emulated suite (label "emulated", in the default run; alone with
# `ctest -L emulated`): a slice of the reference-checked suites and the
# command line's forward and backward, run under qemu-x86_64 as CPUs other
# than the build machine's, with MSDA_X86_TARGET unset, so the library
# chooses its code from the emulated CPU's own cpuid words. Each run also
# asserts the target it picked (MSDA_EXPECT_X86_TARGET, checked before the
# first test by expected_target.cpp; the command line's through msda info).
# QEMU 7.2 executes AVX2 but not AVX-512, so the models are ones without
# AVX-512 and one without AVX.
#
# The slice (about a third of the float32 grid, a few cases of each other
# suite) keeps the suite near two minutes on two cores: QEMU runs this
# code 10 to 100 times slower than the CPU (most of all the AVX2 code under
# the Haswell model), and the whole suite under three models would take an
# hour.
find_program(MSDA_QEMU_X86_64 qemu-x86_64)

set(_msda_emulated_models
    "Haswell-v4|avx2"      # Intel, AVX2 and FMA, no AVX-512
    "EPYC-Milan-v1|avx2"   # AMD Zen 3
    "Nehalem-v1|x86-64")   # SSE4.2, no AVX

# suite|test binary|--gtest_filter
set(_msda_emulated_slices
    "grid|test_forward_backward|Grid/ForwardBackwardGrid.MatchesReference/*:Channels/OnlyWhatIsAskedFor.*:-*c17_six_levels_p17_q300_inside:*c17_six_levels_p17_q300_outside:*c17_six_levels_p17_q300_pixel_centres:*c17_six_levels_p17_q300_gate_boundary:*c17_six_levels_p17_q300_far_outside:*c32_detr_q300_outside:*c32_detr_q300_pixel_centres:*c32_detr_q300_gate_boundary:*c32_detr_q300_non_finite:*c32_detr_q300_far_outside"
    "half_precision|test_half_precision|Grid/HalfPrecisionGrid.MatchesReference/c32_detr_q300_inside*:Grid/HalfPrecisionGrid.MatchesReference/c3_lines_outside*:Grid/HalfPrecisionGrid.MatchesReference/c64_six_levels_padded_far_outside*"
    "gka|test_gka|Gka.*:Grid/GkaGrid.MatchesReference/c3_lines*:Grid/GkaGrid.MatchesReference/c32_detr*:Grid/GkaGrid.MatchesReference/c8_pyramid*"
    "sample_order|test_sample_order|Grid/ByQueryGrid.*inside*:Grid/ByQueryGrid.*non_finite*"
    "relayout|test_relayout|Grid/RelayoutGrid.StagedMatchesUnstagedBitwise/c8_pyramid_q300_inside_*:Grid/RelayoutGrid.StagedMatchesUnstagedBitwise/c32_b3_q1_padded_*:Relayout.GkaStagedMatchesUnstagedBitwise"
    "x86_cpu|test_x86_cpu|ThisCpu.*"
    "determinism|test_determinism|Colliding/Determinism.*c17_zeros_float32:Colliding/Determinism.*c32_border_bfloat16")
# The command line runs under QEMU; the harness and its reference do not.
set(_msda_emulated_cli_filter
    "EveryLayout/CliLayouts.*:EveryStorage/CliHalfPrecision.*:BothRoundings/CliGka.*:Cli.InfoNamesTheTargetThisCpuRuns:CliRejects.ACapAboveTheCpuNamesWhatItLacks")

# A sanitizer tree leaves this suite to build/: it is about which code a CPU
# gets, which the sanitizers do not change, and an instrumented program
# cannot map its shadow memory under qemu-user.
if (MSDA_SANITIZE)
    add_test(NAME emulated_cpus COMMAND ${CMAKE_COMMAND} -E echo
        "SKIPPED: a sanitizer tree (MSDA_SANITIZE=${MSDA_SANITIZE}) cannot run under qemu-user; build/ runs this suite")
    set_tests_properties(emulated_cpus PROPERTIES LABELS emulated SKIP_REGULAR_EXPRESSION "SKIPPED")
    return()
endif ()
if (NOT MSDA_QEMU_X86_64)
    add_test(NAME emulated_cpus COMMAND ${CMAKE_COMMAND} -E echo
        "SKIPPED: qemu-x86_64 is not installed (scripts/setup.sh installs Debian's qemu-user)")
    set_tests_properties(emulated_cpus PROPERTIES LABELS emulated SKIP_REGULAR_EXPRESSION "SKIPPED")
    return()
endif ()

foreach (model_entry IN LISTS _msda_emulated_models)
    string(REPLACE "|" ";" model_parts "${model_entry}")
    list(GET model_parts 0 model)
    list(GET model_parts 1 expected)
    foreach (slice IN LISTS _msda_emulated_slices)
        string(REPLACE "|" ";" slice_parts "${slice}")
        list(GET slice_parts 0 suite)
        list(GET slice_parts 1 binary)
        list(GET slice_parts 2 filter)
        add_test(NAME emulated.${model}.${suite}
            COMMAND ${MSDA_QEMU_X86_64} -cpu ${model} $<TARGET_FILE:${binary}> --gtest_filter=${filter})
        set_tests_properties(emulated.${model}.${suite} PROPERTIES
            LABELS emulated
            TIMEOUT 600
            ENVIRONMENT "MSDA_EXPECT_X86_TARGET=${expected}"
            ENVIRONMENT_MODIFICATION "MSDA_X86_TARGET=unset:")
    endforeach ()
    if (TARGET test_cli)
        add_test(NAME emulated.${model}.cli
            COMMAND $<TARGET_FILE:test_cli> --gtest_filter=${_msda_emulated_cli_filter})
        set_tests_properties(emulated.${model}.cli PROPERTIES
            LABELS emulated
            TIMEOUT 600
            ENVIRONMENT "MSDA_CLI_EMULATOR=${MSDA_QEMU_X86_64} -cpu ${model};MSDA_CLI_EXPECT_X86_TARGET=${expected}"
            ENVIRONMENT_MODIFICATION "MSDA_X86_TARGET=unset:")
    endif ()
endforeach ()
