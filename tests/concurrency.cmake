# Eight threads of mixed calls against the same calls made alone (label
# core; the sanitizer trees run it too).
msda_add_test(test_concurrency core test_concurrency.cpp)
