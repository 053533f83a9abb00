# Trains examples/train_deformable_layer.cpp briefly, twice on 1 thread and
# twice on 2: the loss must fall by MIN_DROP, and the two runs on each thread
# count must give bitwise the same loss curve.
# cmake -D EXAMPLE=... -D WORK_DIR=... -D STEPS=... -D MIN_DROP=... -P run_training_example.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

foreach (threads IN ITEMS 1 2)
    foreach (run IN ITEMS first second)
        set(curve ${WORK_DIR}/losses-${threads}-threads-${run}.txt)
        execute_process(COMMAND ${EXAMPLE} --steps ${STEPS} --threads ${threads} --print-every 10 --losses ${curve}
            RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
        message(STATUS "${threads} threads, ${run} run:\n${out}")
        if (NOT rc EQUAL 0)
            message(FATAL_ERROR "train_deformable_layer failed (${rc})")
        endif ()
        if (NOT out MATCHES "loss fell from [0-9.]+ to [0-9.]+ \\(([0-9]+)\\.([0-9][0-9])x\\)")
            message(FATAL_ERROR "train_deformable_layer did not report the loss's drop")
        endif ()
        math(EXPR drop_hundredths "${CMAKE_MATCH_1} * 100 + 1${CMAKE_MATCH_2} - 100")
        math(EXPR wanted_hundredths "${MIN_DROP} * 100")
        if (drop_hundredths LESS wanted_hundredths)
            message(FATAL_ERROR "the loss fell ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}x in ${STEPS} steps, expected at least ${MIN_DROP}x")
        endif ()
        file(READ ${curve} losses_${threads}_${run})
    endforeach ()
    if (NOT losses_${threads}_first STREQUAL losses_${threads}_second)
        message(FATAL_ERROR "two runs on ${threads} threads gave different loss curves (${WORK_DIR})")
    endif ()
    string(REGEX MATCHALL "\n" lines "${losses_${threads}_first}")
    list(LENGTH lines count)
    if (NOT count EQUAL STEPS)
        message(FATAL_ERROR "${count} losses recorded, expected ${STEPS}")
    endif ()
    message(STATUS "${threads} threads: both runs gave the same ${count} losses, bit for bit")
endforeach ()
if (losses_1_first STREQUAL losses_2_first)
    message(STATUS "the curves on 1 and on 2 threads are the same bits too")
else ()
    # torch's own kernels (matrix products, reductions) may split work by
    # thread count; msda's results do not depend on it.
    message(STATUS "the curves on 1 and on 2 threads differ (torch's own kernels split work by thread count)")
endif ()
