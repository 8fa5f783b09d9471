#include "cli/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace memplan {
namespace {

// A fresh scratch folder for one test.
std::string ScratchDir() {
  char tmpl[] = "/tmp/memplan_files_test_XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  return d == nullptr ? std::string() : std::string(d);
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Files, AtomicWriteReplacesAndLeavesNoTemporary) {
  const std::string dir = ScratchDir();
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/report.json";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(Slurp(path), "second");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_mode & 0044, 0u);  // not left at mkstemp's 0600
  // Only the report is in the folder.
  EXPECT_EQ(std::system(("test \"$(ls " + dir + " | wc -l)\" -eq 1").c_str()), 0);
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(Files, RefusesFifoAndDirectoryWithoutBlocking) {
  const std::string dir = ScratchDir();
  ASSERT_FALSE(dir.empty());
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Status w = WriteFileAtomically(fifo, "x");
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.message(), fifo + ": cannot write: it is a FIFO");
  auto r = ReadRegularFile(fifo, "the budget file", 1 << 20);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.message(), fifo + ": the budget file is a FIFO, not a regular file");
  auto d = ReadRegularFile(dir, "the baseline", 1 << 20);
  EXPECT_EQ(d.message(), dir + ": the baseline is a directory, not a regular file");
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(Files, OutputThatIsAnInputIsRefused) {
  const std::string dir = ScratchDir();
  ASSERT_FALSE(dir.empty());
  const std::string model = dir + "/m.onnx";
  ASSERT_TRUE(WriteFileAtomically(model, "model bytes").ok());
  ASSERT_EQ(::symlink(model.c_str(), (dir + "/alias.svg").c_str()), 0);
  EXPECT_FALSE(CheckOutputIsNotInput(model, {model}).ok());
  EXPECT_FALSE(CheckOutputIsNotInput(dir + "/./m.onnx", {model}).ok());
  EXPECT_FALSE(CheckOutputIsNotInput(dir + "/alias.svg", {model}).ok());  // same inode
  EXPECT_TRUE(CheckOutputIsNotInput(dir + "/new.svg", {model}).ok());
  EXPECT_EQ(Slurp(model), "model bytes");
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(Files, JsonDepthNulAndTrailingGarbage) {
  EXPECT_TRUE(ParseJsonDocument("{\"a\": [1, 2]}", "b.json").ok());
  EXPECT_EQ(
      ParseJsonDocument(std::string(100000, '[') + std::string(100000, ']'), "b.json").message(),
      "b.json:1:65: invalid JSON: nested deeper than 64 levels");
  EXPECT_EQ(ParseJsonDocument(std::string("{}\0x", 4), "b.json").message(),
            "b.json:1:3: invalid JSON: a NUL byte");
  EXPECT_FALSE(ParseJsonDocument("{} garbage", "b.json").ok());
  // Brackets inside strings do not count as nesting.
  EXPECT_TRUE(ParseJsonDocument("{\"s\": \"" + std::string(1000, '[') + "\"}", "b.json").ok());
}

TEST(Files, JsonDuplicateKeysAreRefused) {
  EXPECT_EQ(ParseJsonDocument("{\"a\": 1, \"b\": {\"a\": 2}}", "b.json").ok(), true);
  EXPECT_EQ(ParseJsonDocument("{\"checks\": [{\"batch\": 2, \"batch\": 64}]}", "b.json").message(),
            "b.json: invalid JSON: the key 'batch' appears twice in one object");
  EXPECT_FALSE(ParseJsonDocument("{\"checks\": [], \"checks\": []}", "b.json").ok());
}

TEST(Files, OutputsAreCheckedBeforeAnyPlan) {
  const std::string dir = ScratchDir();
  ASSERT_FALSE(dir.empty());
  const std::string model = dir + "/m.onnx";
  ASSERT_TRUE(WriteFileAtomically(model, "model bytes").ok());
  ASSERT_EQ(::mkdir((dir + "/d.json").c_str(), 0755), 0);
  EXPECT_TRUE(CheckOutputs({dir + "/a.json", dir + "/a.svg", ""}, {model}).ok());
  // Two names of one file: the same path, ./ and a hard link.
  EXPECT_FALSE(CheckOutputs({dir + "/a.json", dir + "/./a.json"}, {model}).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/a.json", "{}").ok());
  ASSERT_EQ(::link((dir + "/a.json").c_str(), (dir + "/b.json").c_str()), 0);
  EXPECT_EQ(CheckOutputs({dir + "/a.json", dir + "/b.json"}, {model}).message(),
            dir + "/b.json: named twice as an output (also '" + dir +
                "/a.json'): one would replace the other");
  EXPECT_EQ(CheckOutputs({dir + "/d.json"}, {model}).message(),
            dir + "/d.json: cannot write: it is a directory");
  EXPECT_FALSE(CheckOutputs({model}, {model}).ok());
  EXPECT_TRUE(CheckOutputs({"/dev/null", "/dev/null"}, {model}).ok());
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace memplan
