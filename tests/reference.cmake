msda_add_test(test_reference core test_reference.cpp)
