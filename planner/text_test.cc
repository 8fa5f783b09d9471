#include "planner/text.h"

#include <gtest/gtest.h>

#include "planner/status.h"

namespace memplan {
namespace {

TEST(Text, ValidUtf8) {
  EXPECT_TRUE(ValidUtf8("layer1.0"));
  EXPECT_TRUE(ValidUtf8("caf\xc3\xa9 \xe2\x9c\x85 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(ValidUtf8("\xff"));
  EXPECT_FALSE(ValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(ValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(ValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(ValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

TEST(Text, ControlCharacters) {
  EXPECT_FALSE(HasControlChar("plain name"));
  EXPECT_TRUE(HasControlChar("a\x1b[2Jb"));
  EXPECT_TRUE(HasControlChar("a\nb"));
  EXPECT_TRUE(HasControlChar("a\x7f"));
  EXPECT_TRUE(
      HasControlChar("a\xc2\x9b"
                     "2J"));  // U+009B, the 8-bit CSI
  EXPECT_EQ(PrintableText("a\x1b[2J\xff"
                          "b"),
            "a\\x1b[2J\\xffb");
  EXPECT_EQ(PrintableText("caf\xc3\xa9"), "caf\xc3\xa9");
  // Bidi overrides and isolates reorder the text on display.
  EXPECT_TRUE(HasControlChar("relu\xe2\x80\xaegnp.exe"));  // U+202E
  EXPECT_TRUE(
      HasControlChar("a\xe2\x81\xa6"
                     "b"));  // U+2066
  EXPECT_TRUE(
      HasControlChar("a\xe2\x80\xa8"
                     "b"));  // U+2028
  EXPECT_FALSE(
      HasControlChar("a\xe2\x80\x94"
                     "b"));  // an em dash is text
  EXPECT_EQ(PrintableText("y\xe2\x80\xae"), "y\\xe2\\x80\\xae");
}

TEST(Text, ClipKeepsWholeCharacters) {
  EXPECT_EQ(Clip("short", 200), "short");
  EXPECT_EQ(Clip(std::string(300, 'x'), 200), std::string(200, 'x') + "...");
  // A two-byte character across the cut is left out whole.
  EXPECT_EQ(Clip("ab\xc3\xa9", 3), "ab...");
}

TEST(Text, StatusMessagesAreBounded) {
  const std::string huge = "m.onnx: node 'ein': equation '" + std::string(25 << 20, ',') + "'";
  const Status s = Status::Error(huge + ": bad equation");
  EXPECT_LE(s.message().size(), Status::kMaxMessageBytes + 10);
  EXPECT_EQ(s.message().rfind("m.onnx: node 'ein'", 0), 0u);         // the file and node stay
  EXPECT_NE(s.message().find(": bad equation"), std::string::npos);  // and what is wrong
}

TEST(Text, SplitListKeepsTheNonEmptyItems) {
  EXPECT_EQ(SplitList("a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SplitList("m.h.0"), (std::vector<std::string>{"m.h.0"}));
  EXPECT_TRUE(SplitList("").empty());
  EXPECT_TRUE(SplitList(",").empty());
}

TEST(Text, EndsWith) {
  EXPECT_TRUE(EndsWith("transformers.LlamaRotaryEmbedding", "RotaryEmbedding"));
  EXPECT_TRUE(EndsWith("abc", ""));
  EXPECT_TRUE(EndsWith("abc", "abc"));
  EXPECT_FALSE(EndsWith("bc", "abc"));
  EXPECT_FALSE(EndsWith("RotaryEmbeddings", "RotaryEmbedding"));
}

}  // namespace
}  // namespace memplan
