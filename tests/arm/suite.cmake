# What the ARM libraries' suite (tests/CMakeLists.txt) adds to the shared
# fragments: the C API, the aarch64 CLI against the x86-64 one, and the
# family its variants list.
msda_add_test(test_c_api core test_c_api.cpp)
msda_add_test(test_c_api_layouts core test_c_api_layouts.cpp)

# The aarch64 command line against the x86-64 one of the host tree (which
# the cross tree imports its generators from) and a float64 reference.
if (TARGET msda_cli AND CMAKE_CROSSCOMPILING AND EXISTS "${msda-halide_generators_ROOT}/bin/msda")
    find_program(MSDA_NUMPY_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH DOC "Debian's python3 (numpy)")
    list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " _msda_emulator)
    add_test(NAME arm_cli_agrees_with_x86_and_reference
        COMMAND ${MSDA_NUMPY_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/arm/cli_agreement.py
            --arm-cli $<TARGET_FILE:msda_cli> --x86-cli ${msda-halide_generators_ROOT}/bin/msda
            --emulator "${_msda_emulator}" --work ${CMAKE_CURRENT_BINARY_DIR}/arm_cli_agreement)
    set_tests_properties(arm_cli_agrees_with_x86_and_reference PROPERTIES LABELS arm TIMEOUT 600)
endif ()

# The aarch64 CLI names its library's family: every generated function arm.
if (TARGET msda_cli)
    add_test(NAME arm_cli_lists_arm_variants COMMAND msda_cli info --variants)
    set_tests_properties(arm_cli_lists_arm_variants PROPERTIES LABELS arm
        PASS_REGULAR_EXPRESSION "\nmsdak_forward_c0 +arm +forward " FAIL_REGULAR_EXPRESSION "\n[a-z0-9_]+ +x86 ")
endif ()
