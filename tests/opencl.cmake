# The OpenCL target (label opencl), on this machine's OpenCL device (PoCL,
# Debian's pocl-opencl-icd, in CI): the float32 cases of the forward/backward
# grid, GKA and determinism suites (concurrent calls included) with every call on Device::opencl
# (MSDA_TEST_DEVICE=opencl, tests/test_util.h), and test_opencl. Without an
# OpenCL device (or without MSDA_OPENCL) every one reports SKIPPED with the
# reason.
msda_add_test(test_opencl opencl test_opencl.cpp)
if (MSDA_OPENCL)
    # Device tensors: cl_mem made through the OpenCL API itself, as an engine
    # makes them (the ICD loader's headers and library, ocl-icd-opencl-dev).
    find_package(OpenCL REQUIRED)
    msda_add_test(test_opencl_tensors opencl test_opencl_tensors.cpp)
    target_include_directories(test_opencl_tensors PRIVATE ${MSDA_DLPACK_INCLUDE_DIR})
    target_link_libraries(test_opencl_tensors PRIVATE OpenCL::OpenCL)
    foreach (suite IN ITEMS test_forward_backward test_gka test_determinism)
        gtest_discover_tests(${suite}
            TEST_SUFFIX ".opencl"
            TEST_FILTER "-*f16*:*bf16*:*float16*:*Half*:*half*:ThreadSafety.OnePlanSharedByFourThreads"
            DISCOVERY_TIMEOUT 120
            PROPERTIES LABELS opencl ENVIRONMENT "MSDA_TEST_DEVICE=opencl"
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
    endforeach ()
endif ()
# No platform: the ICD loader pointed at an empty vendor directory.
add_test(NAME opencl_without_platform_is_an_error COMMAND test_opencl --gtest_filter=OpenClMissing.*)
set_tests_properties(opencl_without_platform_is_an_error PROPERTIES LABELS opencl
    ENVIRONMENT "MSDA_EXPECT_NO_OPENCL=1;OCL_ICD_VENDORS=${CMAKE_CURRENT_BINARY_DIR}/no_opencl_vendors")
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/no_opencl_vendors)
