# msda's choice of x86 target from cpuid and xgetbv words: recorded CPUs
# (tests/cpuid/), words an OS or hypervisor changed, and this CPU.
msda_add_test(test_x86_cpu core test_x86_cpu.cpp)
# x86_cpu.h, and msda_cpu_tiers.h (schedules/cpu_tiers.cmake) that it includes.
target_include_directories(test_x86_cpu PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src ${CMAKE_BINARY_DIR}/generators)
target_compile_definitions(test_x86_cpu PRIVATE MSDA_CPUID_DIR="${CMAKE_CURRENT_SOURCE_DIR}/cpuid")
# The tiers this tree has code for (all four, or one in a sanitizer tree).
list(JOIN MSDA_CPU_TIERS "," _msda_tiers_text)
target_compile_definitions(test_x86_cpu PRIVATE MSDA_TEST_CPU_TIERS="${_msda_tiers_text}")
