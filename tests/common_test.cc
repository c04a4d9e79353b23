#include <gtest/gtest.h>
#include "hyperpack/text.h"
TEST(TextTest, Placeholder) { EXPECT_EQ(hyperpack::FormatDouble(0.1), "0.1"); }
