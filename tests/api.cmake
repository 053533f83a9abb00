# The suites that check the public API against the double reference.
msda_add_test(test_forward_backward core test_forward_backward.cpp)
msda_add_test(test_validation core test_validation.cpp)
msda_add_test(test_determinism core test_determinism.cpp)

# Every shipped library holds avx512_zen4, avx2 and plain x86-64 code; the
# default run exercises the best one this CPU has. These runs cap the target
# (MSDA_X86_TARGET) so the other two are checked against the reference too.
foreach (target IN ITEMS avx2 x86-64)
    gtest_discover_tests(test_forward_backward
        TEST_SUFFIX ".${target}"
        DISCOVERY_TIMEOUT 120
        PROPERTIES LABELS core ENVIRONMENT "MSDA_X86_TARGET=${target}")
    gtest_discover_tests(test_determinism
        TEST_SUFFIX ".${target}"
        DISCOVERY_TIMEOUT 120
        PROPERTIES LABELS core ENVIRONMENT "MSDA_X86_TARGET=${target}")
endforeach ()
