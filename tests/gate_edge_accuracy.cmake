msda_add_test(test_gate_edge_accuracy core test_gate_edge_accuracy.cpp)
foreach (target IN ITEMS avx2 x86-64)
    gtest_discover_tests(test_gate_edge_accuracy
        TEST_SUFFIX ".${target}"
        DISCOVERY_TIMEOUT 120
        PROPERTIES LABELS core ENVIRONMENT "MSDA_X86_TARGET=${target}")
endforeach ()
