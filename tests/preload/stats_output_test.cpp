/* SPDX-License-Identifier: MIT */
// stats_output_test.cpp - what a user reads: the AK_SHOW_STATS exit report
// (one per process, headed by program name and pid, human units, the
// kernel's RSS and faults; JSON and file forms; a file when stderr is
// closed), the rejection of invalid
// option values in the environment, tested from outside:
// tests/preload/stats_prog.c runs under LD_PRELOAD with the variables set.
// (The printers and ak_option_set are tested in tests/stats_print_test.cpp.)
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../text_match.h"

namespace {

struct ProgRun {
  std::string out, err;  // the program's stdout and stderr
  int status = -1;       // its exit code (or -1 if it did not exit normally)
};

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs stats_prog with `mode` under the preload and the given environment
// assignments (NAME=VALUE), capturing stdout and stderr apart; in `cwd` if
// given.
ProgRun run_prog(const std::vector<std::string> &env, const char *mode = "plain",
                 const std::string &cwd = "") {
  char dir[] = "/tmp/ak_stats_XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  std::string cmd = (cwd.empty() ? std::string() : "cd '" + cwd + "' && ") +
                    "env -u AK_SHOW_STATS -u AK_VERBOSE -u AK_PURGE_DELAY LD_PRELOAD=" AK_TEST_PRELOAD;
  for (const std::string &e : env) cmd += " '" + e + "'";
  cmd += " " AK_TEST_STATS_PROG " ";
  cmd += mode;
  cmd += " >" + out + " 2>" + err;
  int rc = std::system(cmd.c_str());
  ProgRun r;
  r.out = slurp(out);
  r.err = slurp(err);
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir);
  return r;
}

size_t count(const std::string &text, const std::string &pattern) { return ere_count(text, pattern); }

long first_pid(const ProgRun &r) { return std::atol(r.out.c_str()); }

const std::string header_re(
    R"(arenakit: preload_stats_prog \(pid [0-9]+[^)]*\): heap statistics at exit, [0-9.]+ s)");

}  // namespace

TEST(StatsReport, OneReadableReportPerProcessHeadedByNameAndPid) {
  ProgRun r = run_prog({"AK_SHOW_STATS=1"});
  ASSERT_EQ(r.status, 0) << r.err;
  long pid = first_pid(r);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(count(r.err, header_re), 1u) << r.err;
  EXPECT_NE(r.err.find("arenakit: preload_stats_prog (pid " + std::to_string(pid) + "): "), std::string::npos)
      << r.err;
  // Human units beside each figure, the kernel's RSS and faults, the classes.
  EXPECT_TRUE(
      ere_search(r.err, R"(\n  allocated +[0-9.]+ (B|KiB|MiB|GiB) +\(peak [0-9.]+ (B|KiB|MiB|GiB)\))"))
      << r.err;
  EXPECT_TRUE(ere_search(r.err, R"(\n  resident +[0-9.]+ (B|KiB|MiB|GiB))")) << r.err;
  EXPECT_TRUE(
      ere_search(r.err, R"(\n  process RSS +[0-9.]+ (KiB|MiB|GiB) +\(peak [0-9.]+ (KiB|MiB|GiB), kernel\))"))
      << r.err;
  EXPECT_TRUE(ere_search(r.err, R"(\n  page faults +[1-9][0-9]* minor, [0-9]+ major)")) << r.err;
  EXPECT_TRUE(ere_search(r.err, R"(large blocks 1 \([0-9.]+ MiB\))")) << r.err;
  EXPECT_NE(r.err.find("size class  block size  live blocks  spans  span memory"), std::string::npos)
      << r.err;
  // No figure in raw bytes beyond 1023: every size is in units.
  EXPECT_FALSE(ere_search(r.err, R"([0-9]{4,} B([^a-zA-Z]|$))")) << r.err;
}

