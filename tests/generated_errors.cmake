# Reaches into the runtime's execution layer (exported as msda::detail),
# whose headers use Halide's runtime types.
msda_add_test(test_generated_errors core test_generated_errors.cpp)
target_include_directories(test_generated_errors PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src
                                                         $<TARGET_PROPERTY:Halide::Runtime,INTERFACE_INCLUDE_DIRECTORIES>)
