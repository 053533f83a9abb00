# The LibTorch operators (integrations/torch), msda/dlpack.hpp, the Python
# package and the training example; registered when libmsda_torch.so is built.
if (NOT TARGET msda_torch)
    return()
endif ()

msda_add_test(test_torch_operator torch test_torch_operator.cpp)
target_link_libraries(test_torch_operator PRIVATE msda::torch)
msda_uses_torch_headers(test_torch_operator)

find_path(MSDA_DLPACK_INCLUDE_DIR dlpack/dlpack.h DOC "DLPack's header (Debian's libdlpack-dev)")
if (MSDA_DLPACK_INCLUDE_DIR)
    msda_add_test(test_dlpack torch test_dlpack.cpp)
    target_include_directories(test_dlpack PRIVATE ${MSDA_DLPACK_INCLUDE_DIR})
    target_link_libraries(test_dlpack PRIVATE msda::torch)
    msda_uses_torch_headers(test_dlpack)
else ()
    add_test(NAME test_dlpack COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: dlpack/dlpack.h not found (apt install libdlpack-dev)")
    set_tests_properties(test_dlpack PROPERTIES LABELS torch SKIP_REGULAR_EXPRESSION "SKIPPED")
endif ()

# In a sanitizer tree Python (not instrumented) runs with AddressSanitizer's
# runtime preloaded, its own leaks at exit not reported.
set(_msda_python_sanitizer "")
if (MSDA_SANITIZER_PRELOAD)
    set(_msda_python_sanitizer ";LD_PRELOAD=${MSDA_SANITIZER_PRELOAD};ASAN_OPTIONS=detect_leaks=0")
endif ()
if (MSDA_TORCH_PYTHON)
    add_test(NAME torch_python COMMAND ${MSDA_TORCH_PYTHON} -m unittest -v test_msda_torch
        WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python)
    set_tests_properties(torch_python PROPERTIES LABELS torch TIMEOUT 300
        ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;MSDA_TORCH_LIBRARY=${_msda_python_sanitizer}")
    # The peers' gradcheck recipe in double at C_h 1025, 2048 and 3096
    # (minutes: labels slow and gradcheck_wide, ./dev test --all --label
    # gradcheck_wide); the default run checks C_h 1 to 71.
    add_test(NAME torch_python_gradcheck_wide COMMAND ${MSDA_TORCH_PYTHON} -m unittest -v
        test_msda_torch.DoublePrecision.test_gradcheck_at_its_defaults_wide
        WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python)
    set_tests_properties(torch_python_gradcheck_wide PROPERTIES LABELS "torch;slow;gradcheck_wide" TIMEOUT 1800
        ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;MSDA_GRADCHECK_WIDE=1;MSDA_TORCH_LIBRARY=${_msda_python_sanitizer}")
    # CUDA tensors: SKIPPED where torch has no CUDA device (Debian's torch
    # has none; bench/device_check.sh runs it with PyPI's on a GPU).
    add_test(NAME torch_python_cuda COMMAND ${MSDA_TORCH_PYTHON} -m unittest -v test_msda_torch_cuda
        WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python)
    set_tests_properties(torch_python_cuda PROPERTIES LABELS torch TIMEOUT 300
        ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;MSDA_TORCH_LIBRARY=${_msda_python_sanitizer}"
        SKIP_REGULAR_EXPRESSION "${MSDA_SKIP_PATTERN}")
else ()
    add_test(NAME torch_python COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: no python3 imports torch (apt install python3-torch)")
    set_tests_properties(torch_python PROPERTIES LABELS torch SKIP_REGULAR_EXPRESSION "SKIPPED")
endif ()

# The same suite and test_msda_torch2 (opcheck, torch.compile, torch.export)
# against PyPI's torch 2.x, built into .venv-torch2 on first use (about 5
# GB): labels torch2 and slow, outside the default run (./dev test --all
# --label torch2).
if (NOT MSDA_SANITIZER_PRELOAD)
    add_test(NAME torch2_python COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/scripts/torch2_suite.sh ${CMAKE_BINARY_DIR})
    set_tests_properties(torch2_python PROPERTIES LABELS "torch2;slow" TIMEOUT 1800)
endif ()

# pip install: a wheel built in a fresh virtual environment over
# MSDA_TORCH_PYTHON's torch, installed, and the Python suite run against it
# (tests/scripts/wheel_suite.sh). It links this tree's generated libraries
# (MSDA_KERNELS_ROOT) instead of generating them again, to keep it within
# CI's time; the build a user's pip install runs generates its own.
if (MSDA_TORCH_PYTHON AND NOT MSDA_SANITIZER_PRELOAD AND NOT CMAKE_CROSSCOMPILING)
    add_test(NAME wheel_python COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/scripts/wheel_suite.sh ${CMAKE_BINARY_DIR}
        ${MSDA_TORCH_PYTHON})
    set_tests_properties(wheel_python PROPERTIES LABELS "torch;wheel" TIMEOUT 1500
        SKIP_REGULAR_EXPRESSION "SKIPPED")
endif ()

add_test(NAME train_deformable_layer
    COMMAND ${CMAKE_COMMAND} -D EXAMPLE=$<TARGET_FILE:train_deformable_layer>
        -D WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/train_deformable_layer -D STEPS=50 -D MIN_DROP=4
        -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/run_training_example.cmake)
set_tests_properties(train_deformable_layer PROPERTIES LABELS torch TIMEOUT 300)
