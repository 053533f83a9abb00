# The caches the run-time policies size against, read from sysfs, and the
# policies' boundaries on recorded cores (tests/cpu_caches/).
msda_add_test(test_cpu_caches core test_cpu_caches.cpp)
msda_run_on_recorded_caches(test_cpu_caches)
