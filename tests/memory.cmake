# Memory: a plan's calls allocate nothing once warm (allocations counted
# through the C library's entry points; SKIPPED in the sanitizer trees,
# whose runtimes own those entry points), and 10^4 calls lose nothing (the
# heap's bytes in use; LeakSanitizer too in the asan tree).
msda_add_test(test_plan_allocations core test_plan_allocations.cpp)
msda_add_test(test_many_calls core test_many_calls.cpp)
if (MSDA_SANITIZE)
    target_compile_definitions(test_plan_allocations PRIVATE MSDA_NO_ALLOCATION_COUNT)
endif ()
