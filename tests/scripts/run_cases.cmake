# One ctest test for a GoogleTest binary's cases (MSDA_TEST_CASES=binary,
# tests/CMakeLists.txt): runs them in one process, under EMULATOR when set,
# prints the binary's output (GoogleTest lists each failed and each skipped
# case, with its reason) and a count, and
#   fails when the binary fails or its output has no GoogleTest summary,
#   prints MSDA_SKIPPED_BINARY_PATTERN's line (ctest reports SKIPPED) when
#   no case ran: the whole run skipped, every case skipped, or none matched,
#   passes otherwise.
# cmake -D BINARY=... [-D FILTER=gtest-filter] [-D EMULATOR=a|b|c] -P run_cases.cmake
cmake_minimum_required(VERSION 3.20)
set(command "")
if (EMULATOR)
    string(REPLACE "|" ";" command "${EMULATOR}")
endif ()
list(APPEND command "${BINARY}")
if (FILTER)
    list(APPEND command "--gtest_filter=${FILTER}")
endif ()
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
get_filename_component(name "${BINARY}" NAME)
if (NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} ${FILTER}: exit status ${rc}")
endif ()
if (NOT out MATCHES "\\[==========\\] ([0-9]+) tests? from [0-9]+ test suites? ran")
    message(FATAL_ERROR "${name} ${FILTER}: no GoogleTest summary in its output")
endif ()
set(ran ${CMAKE_MATCH_1})
set(passed 0)
if (out MATCHES "\\[  PASSED  \\] ([0-9]+) tests?\\.")
    set(passed ${CMAKE_MATCH_1})
endif ()
set(skipped 0)
if (out MATCHES "\\[  SKIPPED \\] ([0-9]+) tests?, listed below")
    set(skipped ${CMAKE_MATCH_1})
endif ()
if (out MATCHES "msda tests: the whole run is SKIPPED" OR passed EQUAL 0)
    # The line ctest's SKIP_REGULAR_EXPRESSION matches, printed only here.
    message("msda ctest: no case of this run ran (${ran} selected, ${skipped} skipped)")
else ()
    message("${name} ${FILTER}: ${passed} of ${ran} cases passed, ${skipped} SKIPPED (listed above with the reason)")
endif ()
