# Tensors past 2^31 elements (tests/test_huge_tensors.cpp). RUN_SERIAL: it
# commits up to 8 GiB, which must not meet another test's memory.
add_executable(test_huge_tensors test_huge_tensors.cpp ${CMAKE_CURRENT_SOURCE_DIR}/expected_target.cpp)
target_link_libraries(test_huge_tensors PRIVATE msda::msda msda_reference GTest::gtest_main)
target_include_directories(test_huge_tensors PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
# In a sanitizer tree they are label slow (./dev test --all runs them): every
# sample's access checked against shadow memory, ManySamples alone ran past
# 8 minutes under ASan (34 s in build/).
set(_msda_huge_label core)
if (MSDA_SANITIZE)
    set(_msda_huge_label slow)
endif ()
msda_register_cases(test_huge_tensors ${_msda_huge_label} PROPERTIES RUN_SERIAL ON TIMEOUT 1800)
