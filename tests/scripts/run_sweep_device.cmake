# A tiny sweep of the forward on another target (T0, one searched
# candidate): its shipped configuration and the candidate must pass the
# reference check there (ARM: compiled for arm-64-linux and run under
# qemu-aarch64; OpenCL: on this machine's platform), and a target that is
# not timed must leave the tuned file as it was.
# cmake -D SWEEP=... -D SWEEP_TARGET=arm|opencl -D WORK_DIR=... -P run_sweep_device.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(tuned ${WORK_DIR}/tuned.cmake)
file(WRITE ${tuned} "# A test's tuned file.\n")
execute_process(COMMAND ${SWEEP} --target ${SWEEP_TARGET} --shapes T0 --op forward --budget 1 --max-candidates 1 --rounds 2
                        --no-autoschedulers --out ${WORK_DIR}/out --winners ${tuned}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if (NOT rc EQUAL 0)
    message(FATAL_ERROR "msda_sweep --target ${SWEEP_TARGET} failed (${rc})")
endif ()
file(STRINGS ${WORK_DIR}/out/candidates.csv rows)
if (NOT rows MATCHES "(^|;)forward,1,shipped,,[^,]*,ok,")
    message(FATAL_ERROR "the shipped forward did not pass its check on ${SWEEP_TARGET}")
endif ()
if (NOT rows MATCHES "(^|;)forward,2,random,,[^;]*,ok,")
    message(FATAL_ERROR "the searched candidate did not pass its check on ${SWEEP_TARGET}")
endif ()
file(READ ${tuned} text)
if (SWEEP_TARGET STREQUAL "arm" AND NOT text STREQUAL "# A test's tuned file.\n")
    message(FATAL_ERROR "a sweep that times nothing changed the tuned file:\n${text}")
endif ()
