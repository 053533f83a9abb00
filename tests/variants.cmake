# The registry of generated functions: each of this library's family, every
# promised call served.
msda_add_test(test_variants core test_variants.cpp)
