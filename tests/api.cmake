# The suites that check the public API against the double reference.
msda_add_test(test_forward_backward core test_forward_backward.cpp)
msda_add_test(test_validation core test_validation.cpp)
msda_add_test(test_determinism core test_determinism.cpp)
msda_run_on_every_x86_target(test_forward_backward)
msda_run_on_every_x86_target(test_determinism)
