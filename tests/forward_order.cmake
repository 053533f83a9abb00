# Options::forward_order: the by-query forward against the reference and the
# by-level walk, its determinism, and where each order is chosen; on every
# x86 target.
msda_add_test(test_forward_order core test_forward_order.cpp)
msda_run_on_every_x86_target(test_forward_order)
