# msda/dlpack.hpp on hand-made DLTensors, wherever libmsda builds (the torch
# exporter's tensors are test_dlpack's, tests/torch.cmake). DLPack's header
# is architecture-independent: a cross tree reads the build machine's.
find_path(MSDA_DLPACK_INCLUDE_DIR dlpack/dlpack.h DOC "DLPack's header (Debian's libdlpack-dev)")
if (MSDA_DLPACK_INCLUDE_DIR)
    msda_add_test(test_dlpack_views core test_dlpack_views.cpp)
    target_include_directories(test_dlpack_views PRIVATE ${MSDA_DLPACK_INCLUDE_DIR})
else ()
    add_test(NAME test_dlpack_views
        COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: dlpack/dlpack.h not found (apt install libdlpack-dev)")
    set_tests_properties(test_dlpack_views PROPERTIES LABELS core SKIP_REGULAR_EXPRESSION "SKIPPED")
endif ()
