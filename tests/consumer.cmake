# The C API, and msda as an installed package: a fresh install of this build
# must be usable by a project that only does find_package(msda).
msda_add_test(test_c_api core test_c_api.cpp)

add_test(NAME consumer_find_package
    COMMAND ${CMAKE_COMMAND}
        -D MSDA_BUILD_DIR=${CMAKE_BINARY_DIR}
        -D CONSUMER_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/consumer
        -D WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer_find_package
        -D GENERATOR=${CMAKE_GENERATOR}
        -D MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
        -D C_COMPILER=${CMAKE_C_COMPILER}
        -D CXX_COMPILER=${CMAKE_CXX_COMPILER}
        -D NM=${CMAKE_NM}
        -D TORCH=$<TARGET_EXISTS:msda_torch>
        -D TORCH_PYTHON=$<$<TARGET_EXISTS:msda_torch>:${MSDA_TORCH_PYTHON}>
        "-D SANITIZE=${MSDA_SANITIZE}"
        -D SANITIZER_PRELOAD=${MSDA_SANITIZER_PRELOAD}
        -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer.cmake)
set_tests_properties(consumer_find_package PROPERTIES LABELS core TIMEOUT 600)
msda_add_test(test_c_api_layouts core test_c_api_layouts.cpp)
