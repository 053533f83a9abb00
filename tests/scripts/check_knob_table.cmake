# docs/knobs.md holds the code's knob table (msda_sweep --list-knobs) between
# its markers: a knob added, renamed or re-ranged in schedules/knobs.cpp
# must be documented with it.
# cmake -D SWEEP=... -D DOC=... -P check_knob_table.cmake
cmake_minimum_required(VERSION 3.20)
execute_process(COMMAND ${SWEEP} --list-knobs RESULT_VARIABLE rc OUTPUT_VARIABLE table)
if (NOT rc EQUAL 0)
    message(FATAL_ERROR "msda_sweep --list-knobs failed (${rc})")
endif ()
file(READ ${DOC} doc)
string(REGEX MATCH "<!-- knob table: msda_sweep --list-knobs -->\n(.*)<!-- end of knob table -->" found "${doc}")
if (NOT found)
    message(FATAL_ERROR "${DOC} has no knob table between its markers")
endif ()
if (NOT CMAKE_MATCH_1 STREQUAL table)
    message(FATAL_ERROR "${DOC}'s knob table differs from the code's; the code's is:\n${table}")
endif ()
