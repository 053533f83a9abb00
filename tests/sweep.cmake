# msda sweep: a tiny sweep end to end (tests/scripts/run_sweep.cmake), and
# the tuned file's rules: what a sweep writes, the build reads, and a second
# row of one class and schedule is refused.
if (TARGET msda_sweep)
    add_test(NAME sweep_writes_winners_the_build_accepts
        COMMAND ${CMAKE_COMMAND} -D SWEEP=$<TARGET_FILE:msda_sweep>
                -D GENERATOR=$<TARGET_FILE:msda::halide_generators::msda_generators> -D SOURCE_DIR=${CMAKE_SOURCE_DIR}
                -D WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/sweep -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/run_sweep.cmake)
    set_tests_properties(sweep_writes_winners_the_build_accepts PROPERTIES LABELS core TIMEOUT 600)

    # The other targets a sweep checks on: ARM under qemu (label arm), and
    # OpenCL on PoCL (label opencl).
    foreach (target IN ITEMS arm opencl)
        add_test(NAME sweep_checks_candidates_on_${target}
            COMMAND ${CMAKE_COMMAND} -D SWEEP=$<TARGET_FILE:msda_sweep> -D SWEEP_TARGET=${target}
                    -D WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/sweep_${target}
                    -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/run_sweep_device.cmake)
        set_tests_properties(sweep_checks_candidates_on_${target} PROPERTIES LABELS ${target} TIMEOUT 300)
    endforeach ()

    add_test(NAME knob_table_in_docs_is_the_codes
        COMMAND ${CMAKE_COMMAND} -D SWEEP=$<TARGET_FILE:msda_sweep> -D DOC=${CMAKE_SOURCE_DIR}/docs/knobs.md
                -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_knob_table.cmake)
    set_tests_properties(knob_table_in_docs_is_the_codes PROPERTIES LABELS core)

    add_test(NAME shipped_tuned_file_compiles
        COMMAND ${CMAKE_COMMAND} -D SOURCE_DIR=${CMAKE_SOURCE_DIR} -D TUNED=${CMAKE_SOURCE_DIR}/schedules/tuned.cmake
                -D GENERATOR=$<TARGET_FILE:msda::halide_generators::msda_generators>
                -D WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/tuned -D MIN_ROWS=0
                -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_tuned.cmake)
    set_tests_properties(shipped_tuned_file_compiles PROPERTIES LABELS core)

    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/tuned_twice.cmake
         "msda_tuned(avx2 forward query_tile=32)\nmsda_tuned(avx2 forward query_tile=8)\n")
    add_test(NAME tuned_file_refuses_two_rows_of_one_key
        COMMAND ${CMAKE_COMMAND} -D SOURCE_DIR=${CMAKE_SOURCE_DIR} -D TUNED=${CMAKE_CURRENT_BINARY_DIR}/tuned_twice.cmake
                -D GENERATOR=$<TARGET_FILE:msda::halide_generators::msda_generators>
                -D WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/tuned_twice -D MIN_ROWS=0
                -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_tuned.cmake)
    set_tests_properties(tuned_file_refuses_two_rows_of_one_key PROPERTIES LABELS core
        PASS_REGULAR_EXPRESSION "msda_tuned\\(avx2 forward\\): a second row of that class and schedule")
endif ()
