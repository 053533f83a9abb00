# The ARM CPU decision on recorded AT_HWCAP words (tests/hwcap/); in the
# x86 tree as a pure function, in the ARM tree also on this CPU.
msda_add_test(test_arm_cpu core test_arm_cpu.cpp)
# arm_cpu.h, and msda_cpu_tiers.h (schedules/cpu_tiers.cmake) that it includes.
target_include_directories(test_arm_cpu PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src ${CMAKE_BINARY_DIR}/generators)
target_compile_definitions(test_arm_cpu PRIVATE MSDA_HWCAP_DIR="${CMAKE_CURRENT_SOURCE_DIR}/hwcap")
