# float64 storage, computed in float64, against the double references.
msda_add_test(test_double_precision core test_double_precision.cpp)
msda_run_on_every_x86_target(test_double_precision)
