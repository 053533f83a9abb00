# The geometry's floor and rounding from conversions (algorithm/sampling.h),
# which the generators use on x86 without SSE4.1: JIT-compiled for plain
# x86-64 and checked against std::floor and rounding half to even.
if (TARGET msda_algorithm AND MSDA_CPU_FAMILY STREQUAL "x86" AND NOT CMAKE_CROSSCOMPILING AND NOT MSDA_SANITIZE)
    add_executable(test_floor_by_conversion test_floor_by_conversion.cpp)
    target_link_libraries(test_floor_by_conversion PRIVATE msda_algorithm GTest::gtest_main)
    msda_register_cases(test_floor_by_conversion core)
endif ()
