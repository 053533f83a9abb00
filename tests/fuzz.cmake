# The fuzz targets (tests/fuzz/): the C API (fuzz_c_api) and the command
# line's .npy reader (fuzz_npy), each with its seed corpus in
# tests/fuzz_corpus/.
#
# In a clang tree built with AddressSanitizer (the asan preset) they are
# libFuzzer programs, and the suite fuzzes each for MSDA_FUZZ_SECONDS (label
# fuzz, in the default run), starting from the seeds and the inputs earlier
# runs of this tree found (build-asan/fuzz/*_corpus). Anywhere else (gcc, the
# aarch64 tree) the same targets replay their seed corpus once (label core),
# a regression suite of the inputs fuzzing once found.
set(MSDA_FUZZ_SECONDS 60 CACHE STRING "How long the suite's bounded run fuzzes each target, in seconds")
set(_msda_fuzz_corpus ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_corpus)
set(_msda_libfuzzer OFF)
if ("address" IN_LIST MSDA_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(_msda_libfuzzer ON)
endif ()

# msda_add_fuzz_target(NAME CORPUS sources... LIBRARIES ...)
function(msda_add_fuzz_target NAME CORPUS)
    cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
    if (_msda_libfuzzer)
        add_executable(${NAME} ${ARG_SOURCES})
        target_compile_options(${NAME} PRIVATE -fsanitize=fuzzer)
        target_link_options(${NAME} PRIVATE -fsanitize=fuzzer)
    else ()
        add_executable(${NAME} ${ARG_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.cpp)
    endif ()
    target_link_libraries(${NAME} PRIVATE ${ARG_LIBRARIES})
    if (_msda_libfuzzer)
        # New inputs go to the first folder (the tree's own), never into the
        # source tree; a finding leaves its input in fuzz/ as crash-*. The
        # progress lines are off (-verbosity=0) so that a finding's report
        # (the harness's message, the decoded call MSDA_FUZZ_VERBOSE prints,
        # the sanitizer's trace and the input in base64) is what a failed
        # run shows.
        set(work ${CMAKE_BINARY_DIR}/fuzz)
        file(MAKE_DIRECTORY ${work}/${CORPUS}_corpus)
        add_test(NAME ${NAME}
            COMMAND ${NAME} -max_total_time=${MSDA_FUZZ_SECONDS} -timeout=30 -rss_limit_mb=4096 -verbosity=0
                -print_final_stats=1 -artifact_prefix=${work}/${NAME}-
                ${work}/${CORPUS}_corpus ${_msda_fuzz_corpus}/${CORPUS})
        set_tests_properties(${NAME} PROPERTIES LABELS fuzz TIMEOUT 600 ENVIRONMENT MSDA_FUZZ_VERBOSE=1)
    else ()
        add_test(NAME ${NAME}_corpus COMMAND ${NAME} ${_msda_fuzz_corpus}/${CORPUS})
        set_tests_properties(${NAME}_corpus PROPERTIES LABELS core)
        if (MSDA_CPU_FAMILY STREQUAL "arm")
            set_tests_properties(${NAME}_corpus PROPERTIES LABELS arm)
        endif ()
    endif ()
endfunction()

msda_add_fuzz_target(fuzz_c_api c_api SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_c_api.cpp
    LIBRARIES msda::msda msda_reference)
if (TARGET msda_npy)
    msda_add_fuzz_target(fuzz_npy npy SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_npy.cpp LIBRARIES msda_npy)
endif ()
