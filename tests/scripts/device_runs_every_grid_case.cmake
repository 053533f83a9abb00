# The device registration of a suite (tests/CMakeLists.txt,
# msda_run_on_device) runs every case of its CPU grid: lists the suite's
# cases under the device's filter and under GRID (a GoogleTest pattern, the
# grid the CPU runs), and fails naming each grid case the device would not
# run, less those matching HALF (a regular expression: the half-precision
# dtypes, which the GPU families refuse and test apart).
# cmake -D SUITE=... -D FILTER=... -D GRID=... [-D HALF=...] -P device_runs_every_grid_case.cmake
cmake_minimum_required(VERSION 3.20)

# The full names (Suite.Case) GoogleTest lists under a filter.
function(list_cases filter out)
    execute_process(COMMAND ${SUITE} --gtest_list_tests "--gtest_filter=${filter}"
        RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE errors)
    if (NOT rc EQUAL 0)
        message(FATAL_ERROR "${SUITE} --gtest_list_tests failed (${rc}): ${errors}")
    endif ()
    string(REPLACE ";" "," text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    set(cases "")
    set(suite "")
    foreach (line IN LISTS lines)
        string(REGEX REPLACE "[ ]+#.*$" "" line "${line}")
        if (line MATCHES "^([^ ].*\\.)$")
            set(suite "${CMAKE_MATCH_1}")
        elseif (line MATCHES "^  ([^ ]+)$")
            list(APPEND cases "${suite}${CMAKE_MATCH_1}")
        endif ()
    endforeach ()
    set(${out} "${cases}" PARENT_SCOPE)
endfunction()

list_cases("${GRID}" grid_cases)
list_cases("${FILTER}" device_cases)
list(LENGTH grid_cases grid_count)
if (grid_count EQUAL 0)
    message(FATAL_ERROR "${SUITE}: no case matches the grid's pattern ${GRID}")
endif ()
set(missing "")
set(checked 0)
foreach (case IN LISTS grid_cases)
    if (DEFINED HALF AND case MATCHES "${HALF}")
        continue ()
    endif ()
    math(EXPR checked "${checked} + 1")
    if (NOT case IN_LIST device_cases)
        list(APPEND missing "${case}")
    endif ()
endforeach ()
if (missing)
    list(JOIN missing "\n  " missing)
    message(FATAL_ERROR "${SUITE}: the device's filter (${FILTER}) leaves out these cases of the CPU grid:\n  ${missing}")
endif ()
message(STATUS "${SUITE}: all ${checked} float32 cases of the grid ${GRID} are among the device's")
