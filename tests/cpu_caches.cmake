# The caches the run-time policies size against, read from sysfs.
msda_add_test(test_cpu_caches core test_cpu_caches.cpp)
target_include_directories(test_cpu_caches PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src)
