# The CUDA target (label cuda): test_cuda runs in full where a CUDA device
# is, reports SKIPPED with the reason where there is none (this machine and
# CI have none), and there checks that a call fails clearly.
msda_add_test(test_cuda cuda test_cuda.cpp)
# Tensors on a CUDA device (test_cuda_tensors: device pointers made through
# the driver API, which it opens at run time, so it builds everywhere). The
# float32 grid, GKA and determinism cases and the non-finite edge cases run
# on Device::cuda too (msda_run_on_device, tests/CMakeLists.txt).
msda_add_test(test_cuda_tensors cuda test_cuda_tensors.cpp)
find_path(MSDA_DLPACK_INCLUDE_DIR dlpack/dlpack.h DOC "DLPack's header (Debian's libdlpack-dev)")
target_include_directories(test_cuda_tensors PRIVATE ${MSDA_DLPACK_INCLUDE_DIR})
target_link_libraries(test_cuda_tensors PRIVATE ${CMAKE_DL_LIBS})
