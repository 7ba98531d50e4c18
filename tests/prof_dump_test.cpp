// SPDX-License-Identifier: MIT
// prof_dump_test.cpp - the heap profiler's dumps (src/prof/dump.c,
// prof.c), read back with the tests' own decoder (prof_decode.h): a
// profile holds what the stats say, with its sample types, labels,
// locations and the program's mapping and build id; errors name the call;
// dumps stay valid while two threads record and forget; interval dumps
// are numbered; every process that started the profiler writes its exit
// dump; the environment starts it at load; a forked child starts with the
// parent's profile, and forks while threads record never hang.
#include <arenakit/prof.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fork_child_watch.h"
#include "prof/prof_internal.h"
#include "prof_decode.h"
#include "prof_fixture.h"

namespace {

class ProfDump : public proftest::Fixture {
 protected:
  // Reads and validates a profile; fails the test if it is not valid.
  static profdec::Profile load(const std::string &file) {
    profdec::Profile p;
    std::string bytes = profdec::read_file(file);
    EXPECT_FALSE(bytes.empty()) << file;
    EXPECT_TRUE(profdec::decode(bytes, &p)) << file;
    EXPECT_EQ(profdec::validate(p), "") << file;
    return p;
  }
  static ak_prof_stats stats() { return proftest::stats(); }
};

void *block(uint64_t i) { return reinterpret_cast<void *>(uintptr_t{0x200000000} + i * 64); }

std::vector<uintptr_t> stack_of(uint64_t site, unsigned depth) {
  std::vector<uintptr_t> s(depth);
  for (unsigned d = 0; d < depth; d++) s[d] = 0x7000000 + site * 0x1000 + (depth - d) * 0x10;
  return s;
}

enum { ALLOC_OBJECTS, ALLOC_SPACE, INUSE_OBJECTS, INUSE_SPACE };

TEST_F(ProfDump, AProfileHoldsWhatTheStatsSay) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 100000), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  std::set<uint64_t> pcs;
  for (uint64_t i = 0; i < 300; i++) {
    auto s = stack_of(i % 7, 3 + unsigned(i % 7));
    pcs.insert(s.begin(), s.end());
    _ak_prof_record_stack(block(i), 1000 + i, s.data(), unsigned(s.size()), "pool", i % 2 ? "odd" : "even");
  }
  for (uint64_t i = 0; i < 300; i += 3) _ak_prof_forget(block(i));
  ASSERT_EQ(ak_prof_dump(path("p.pb").c_str()), 0) << ak_last_error();
  profdec::Profile p = load(path("p.pb"));
  const char *types[4][2] = {{"alloc_objects", "count"},
                             {"alloc_space", "bytes"},
                             {"inuse_objects", "count"},
                             {"inuse_space", "bytes"}};
  ASSERT_EQ(p.sample_type.size(), 4u);
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(p.str(p.sample_type[size_t(i)].first), types[i][0]);
    EXPECT_EQ(p.str(p.sample_type[size_t(i)].second), types[i][1]);
  }
  EXPECT_EQ(p.str(p.default_type), "inuse_space");
  EXPECT_EQ(p.str(p.period_type.first), "space");
  EXPECT_EQ(p.str(p.period_type.second), "bytes");
  EXPECT_EQ(p.period, 100000);
  EXPECT_NE(p.str(p.drop_frames).find("|malloc|"), std::string::npos);
  ak_prof_stats st = stats();
  EXPECT_EQ(uint64_t(profdec::sum(p, INUSE_SPACE)), st.inuse_bytes);
  EXPECT_EQ(uint64_t(profdec::sum(p, ALLOC_SPACE)), st.alloc_bytes);
  EXPECT_EQ(p.samples.size(), 14u);  // 7 stacks x 2 labels
  int64_t odd = profdec::sum(p, INUSE_SPACE, "pool", "odd"),
          even = profdec::sum(p, INUSE_SPACE, "pool", "even");
  EXPECT_EQ(odd + even, profdec::sum(p, INUSE_SPACE));
  EXPECT_GT(odd, 0);
  // The estimate of the objects: each sample of ~1 KB at a 100 KB period
  // stands for about 100 objects.
  EXPECT_NEAR(double(profdec::sum(p, ALLOC_OBJECTS)), 300 * 100000.0 / 1150, 300 * 5.0);
  std::set<uint64_t> addresses;
  for (const auto &l : p.locations) addresses.insert(l.address);
  EXPECT_EQ(addresses, pcs);
}

