# The README's snippets marked with their source are that source (which the
# suite builds and runs): tests/check_readme_snippets.py.
find_program(MSDA_VENV_PYTHON python3 PATHS ${CMAKE_SOURCE_DIR}/.venv/bin NO_DEFAULT_PATH REQUIRED)
add_test(NAME readme_snippets_are_tested_code
    COMMAND ${MSDA_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_readme_snippets.py --root ${CMAKE_SOURCE_DIR})
set_tests_properties(readme_snippets_are_tested_code PROPERTIES LABELS core)
