# Every instruction of the generated code against the CPU features msda
# requires of the CPUs it runs each target on (iced-x86 from .venv decodes
# the objects; see tests/check_target_instructions.py).
if (TARGET msda_cli)
    find_program(MSDA_VENV_PYTHON python3 PATHS ${CMAKE_SOURCE_DIR}/.venv/bin NO_DEFAULT_PATH REQUIRED)
    add_test(NAME generated_code_needs_only_its_targets_features
        COMMAND ${MSDA_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_target_instructions.py
            --msda $<TARGET_FILE:msda_cli>
            --objects ${CMAKE_BINARY_DIR}/generators
            --runtime ${CMAKE_BINARY_DIR}/msda_halide_runtime.o)
    set_tests_properties(generated_code_needs_only_its_targets_features PROPERTIES LABELS core)
endif ()
