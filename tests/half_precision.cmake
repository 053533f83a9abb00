# Half-precision storage (f16, bf16) against the double reference.
msda_add_test(test_half_precision core test_half_precision.cpp)
msda_run_on_every_x86_target(test_half_precision)
msda_add_test(test_half_conversions core test_half_conversions.cpp)
# clang 14 (the sanitizer trees) converts __fp16 through compiler-rt's
# builtins (__gnu_h2f_ieee), which it does not link by default.
if (CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 15)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-libgcc-file-name --rtlib=compiler-rt
                    OUTPUT_VARIABLE _msda_clang_builtins OUTPUT_STRIP_TRAILING_WHITESPACE)
    target_link_libraries(test_half_conversions PRIVATE ${_msda_clang_builtins})
endif ()
