# Half-precision storage (f16, bf16) against the double reference.
msda_add_test(test_half_precision core test_half_precision.cpp)
msda_run_on_every_x86_target(test_half_precision)
msda_add_test(test_half_conversions core test_half_conversions.cpp)
