# The README's snippets marked with their source are that source (which the
# suite builds and runs): tests/check_readme_snippets.py.
find_program(MSDA_VENV_PYTHON python3 PATHS ${CMAKE_SOURCE_DIR}/.venv/bin NO_DEFAULT_PATH REQUIRED)
add_test(NAME readme_snippets_are_tested_code
    COMMAND ${MSDA_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_readme_snippets.py --root ${CMAKE_SOURCE_DIR})
set_tests_properties(readme_snippets_are_tested_code PROPERTIES LABELS core)

# The README's two examples, built and run: the C++ one (the core API only)
# exits 1 unless its results are the hand-worked ones, the PyTorch one unless
# msda_torch's output and gradients match a float64 grid_sample computation.
add_executable(readme_cpp_example ${CMAKE_SOURCE_DIR}/examples/quickstart.cpp)
target_link_libraries(readme_cpp_example PRIVATE msda::msda)
add_test(NAME readme_cpp_example_runs COMMAND readme_cpp_example)
set_tests_properties(readme_cpp_example_runs PROPERTIES LABELS core)

if (TARGET msda_torch AND MSDA_TORCH_PYTHON)
    # In a sanitizer tree Python (not instrumented) runs with AddressSanitizer's
    # runtime preloaded, its own leaks at exit not reported (as tests/torch.cmake).
    set(_msda_readme_python_env "PYTHONPATH=${CMAKE_BINARY_DIR}/python;MSDA_TORCH_LIBRARY=")
    if (MSDA_SANITIZER_PRELOAD)
        list(APPEND _msda_readme_python_env "LD_PRELOAD=${MSDA_SANITIZER_PRELOAD}" "ASAN_OPTIONS=detect_leaks=0")
    endif ()
    add_test(NAME readme_torch_example_runs
        COMMAND ${MSDA_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/examples/quickstart_torch.py)
    set_tests_properties(readme_torch_example_runs PROPERTIES LABELS torch TIMEOUT 300
        ENVIRONMENT "${_msda_readme_python_env}")
endif ()
