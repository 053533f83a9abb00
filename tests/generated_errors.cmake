# Reaches into the runtime's dispatch layer (exported as msda::detail).
msda_add_test(test_generated_errors core test_generated_errors.cpp)
target_include_directories(test_generated_errors PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src)
