# The OpenCL target (label opencl), on this machine's OpenCL device (PoCL,
# Debian's pocl-opencl-icd, in CI): the float32 cases of the forward/backward
# grid, GKA and determinism suites (concurrent calls included) and the
# non-finite input edge cases with every call on Device::opencl
# (msda_run_on_device, tests/CMakeLists.txt), and test_opencl. Without an
# OpenCL device (or without MSDA_OPENCL) every one reports SKIPPED with the
# reason.
msda_add_test(test_opencl opencl test_opencl.cpp)
target_include_directories(test_opencl PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src)  # opencl.h, for the serial scatter's test
if (MSDA_OPENCL)
    # Device tensors: cl_mem made through the OpenCL API itself, as an engine
    # makes them (the ICD loader's headers and library, ocl-icd-opencl-dev).
    find_package(OpenCL REQUIRED)
    msda_add_test(test_opencl_tensors opencl test_opencl_tensors.cpp)
    target_include_directories(test_opencl_tensors PRIVATE ${MSDA_DLPACK_INCLUDE_DIR})
    target_link_libraries(test_opencl_tensors PRIVATE OpenCL::OpenCL)
endif ()
# No platform: the ICD loader pointed at an empty vendor directory.
add_test(NAME opencl_without_platform_is_an_error COMMAND test_opencl --gtest_filter=OpenClMissing.*)
set_tests_properties(opencl_without_platform_is_an_error PROPERTIES LABELS opencl
    ENVIRONMENT "MSDA_EXPECT_NO_OPENCL=1;OCL_ICD_VENDORS=${CMAKE_CURRENT_BINARY_DIR}/no_opencl_vendors")
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/no_opencl_vendors)
