# GKA against its double reference.
msda_add_test(test_gka core test_gka.cpp)
msda_run_on_every_x86_target(test_gka)
