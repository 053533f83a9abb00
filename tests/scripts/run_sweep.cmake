# A tiny sweep (T0, two searched candidates a kernel, Halide's
# autoschedulers on the forward) into a copy of a tuned file that holds
# another class's row, in two runs, the second resumed from the first's
# CSV: every kernel's shipped configuration must pass its reference check,
# each autoscheduler must be reported, the CSV, table and plot must be
# written, the other class's row kept, and the file must still be one the
# build accepts (check_tuned.cmake).
# cmake -D SWEEP=... -D GENERATOR=... -D SOURCE_DIR=... -D WORK_DIR=... -P run_sweep.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(tuned ${WORK_DIR}/tuned.cmake)
file(WRITE ${tuned} "# A test's tuned file.\n\nmsda_tuned(avx2 forward query_tile=32 tasks_per_batch=8)\n")
set(sweep ${SWEEP} --target x86 --class x86-64 --shapes T0 --max-candidates 2 --rounds 2 --out ${WORK_DIR}/out
          --winners ${tuned})

# The forward with the autoschedulers (10 s each at most), then the two
# backward kernels without them, resumed from the first run's CSV. A
# resumed run's budget counts the first run's time (the forward's took
# 81 s of 2 minutes under ctest -j2 once, leaving grad_sample none; on an
# AVX2-only EPYC VM the forward's shipped check took 31 s and each
# autoscheduler its 10 s, so a 1-minute budget left no searched candidate):
# the budgets leave room on a slow machine, and --max-candidates ends both
# runs early on a fast one.
execute_process(COMMAND ${sweep} --op forward --budget 3 --autoscheduler-seconds 10
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if (NOT rc EQUAL 0)
    message(FATAL_ERROR "msda_sweep --op forward failed (${rc})")
endif ()
file(STRINGS ${WORK_DIR}/out/candidates.csv rows)
list(LENGTH rows first_count)
math(EXPR first_rows "${first_count} - 1")  # less the header
foreach (autoscheduler IN ITEMS Adams2019 Li2018 Mullapudi2016)
    if (NOT rows MATCHES "(^|;)forward,[0-9]+,autoscheduler,${autoscheduler},")
        message(FATAL_ERROR "no ${autoscheduler} row of the forward in candidates.csv")
    endif ()
endforeach ()
execute_process(COMMAND ${sweep} --op backward --budget 8 --no-autoschedulers --resume
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if (NOT rc EQUAL 0)
    message(FATAL_ERROR "msda_sweep --op backward --resume failed (${rc})")
endif ()
if (NOT out MATCHES "resumed ${first_rows} candidates")
    message(FATAL_ERROR "msda_sweep --resume did not read the ${first_rows} candidates of the first run")
endif ()
file(STRINGS ${WORK_DIR}/out/candidates.csv rows)
foreach (kernel IN ITEMS forward grad_value grad_sample)
    if (NOT rows MATCHES "(^|;)${kernel},1,shipped,,[^,]*,ok,")
        message(FATAL_ERROR "no shipped row of ${kernel} that passed its check in candidates.csv")
    endif ()
    if (NOT rows MATCHES "(^|;)${kernel},[0-9]+,(random|mutation),")
        message(FATAL_ERROR "no searched candidate of ${kernel} in candidates.csv")
    endif ()
endforeach ()
file(READ ${WORK_DIR}/out/table.md table)
if (NOT table MATCHES "\\| forward \\| shipped #1 \\|")
    message(FATAL_ERROR "table.md has no shipped forward row:\n${table}")
endif ()
file(READ ${WORK_DIR}/out/plot.svg plot)
if (NOT plot MATCHES "^<svg " OR NOT plot MATCHES "<circle ")
    message(FATAL_ERROR "plot.svg is no plot of the candidates")
endif ()
file(READ ${tuned} text)
if (NOT text MATCHES "msda_tuned\\(avx2 forward query_tile=32 tasks_per_batch=8\\)")
    message(FATAL_ERROR "the sweep of x86-64 lost avx2's row:\n${text}")
endif ()
execute_process(COMMAND ${CMAKE_COMMAND} -D SOURCE_DIR=${SOURCE_DIR} -D TUNED=${tuned} -D GENERATOR=${GENERATOR}
                        -D WORK_DIR=${WORK_DIR}/generated -D MIN_ROWS=1 -P ${CMAKE_CURRENT_LIST_DIR}/check_tuned.cmake
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if (NOT rc EQUAL 0)
    message(FATAL_ERROR "the winners file is not one the build accepts")
endif ()
