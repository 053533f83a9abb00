# Options::relayout: value staged head-major, bitwise against the caller's
# layout, in every dtype, on every x86 target and under each recorded core's
# caches.
msda_add_test(test_relayout core test_relayout.cpp)
msda_run_on_every_x86_target(test_relayout)
msda_run_on_recorded_caches(test_relayout)
