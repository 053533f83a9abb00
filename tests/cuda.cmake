# The CUDA target (label cuda): test_cuda runs in full where a CUDA device
# is, reports SKIPPED with the reason where there is none (this machine and
# CI have none), and there checks that a call fails clearly.
msda_add_test(test_cuda cuda test_cuda.cpp)
