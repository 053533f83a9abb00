# The msda command line: its .npy reader/writer on its own, and end-to-end
# runs of the built binary (build/bin/msda) checked against the reference.
if (TARGET msda_cli)
    msda_add_test(test_npy core test_npy.cpp)
    target_link_libraries(test_npy PRIVATE msda_npy)

    msda_add_test(test_cli core test_cli.cpp)
    target_link_libraries(test_cli PRIVATE msda_npy)
    # The suite runs the binary, so it must be built first and found by path.
    target_compile_definitions(test_cli PRIVATE MSDA_CLI_PATH="$<TARGET_FILE:msda_cli>")
    add_dependencies(test_cli msda_cli)
endif ()
