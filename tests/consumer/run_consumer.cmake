# Installs a build of msda into a fresh prefix, checks what libmsda.so
# exports, then builds and runs the consumer project against that prefix.
# cmake -D MSDA_BUILD_DIR=... -D CONSUMER_SOURCE_DIR=... -D WORK_DIR=...
#       -D GENERATOR=... -D MAKE_PROGRAM=... -D C_COMPILER=... -D CXX_COMPILER=...
#       -D NM=... [-D TORCH=1 [-D TORCH_PYTHON=...]]
#       [-D SANITIZE=... [-D SANITIZER_PRELOAD=...]] -P run_consumer.cmake
# With TORCH (the build has libmsda_torch.so), the consumer also links
# msda::torch; with TORCH_PYTHON, that Python runs the installed package
# msda_torch. With SANITIZE (a sanitizer tree's MSDA_SANITIZE), the consumer
# is built with the same sanitizers (an instrumented libmsda.so needs their
# runtime in the program), and Python runs with SANITIZER_PRELOAD preloaded.
cmake_minimum_required(VERSION 3.20)

foreach (required IN ITEMS MSDA_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR)
    if (NOT DEFINED ${required})
        message(FATAL_ERROR "run_consumer.cmake needs -D ${required}=...")
    endif ()
endforeach ()

function(run_step what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if (NOT rc EQUAL 0)
        message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
    endif ()
    message(STATUS "${what}: ok")
    set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run_step("install into ${prefix}" ${CMAKE_COMMAND} --install ${MSDA_BUILD_DIR} --prefix ${prefix})

foreach (expected IN ITEMS include/msda/msda.hpp include/msda/msda.h)
    if (NOT EXISTS ${prefix}/${expected})
        message(FATAL_ERROR "the install lacks ${expected}")
    endif ()
endforeach ()
file(GLOB_RECURSE config_files ${prefix}/*/msdaConfig.cmake ${prefix}/*/msdaConfigVersion.cmake)
list(LENGTH config_files config_count)
if (NOT config_count EQUAL 2)
    message(FATAL_ERROR "the install lacks msdaConfig.cmake or its version file: ${config_files}")
endif ()

# Only the API may be exported: the Halide runtime and the generated variants
# (C functions named msdak_<variant>) stay inside the library.
file(GLOB_RECURSE libraries ${prefix}/*/libmsda.so)
if (NOT libraries)
    message(FATAL_ERROR "the install lacks libmsda.so")
endif ()
if (NM)
    list(GET libraries 0 library)
    run_step("list the exports of ${library}" ${NM} -D --defined-only ${library})
    string(REPLACE "\n" ";" exports "${step_output}")
    set(allowed_c_functions
        msda_default_options msda_contiguous msda_forward msda_backward msda_plan_create
        msda_plan_destroy msda_plan_workspace_size msda_plan_forward msda_plan_backward
        msda_set_num_threads msda_last_error msda_cached_workspace_bytes msda_release_cached_workspace
        msda_version msda_cpu_target msda_opencl_queue msda_release_opencl_context msda_release_cuda_context
        msda_abi_version)
    set(unexpected "")
    set(exported_c_functions "")
    foreach (line IN LISTS exports)
        if (line MATCHES "^[0-9a-fA-F]* +[A-Za-z] +([^ ]+)$")
            set(symbol ${CMAKE_MATCH_1})
            if (symbol IN_LIST allowed_c_functions)
                list(APPEND exported_c_functions ${symbol})
            endif ()
            if (symbol MATCHES "^_Z")
                # C++ symbols: the version script admits namespace msda only.
                if (NOT symbol MATCHES "4msda")
                    list(APPEND unexpected ${symbol})
                endif ()
            elseif (NOT symbol IN_LIST allowed_c_functions)
                list(APPEND unexpected ${symbol})
            endif ()
        endif ()
    endforeach ()
    if (unexpected)
        list(JOIN unexpected "\n  " unexpected)
        message(FATAL_ERROR "libmsda.so exports symbols outside the API:\n  ${unexpected}")
    endif ()
    foreach (function IN LISTS allowed_c_functions)
        if (NOT function IN_LIST exported_c_functions)
            message(FATAL_ERROR "libmsda.so does not export ${function}")
        endif ()
    endforeach ()
endif ()

set(configure_args -S ${CONSUMER_SOURCE_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix}
    -DMSDA_EXPECTED_PREFIX=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if (TORCH)
    list(APPEND configure_args -DMSDA_CONSUMER_TORCH=ON)
endif ()
if (MAKE_PROGRAM)
    list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif ()
if (C_COMPILER)
    list(APPEND configure_args -DCMAKE_C_COMPILER=${C_COMPILER})
endif ()
if (CXX_COMPILER)
    list(APPEND configure_args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif ()
set(python_env "")
if (SANITIZE)
    string(REPLACE ";" "," sanitizers "${SANITIZE}")
    # The C program links the sanitizers' C++ runtime too (libmsda is C++),
    # and with it the C++ library that runtime needs (CMake's check of the C
    # compiler links a C program with no libmsda).
    list(APPEND configure_args "-DCMAKE_C_FLAGS=-fsanitize=${sanitizers}" "-DCMAKE_CXX_FLAGS=-fsanitize=${sanitizers}"
         "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${sanitizers} -fsanitize-link-c++-runtime -lstdc++")
    if (SANITIZER_PRELOAD)
        # Python itself is not instrumented, and keeps its objects at exit.
        set(python_env LD_PRELOAD=${SANITIZER_PRELOAD} ASAN_OPTIONS=detect_leaks=0)
    endif ()
endif ()
run_step("configure the consumer" ${CMAKE_COMMAND} ${configure_args})
run_step("build the consumer" ${CMAKE_COMMAND} --build ${consumer_build})
set(programs msda_consumer_cpp msda_consumer_c)
if (TORCH)
    list(APPEND programs msda_consumer_torch)
endif ()
foreach (program IN ITEMS ${programs})
    run_step("run ${program}" ${consumer_build}/${program})
    message(STATUS "${step_output}")
endforeach ()
if (TORCH_PYTHON)
    file(GLOB_RECURSE packages ${prefix}/*.py)
    list(FILTER packages INCLUDE REGEX "/msda_torch/__init__\\.py$")
    list(LENGTH packages package_count)
    if (NOT package_count EQUAL 1)
        message(FATAL_ERROR "the install holds ${package_count} copies of the Python package msda_torch: ${packages}")
    endif ()
    get_filename_component(package_dir ${packages} DIRECTORY)
    get_filename_component(python_path ${package_dir} DIRECTORY)
    run_step("run the installed Python package" ${CMAKE_COMMAND} -E env PYTHONPATH=${python_path} MSDA_TORCH_LIBRARY=
        ${python_env} ${TORCH_PYTHON} ${CONSUMER_SOURCE_DIR}/consumer_torch.py)
    message(STATUS "${step_output}")
    run_step("find where the installed package loads from" ${CMAKE_COMMAND} -E env PYTHONPATH=${python_path}
        MSDA_TORCH_LIBRARY= ${python_env} ${TORCH_PYTHON} -c "print(__import__('msda_torch').LIBRARY)")
    file(REAL_PATH "${prefix}" real_prefix)
    string(STRIP "${step_output}" loaded)
    file(REAL_PATH "${loaded}" loaded)
    string(FIND "${loaded}" "${real_prefix}/" at)
    if (NOT at EQUAL 0)
        message(FATAL_ERROR "the installed package loads ${loaded}, not the library installed under ${prefix}")
    endif ()
endif ()
