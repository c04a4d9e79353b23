// The object the tests' precompiled header is built with (tests/CMakeLists.txt,
// hyperpack_test_pch): the header is the product, this file only gives it a target.