TEST_F(ProfDump, TheProgramsMappingComesFirstWithItsBuildId) {
  ASSERT_EQ(ak_prof_start(), 0);
  ASSERT_EQ(ak_prof_dump(path("m.pb").c_str()), 0) << ak_last_error();
  profdec::Profile p = load(path("m.pb"));
  ASSERT_FALSE(p.mappings.empty());
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  exe[n] = '\0';
  EXPECT_EQ(p.str(p.mappings[0].file), exe);
  // The build id as binutils reads it.
  std::string cmd = std::string("readelf -n '") + exe + "' 2>/dev/null | sed -n 's/.*Build ID: //p'";
  FILE *f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[256] = "";
  if (!fgets(line, sizeof line, f)) line[0] = '\0';
  pclose(f);
  std::string want(line);
  while (!want.empty() && (want.back() == '\n' || want.back() == ' ')) want.pop_back();
  if (want.empty()) GTEST_SKIP() << "readelf (binutils) is not installed or the test has no build id";
  EXPECT_EQ(p.str(p.mappings[0].build), want);
  bool libc = false;
  for (const auto &m : p.mappings) libc = libc || p.str(m.file).find("libc.so") != std::string::npos;
  EXPECT_TRUE(libc);
}

TEST_F(ProfDump, ErrorsNameTheCall) {
  errno = 0;
  EXPECT_EQ(ak_prof_dump(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(ak_last_error(), "ak_prof_dump: no path");
  std::string missing = path("no/such/dir/x.pb");
  EXPECT_EQ(ak_prof_dump(missing.c_str()), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(std::string(ak_last_error()).find("ak_prof_dump: cannot create '" + missing), std::string::npos)
      << ak_last_error();
  std::string too_long(5000, 'x');
  EXPECT_EQ(ak_prof_dump(too_long.c_str()), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ak_prof_set_dump_path(""), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ak_prof_set_dump_path(nullptr), 0);
  errno = 0;
  ak_prof_stats_get(nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(ProfDump, PercentPIsThePid) {
  ASSERT_EQ(ak_prof_dump(path("h.%p.pb").c_str()), 0) << ak_last_error();
  load(path("h." + std::to_string(getpid()) + ".pb"));
  EXPECT_EQ(stats().dumps, 1u);
}

TEST_F(ProfDump, DumpsStayValidWhileTwoThreadsRecordAndForget) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 4096), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  std::atomic<bool> stop{false};
  auto worker = [&](uint64_t base, bool capture) {
    std::mt19937_64 rng(base);
    std::vector<uint64_t> live;
    for (uint64_t i = 0; !stop.load(); i++) {
      uint64_t b = base + i;
      if (capture)
        _ak_prof_record(block(b), 64 + rng() % 4096, "pool", "captured");
      else {
        auto s = stack_of(rng() % 500, 1 + unsigned(rng() % 30));
        _ak_prof_record_stack(block(b), 64 + rng() % 4096, s.data(), unsigned(s.size()), "pool", "synthetic");
      }
      live.push_back(b);
      if (i % 16 == 0) std::this_thread::yield();  // 2 cores: the dumping thread gets its turns
      if (live.size() > 2000 || rng() % 2) {
        size_t k = rng() % live.size();
        _ak_prof_forget(block(live[k]));
        live[k] = live.back();
        live.pop_back();
      }
    }
  };
  std::thread a(worker, 1, false), b(worker, uint64_t{1} << 30, true);
  for (int i = 0; i < 25; i++) {
    std::string file = path("t" + std::to_string(i) + ".pb");
    ASSERT_EQ(ak_prof_dump(file.c_str()), 0) << ak_last_error();
    profdec::Profile p = load(file);
    EXPECT_GE(profdec::sum(p, INUSE_SPACE), 0);
  }
  stop = true;
  a.join();
  b.join();
  ASSERT_EQ(ak_prof_dump(path("last.pb").c_str()), 0);
  profdec::Profile p = load(path("last.pb"));
  EXPECT_EQ(uint64_t(profdec::sum(p, INUSE_SPACE)), stats().inuse_bytes);
  EXPECT_GT(profdec::sum(p, INUSE_SPACE, "pool", "captured"), 0);
  _ak_prof_check();
}

TEST_F(ProfDump, IntervalDumpsAreNumbered) {
  ASSERT_EQ(ak_prof_set_dump_path(path("iv.%p.pb").c_str()), 0);
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_INTERVAL, 8 << 20), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  auto s = stack_of(1, 4);
  // Each sample of 4 KiB at the default period stands for about 516 KiB.
  for (uint64_t i = 0; i < 100; i++) _ak_prof_record_stack(block(i), 4096, s.data(), 4, nullptr, nullptr);
  uint64_t inuse = stats().inuse_bytes;
  unsigned expected = unsigned(inuse / (8 << 20));
  ASSERT_GE(expected, 5u);
  int64_t last = 0;
  for (unsigned k = 1; k <= expected; k++) {
    char name[64];
    snprintf(name, sizeof name, "iv.%d.pb.%04u", int(getpid()), k);
    profdec::Profile p = load(path(name));
    int64_t in = profdec::sum(p, INUSE_SPACE);
    EXPECT_GE(in, int64_t(k) * (8 << 20)) << name;
    EXPECT_GT(in, last);
    last = in;
  }
  char next[64];
  snprintf(next, sizeof next, "iv.%d.pb.%04u", int(getpid()), expected + 1);
  EXPECT_NE(access(path(next).c_str(), F_OK), 0);
  EXPECT_EQ(stats().dumps, expected);
}

TEST_F(ProfDump, EveryProcessThatStartedItWritesItsExitDump) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (ak_prof_set_dump_path(path("exit.%p.pb").c_str()) != 0 || ak_prof_start() != 0) _exit(2);
    auto s = stack_of(3, 5);
    _ak_prof_record_stack(block(1), 2048, s.data(), 5, "arena", "parse");
    exit(0);  // the destructor writes the dump
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  profdec::Profile p = load(path("exit." + std::to_string(pid) + ".pb"));
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_GT(profdec::sum(p, INUSE_SPACE, "arena", "parse"), 0);
  // A process that never started the profiler writes nothing.
  EXPECT_NE(access(path("exit." + std::to_string(getpid()) + ".pb").c_str(), F_OK), 0);
}

// Runs prof_prog with `env` added; returns its exit status, stdout in *out
// and stderr in *err.
int run_prog(const std::vector<std::string> &env, std::string *out, std::string *err,
             const std::string &dir) {
  // The test's own AK_PROF* (a suite run with AK_PROF=1) do not reach it.
  std::string cmd = "env -u AK_PROF -u AK_PROF_SAMPLE -u AK_PROF_DUMP -u AK_PROF_INTERVAL -u AK_PROF_STACK";
  for (const auto &e : env) cmd += " '" + e + "'";
  cmd += " '" AK_PROF_PROG "' 8 >'" + dir + "/out' 2>'" + dir + "/err'";
  int rc = system(cmd.c_str());
  *out = profdec::read_file(dir + "/out");
  *err = profdec::read_file(dir + "/err");
  return rc;
}

TEST_F(ProfDump, TheEnvironmentStartsItAtLoadAndDumpsAtExit) {
  if (!*AK_PROF_PROG) GTEST_SKIP() << "a cross build cannot start prof_prog from a test";
  std::string out, err;
  ASSERT_EQ(
      run_prog({"AK_PROF=1", "AK_PROF_SAMPLE=4096", "AK_PROF_DUMP=" + path("env.pb")}, &out, &err, dir_), 0)
      << err;
  EXPECT_NE(out.find("active=1"), std::string::npos) << out;
  EXPECT_NE(out.find("sample_bytes=4096"), std::string::npos) << out;
  EXPECT_EQ(err, "");
  profdec::Profile p = load(path("env.pb"));
  EXPECT_EQ(p.period, 4096);
  EXPECT_EQ(p.samples.size(), 3u);  // three sites, one label each
  // Without AK_PROF=1 nothing runs and nothing is written.
  ASSERT_EQ(run_prog({"AK_PROF_DUMP=" + path("off.pb")}, &out, &err, dir_), 0);
  EXPECT_NE(out.find("active=0 samples=0"), std::string::npos) << out;
  EXPECT_NE(access(path("off.pb").c_str(), F_OK), 0);
}

TEST_F(ProfDump, InvalidEnvironmentValuesAreReported) {
  if (!*AK_PROF_PROG) GTEST_SKIP() << "a cross build cannot start prof_prog from a test";
  std::string out, err;
  ASSERT_EQ(run_prog({"AK_PROF=1", "AK_PROF_SAMPLE=12abc", "AK_PROF_STACK=frames"}, &out, &err, dir_), 0);
  EXPECT_NE(err.find("arenakit: AK_PROF_SAMPLE=12abc is not valid"), std::string::npos) << err;
  EXPECT_NE(err.find("arenakit: AK_PROF_STACK=frames is not valid"), std::string::npos) << err;
  EXPECT_NE(out.find("sample_bytes=524288"), std::string::npos) << out;
  ASSERT_EQ(run_prog({"AK_PROF=yes"}, &out, &err, dir_), 0);
  EXPECT_NE(err.find("arenakit: AK_PROF=yes is not valid (0 or 1)"), std::string::npos) << err;
  ASSERT_EQ(run_prog({"AK_PROF=1", "AK_PROF_STACK=fp"}, &out, &err, dir_), 0);
  EXPECT_NE(out.find("stack=1"), std::string::npos) << out;
}

TEST_F(ProfDump, AForkedChildStartsWithTheParentsProfile) {
  ASSERT_EQ(ak_prof_start(), 0);
  for (uint64_t i = 0; i < 3; i++) {
    auto s = stack_of(i, 4);
    _ak_prof_record_stack(block(i), 8192, s.data(), 4, nullptr, nullptr);
  }
  uint64_t one = stats().inuse_bytes / 3;
  std::string child_dump = path("child.pb");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ak_prof_stats st;
    ak_prof_stats_get(&st);
    if (st.live_samples != 3 || st.samples != 3 || !st.active) fork_child_exit(2);
    _ak_prof_forget(block(0));  // a block the parent allocated, freed in the child
    auto s = stack_of(9, 4);
    _ak_prof_record_stack(block(9), 8192, s.data(), 4, nullptr, nullptr);
    if (ak_prof_dump(child_dump.c_str()) != 0) fork_child_exit(3);
    ak_prof_stats_get(&st);
    fork_child_exit(st.live_samples == 3 && st.unknown_frees == 0 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(stats().live_samples, 3u);  // the parent's own profile is untouched
  profdec::Profile p = load(child_dump);
  EXPECT_EQ(uint64_t(profdec::sum(p, INUSE_SPACE)), 3 * one);
  EXPECT_EQ(p.samples.size(), 4u);
}

TEST_F(ProfDump, ForkedChildrenNeverHangWhileThreadsRecord) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 4096), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  std::atomic<bool> stop{false};
  auto churn = [&](uint64_t base) {
    for (uint64_t i = 0; !stop.load(); i++) {
      if (i % 16 == 0) std::this_thread::yield();
      _ak_prof_record(block(base + i), 512, "pool", "churn");
      if (i % 4 == 0) (void)ak_prof_dump(path("bg" + std::to_string(base) + ".pb").c_str());
      if (i >= 64) _ak_prof_forget(block(base + i - 64));
    }
  };
  std::thread a(churn, 1), b(churn, uint64_t{1} << 30);
  for (int i = 0; i < 30; i++) {
    ForkChildWatch watch;
    ASSERT_TRUE(watch.open());
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      watch.in_child();
      _ak_prof_record(block(uint64_t{1} << 40), 512, "pool", "child");
      watch.progress();
      int rc = ak_prof_dump(path("f.%p.pb").c_str());
      watch.progress();
      _ak_prof_check();
      fork_child_exit(rc == 0 ? 0 : 3);
    }
    ForkChildWatch::Outcome o = watch.wait(pid, std::chrono::seconds(20));
    ASSERT_FALSE(o.hung) << "child " << i << " hung";
    ASSERT_TRUE(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0) << "child " << i << ": " << o.status;
  }
  stop = true;
  a.join();
  b.join();
  _ak_prof_check();
}

}  // namespace