// What a person acts on: cumulative counts (stats_prog allocates 1000 small
// blocks and a large one, frees 500), every byte figure with its unit (the
// spans' memory too), a one-line meaning of each figure and a legend of the
// words (segment, span, spare, abandoned segments), mincore named as what
// it is.
TEST(StatsReport, CumulativeCountsUnitsAndALegend) {
  ProgRun r = run_prog({"AK_SHOW_STATS=1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ere_search(r.err,
                         R"(\n  allocations +1[0-9]{3} \([0-9.]+ MiB asked for\), frees [5-9][0-9]{2}, )"
                         R"(live blocks [1-9][0-9]*\n)"))
      << r.err;
  EXPECT_TRUE(ere_search(
      r.err, R"(\n  allocated +[0-9.]+ (B|KiB|MiB) +\(peak [0-9.]+ (B|KiB|MiB)\) in live blocks\n)"))
      << r.err;
  EXPECT_TRUE(ere_search(r.err, R"(\n  segments 1 \(4\.00 MiB\), spare [0-9.]+ (B|KiB|MiB), large blocks 1 )"
                                R"(\(8\.00 MiB\), large cache [0-9.]+ (B|KiB|MiB)\n)"))
      << r.err;
  EXPECT_TRUE(ere_search(r.err, R"(\n +[0-9]+ +[0-9.]+ (B|KiB) +[0-9]+ +[0-9]+ +[0-9.]+ KiB\n)")) << r.err;
  EXPECT_NE(r.err.find("as mincore(2) reports"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("span: 1 to 32 such pages"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("abandoned segments: those of threads that exited"), std::string::npos) << r.err;
}

// The JSON form carries the counts too, and the peak RSS (the kernel's
// VmHWM) is never below the current RSS.
TEST(StatsReport, JsonHasTheCountsAndPeakRssIsNeverBelowCurrent) {
  for (int i = 0; i < 5; i++) {
    ProgRun r = run_prog({"AK_SHOW_STATS=json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(ere_search(r.err,
                           R"("allocations":1[0-9]{3},"frees":[5-9][0-9]{2},"bytes_allocated":[0-9]{7,},)"
                           R"("live_blocks":[0-9]+,)"))
        << r.err;
    size_t at = r.err.find("\"process_rss\":"), peak_at = r.err.find("\"process_peak_rss\":");
    ASSERT_NE(at, std::string::npos) << r.err;
    ASSERT_NE(peak_at, std::string::npos) << r.err;
    unsigned long long rss = std::strtoull(r.err.c_str() + at + 14, nullptr, 10);
    unsigned long long peak = std::strtoull(r.err.c_str() + peak_at + 19, nullptr, 10);
    EXPECT_GT(rss, 0u) << r.err;
    EXPECT_GE(peak, rss) << r.err;
  }
}

TEST(StatsReport, NothingWithoutTheOption) {
  ProgRun r = run_prog({});
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  r = run_prog({"AK_SHOW_STATS=0"});
  EXPECT_EQ(r.err, "");
}

// A forked child that exits through exit() reports too, saying whose copy
// of the heap it is.
TEST(StatsReport, AForkedChildReportsAndSaysWhoseCopyItIs) {
  ProgRun r = run_prog({"AK_SHOW_STATS=1"}, "fork");
  ASSERT_EQ(r.status, 0) << r.err;
  long parent = first_pid(r);
  EXPECT_EQ(count(r.err, header_re), 2u) << r.err;
  EXPECT_EQ(count(r.err, "forked from pid " + std::to_string(parent) + "\\)"), 1u) << r.err;
  EXPECT_NE(r.err.find("(pid " + std::to_string(parent) + "): "), std::string::npos) << r.err;
}

TEST(StatsReport, APerProcessFileAsksEveryProcessAndAForkedChildSaysWhoseCopyItIs) {
  char dir[] = "/tmp/ak_stats_fork_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ProgRun r = run_prog({std::string("AK_SHOW_STATS=file:") + dir + "/report-%p.txt"}, "fork");
  ASSERT_EQ(r.status, 0) << r.err;
  long parent = first_pid(r);
  std::string both;
  std::string cmd =
      std::string("cat ") + dir + "/report-*.txt > " + dir + "/all; rm -f " + dir + "/report-*.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  both = slurp(std::string(dir) + "/all");
  std::remove((std::string(dir) + "/all").c_str());
  rmdir(dir);
  EXPECT_EQ(count(both, header_re), 2u) << both;
  EXPECT_EQ(count(both, "forked from pid " + std::to_string(parent) + "\\)"), 1u) << both;
}

// A wrapper that runs programs (here bash, as `time prog` or a script does)
// and the programs each print their own report, headed by their names.
TEST(StatsReport, AWrapperAndTheProgramItRunsReportEach) {
  char dir[] = "/tmp/ak_stats_sh_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  std::string cmd = "env -u AK_SHOW_STATS LD_PRELOAD=" AK_TEST_PRELOAD
                    " AK_SHOW_STATS=1 bash -c '" AK_TEST_STATS_PROG " plain; " AK_TEST_STATS_PROG
                    " plain; true' >" +
                    out + " 2>" + err;
  int rc = std::system(cmd.c_str());
  std::string o = slurp(out), e = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir);
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << e;
  EXPECT_EQ(count(e, "arenakit: preload_stats_prog \\(pid [0-9]+\\): heap statistics at exit"), 2u) << e;
  EXPECT_EQ(count(e, "arenakit: bash \\(pid [0-9]+\\): heap statistics at exit"), 1u) << e;
}

// A program that closes stderr (as coreutils do at exit): the report goes
// to arenakit-stats.<pid>.txt in the current directory, never nowhere.
TEST(StatsReport, AProgramThatClosesStderrGetsItsReportInAFile) {
  char dir[] = "/tmp/ak_stats_closed_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ProgRun r = run_prog({"AK_SHOW_STATS=1"}, "close-stderr", dir);
  ASSERT_EQ(r.status, 0);
  std::string path = std::string(dir) + "/arenakit-stats." + std::to_string(first_pid(r)) + ".txt";
  std::string text = slurp(path);
  EXPECT_EQ(count(text, header_re), 1u) << path << ":\n" << text;
  std::remove(path.c_str());
  // A current directory that cannot be written: $TMPDIR.
  std::string ro = std::string(dir) + "/ro", tmp = std::string(dir) + "/tmp";
  ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
  ASSERT_EQ(mkdir(tmp.c_str(), 0700), 0);
  if (geteuid() != 0) {  // root writes anywhere
    r = run_prog({"AK_SHOW_STATS=1", "TMPDIR=" + tmp}, "close-stderr", ro);
    path = tmp + "/arenakit-stats." + std::to_string(first_pid(r)) + ".txt";
    EXPECT_EQ(count(slurp(path), header_re), 1u) << path;
    std::remove(path.c_str());
  }
  rmdir(ro.c_str());
  rmdir(tmp.c_str());
  rmdir(dir);
}

TEST(StatsReport, JsonFormIsOneObjectPerProcess) {
  ProgRun r = run_prog({"AK_SHOW_STATS=json"});
  ASSERT_EQ(r.status, 0) << r.err;
  long pid = first_pid(r);
  std::string obj_re(
      "^\\{\"program\":\"preload_stats_prog\",\"pid\":" + std::to_string(pid) +
      ",\"elapsed_s\":[0-9.]+,\"allocated\":[0-9]+,.*\"process_rss\":[1-9][0-9]*,.*"
      "\"minor_faults\":[1-9][0-9]*,.*\"large_blocks\":1,.*\"classes\":\\[\\{\"class\":[0-9]+,"
      "\"block_size\":[0-9]+,\"live_blocks\":[0-9]+,\"pages\":[0-9]+,\"span_bytes\":[0-9]+\\}.*\\]\\}\n$");
  EXPECT_TRUE(ere_match(r.err, obj_re)) << r.err;
}

TEST(StatsReport, FileFormServesProgramsThatCloseStderr) {
  char dir[] = "/tmp/ak_stats_file_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ProgRun r = run_prog({std::string("AK_SHOW_STATS=file:") + dir + "/report-%p.txt"}, "close-stderr");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  std::string path = std::string(dir) + "/report-" + std::to_string(first_pid(r)) + ".txt";
  std::string text = slurp(path);
  EXPECT_EQ(count(text, header_re), 1u) << text;
  EXPECT_NE(text.find("process RSS"), std::string::npos) << text;
  std::remove(path.c_str());
  // json:PATH appends one JSON line per process.
  std::string jpath = std::string(dir) + "/report.json";
  r = run_prog({"AK_SHOW_STATS=json:" + jpath}, "close-stderr");
  ASSERT_EQ(r.status, 0);
  text = slurp(jpath);
  EXPECT_EQ(
      text.rfind("{\"program\":\"preload_stats_prog\",\"pid\":" + std::to_string(first_pid(r)) + ",", 0), 0u)
      << text;
  std::remove(jpath.c_str());
  rmdir(dir);
}

TEST(StatsReport, AnUnwritableFileSendsTheReportToStderr) {
  ProgRun r = run_prog({"AK_SHOW_STATS=file:/nonexistent-dir/report.txt"});
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.err.find("arenakit: AK_SHOW_STATS: cannot open /nonexistent-dir/report.txt: "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count(r.err, header_re), 1u) << r.err;
}

// Each invalid value: exactly one line naming the variable and the value,
// and the default in force (AK_VERBOSE=1 prints the options in use).
TEST(OptionValues, InvalidValuesAreRejectedWithOneMessageAndTheDefaultIsUsed) {
  struct Case {
    const char *var, *value, *in_force;
  };
  const Case cases[] = {
      {"AK_PURGE_DELAY", "abc", "AK_PURGE_DELAY=10"},
      {"AK_PURGE_DELAY", "12x", "AK_PURGE_DELAY=10"},
      {"AK_PURGE_DELAY", "-2", "AK_PURGE_DELAY=10"},
      {"AK_PURGE_DELAY", "86400001", "AK_PURGE_DELAY=10"},
      {"AK_PURGE_DELAY", "99999999999999999999", "AK_PURGE_DELAY=10"},
      {"AK_PURGE_DELAY", "5 ", "AK_PURGE_DELAY=10"},
      {"AK_SHOW_STATS", "maybe", "AK_SHOW_STATS=0"},
      {"AK_SHOW_STATS", "3", "AK_SHOW_STATS=0"},
      {"AK_SHOW_STATS", "file:", "AK_SHOW_STATS=0"},
  };
  for (const Case &c : cases) {
    std::string assign = std::string(c.var) + "=" + c.value;
    ProgRun r = run_prog({assign, "AK_VERBOSE=1"});
    ASSERT_EQ(r.status, 0) << assign;
    std::string expected = "arenakit: " + assign + " is not a valid value (expected ";
    EXPECT_EQ(count(r.err, "is not a valid value"), 1u) << assign << "\n" << r.err;
    EXPECT_EQ(r.err.rfind(expected, 0), 0u) << assign << "\n" << r.err;
    EXPECT_NE(r.err.find("; using the default, "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(std::string("arenakit: options: ")), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.in_force), std::string::npos) << assign << "\n" << r.err;
  }
  // AK_VERBOSE itself: 2 is not 0 or 1.
  ProgRun r = run_prog({"AK_VERBOSE=2"});
  EXPECT_EQ(
      r.err.rfind("arenakit: AK_VERBOSE=2 is not a valid value (expected 0 or 1); using the default, 0\n", 0),
      0u)
      << r.err;
}

TEST(OptionValues, ValidValuesAreTakenSilently) {
  for (const char *assign : {"AK_PURGE_DELAY=0", "AK_PURGE_DELAY=-1", "AK_PURGE_DELAY=250", "AK_VERBOSE=0",
                             "AK_VERBOSE=off", "AK_SHOW_STATS=no"}) {
    ProgRun r = run_prog({assign});
    EXPECT_EQ(r.err, "") << assign;
  }
  ProgRun r = run_prog({"AK_PURGE_DELAY=250", "AK_VERBOSE=yes"});
  EXPECT_NE(r.err.find("AK_PURGE_DELAY=250"), std::string::npos) << r.err;
}
