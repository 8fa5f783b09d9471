#include "cli/escape.h"

#include <gtest/gtest.h>

#include "cli/report.h"

namespace memplan {
namespace {

TEST(Escape, PythonStringCannotBeEscaped) {
  EXPECT_EQ(PythonString("layer1.0"), "\"layer1.0\"");
  // The injection of the issue: quotes and backslashes are escaped, so the
  // whole name stays one literal.
  EXPECT_EQ(PythonString("\",getattr(__import__('os'),'system')('id'),\""),
            "\"\\\",getattr(__import__('os'),'system')('id'),\\\"\"");
  EXPECT_EQ(PythonString("a\\\"b"), "\"a\\\\\\\"b\"");
  EXPECT_EQ(PythonString("x\ny\x1b"), "\"x\\x0ay\\x1b\"");
  EXPECT_EQ(PythonString("caf\xc3\xa9"), "\"caf\\u00e9\"");
  EXPECT_EQ(PythonString("\xf0\x9f\x98\x80"), "\"\\U0001f600\"");
  EXPECT_EQ(PythonString("\xff"), "\"\\xff\"");
  EXPECT_EQ(PythonString("```"), "\"\\x60\\x60\\x60\"");  // cannot close a Markdown fence
}

TEST(Escape, MarkdownText) {
  EXPECT_EQ(MarkdownText("a|b"), "a\\|b");
  EXPECT_EQ(MarkdownText("<script>"), "\\<script>");
  EXPECT_EQ(MarkdownText("**x** `y` [l](u)"), "\\*\\*x\\*\\* \\`y\\` \\[l\\](u)");
  EXPECT_EQ(MarkdownText("a\nb"), "a\\\\x0ab");
  const std::string row = MarkdownTable({"name"}, {{std::string(5000, 'n')}});
  EXPECT_LT(row.size(), 400u);  // a long name cannot make a giant row
}

TEST(Escape, XmlAndHtml) {
  EXPECT_EQ(XmlEscape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;");
  EXPECT_EQ(XmlEscape("bad\xff\x1b"), "bad\\xff\\x1b");  // well-formed UTF-8 XML
  EXPECT_EQ(XmlEscape("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(Escape, GithubAnnotationCannotForgeCommands) {
  const std::string a = GithubAnnotation("error", "m,x:y.onnx", "t", "one\ntwo\x1b[2J%");
  EXPECT_EQ(a, "::error file=m%2Cx%3Ay.onnx,title=t::one%0Atwo\\x1b[2J%25\n");
}

}  // namespace
}  // namespace memplan
