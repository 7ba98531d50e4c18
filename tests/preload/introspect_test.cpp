/* SPDX-License-Identifier: MIT */
// introspect_test.cpp - glibc's malloc introspection and internal names
// under the preload, seen from programs that know nothing of arenakit
// (tests/preload/introspect_prog.c, sized_delete_prog.cpp): malloc_trim
// gives memory back (the RSS drops), mallinfo2 reports arenakit's in-use
// bytes, malloc_info writes arenakit's XML, __libc_malloc's blocks go to
// free(), and sized operator delete checks its size in the hardened build.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char **environ;

namespace {

struct ProgRun {
  std::string out, err;
  int exit_code = -1;                         // -1 if it did not exit
  int signal = 0;                             // the signal that ended it, if one did
  std::map<std::string, std::string> values;  // name=value lines of stdout
};

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `prog mode` with LD_PRELOAD=the drop-in (and `env` added), stdout and
// stderr captured apart.
ProgRun run(const char *prog, const char *mode, std::vector<std::string> env = {}) {
  char dir[] = "/tmp/ak_introspect_XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  std::vector<std::string> envs;
  for (char **e = environ; *e; e++)
    if (std::string(*e).rfind("LD_PRELOAD=", 0) != 0 && std::string(*e).rfind("AK_", 0) != 0)
      envs.push_back(*e);
  envs.push_back("LD_PRELOAD=" AK_TEST_PRELOAD);
  for (const std::string &e : env) envs.push_back(e);
  std::vector<char *> envp, argv{const_cast<char *>(prog), const_cast<char *>(mode), nullptr};
  for (std::string &e : envs) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  ProgRun r;
  if (posix_spawn(&pid, prog, &fa, nullptr, argv.data(), envp.data()) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&fa);
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos && line.find(' ') == std::string::npos)
      r.values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return r;
}

double num(const ProgRun &r, const std::string &name) {
  auto it = r.values.find(name);
  EXPECT_NE(it, r.values.end()) << name << " missing in:\n" << r.out;
  return it == r.values.end() ? 0.0 : std::strtod(it->second.c_str(), nullptr);
}

constexpr double MiB = 1024.0 * 1024.0;

}  // namespace

// About 80 MiB touched and freed: malloc_trim gives it back (most of it, and
// the RSS drops by at least a quarter of it across the call), returns 1,
// then 0 when nothing is left to give.
TEST(MallocTrim, GivesArenakitsFreeMemoryBackAndSaysSo) {
  ProgRun r = run(AK_TEST_INTROSPECT_PROG, "trim");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double touched = num(r, "rss_full") - num(r, "rss_start");
  ASSERT_GT(touched, 60 * MiB) << r.out;
  EXPECT_EQ(num(r, "trim"), 1) << r.out;
  EXPECT_EQ(num(r, "trim_again"), 0) << r.out;
  EXPECT_GE(num(r, "rss_freed") - num(r, "rss_trimmed"), touched / 4) << r.out;
  EXPECT_LE(num(r, "rss_trimmed") - num(r, "rss_start"), touched / 4) << r.out;
}

// 20000 blocks of 8 to 2007 bytes: mallinfo2's in-use bytes (uordblks +
// hblkhd) grow by their usable sizes within 1 %, and agree with
// ak_malloc_stat("allocated") within 1 %; mallinfo's int says the same.
TEST(Mallinfo2, ReportsArenakitsInUseBytes) {
  ProgRun r = run(AK_TEST_INTROSPECT_PROG, "mallinfo");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double grown = num(r, "inuse_after") - num(r, "inuse_before"), usable = num(r, "usable_sum");
  ASSERT_GT(usable, 10 * MiB) << r.out;
  EXPECT_NEAR(grown, usable, usable / 100) << r.out;
  ASSERT_EQ(num(r, "have_ak"), 1) << r.out;
  EXPECT_NEAR(num(r, "ak_allocated"), num(r, "inuse_after"), num(r, "inuse_after") / 100) << r.out;
  EXPECT_NEAR(num(r, "mallinfo_uordblks"), num(r, "inuse_after"), num(r, "inuse_after") / 100) << r.out;
  EXPECT_GE(num(r, "arena"), num(r, "inuse_after")) << r.out;
  EXPECT_GT(num(r, "fordblks"), 0) << r.out;
}

TEST(MallocInfo, WritesArenakitsFiguresAsXmlAndRejectsOptionsAndMallocStatsPrints) {
  ProgRun r = run(AK_TEST_INTROSPECT_PROG, "info");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("<malloc version=\"1\" allocator=\"arenakit\">\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<stat name=\"allocated\" value=\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<size from=\"112\" to=\"112\""), std::string::npos) << r.out;  // the 100-byte block
  EXPECT_NE(r.out.find("</malloc>\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("options1_rc=-1 errno=22"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.rfind("arenakit malloc:\n  allocated ", 0), 0u) << r.err;  // malloc_stats()
}

// Blocks of glibc's internal names go to free() and the other way round:
// without the forwarding, free() meets a block of glibc's heap and ends the
// program ("invalid pointer").
TEST(LibcNames, AreArenakitsSoTheirBlocksMixWithFree) {
  ProgRun r = run(AK_TEST_INTROSPECT_PROG, "libc");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "libc=ok\n");
  EXPECT_EQ(r.err, "");
}

TEST(SizedDelete, TheRightSizeFrees) {
  ProgRun r = run(AK_TEST_SIZED_DELETE_PROG, "right");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "done\n");
}

// Hardened: a size that is not the object's ends the program with a
// message naming the operator; the other builds free the block.
TEST(SizedDelete, AWrongSizeIsFatalWhenHardened) {
  const struct {
    const char *mode, *call;
  } cases[] = {{"wrong", "operator delete(void*, size_t): size 4096 "},
               {"wrong-array", "operator delete[](void*, size_t): size 16 "},
               {"wrong-aligned", "operator delete(void*, size_t, align_val_t): size 100000 "}};
  for (const auto &c : cases) {
    ProgRun r = run(AK_TEST_SIZED_DELETE_PROG, c.mode);
    if (AK_HARDENED) {
      EXPECT_EQ(r.signal, SIGABRT) << c.mode << ": " << r.err;
      EXPECT_NE(r.err.find(std::string("arenakit: ") + c.call), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("does not match the block at 0x"), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 0) << c.mode << ": " << r.err;
    }
  }
}
