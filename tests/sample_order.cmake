# Options::sample_order: the by-query forward and per-sample gradients
# against the reference and the by-level walk, their determinism, and where
# each order is chosen; on every x86 target, and under each recorded core's
# caches.
msda_add_test(test_sample_order core test_sample_order.cpp)
msda_run_on_every_x86_target(test_sample_order)
msda_run_on_recorded_caches(test_sample_order)
