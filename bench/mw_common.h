/* SPDX-License-Identifier: MIT */
// mw_common.h - what the malloc-comparison scenarios (malloc-collatz,
// malloc-workloads, malloc-idle) share: extra allocator columns, one process
// per measurement, time limits, peak resident memory and the workloads'
// random stream.
//
// The runner starts one child per installed malloc (glibc, tcmalloc,
// mimalloc, jemalloc). These scenarios add two more columns, run from the
// glibc child (the one without LD_PRELOAD):
//   arenakit  LD_PRELOAD of libarenakit-malloc.so (AKB_ARENAKIT_MALLOC, the
//             CMake target arenakit-malloc, built with ak_bench)
//   simple    LD_PRELOAD of libak-simple-malloc.so (AKB_SIMPLE_MALLOC,
//             bench/simple_malloc.c: one mutex, one first-fit free list)
// Every measurement (one program at one size, one workload) runs in a
// process of its own ("sub-process": `ak_bench child <scenario> <column>
// sub=1 ...`), so that its peak resident memory (VmHWM) is its own, and so
// that it can be killed at a time limit. A child's values come back to the
// runner as "<column>.<what>" keys.
#ifndef AK_BENCH_MW_COMMON_H
#define AK_BENCH_MW_COMMON_H

#include <dlfcn.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench.h"
#include "bench_util.h"

#ifndef AKB_ARENAKIT_MALLOC
#define AKB_ARENAKIT_MALLOC ""
#endif
#ifndef AKB_SIMPLE_MALLOC
#define AKB_SIMPLE_MALLOC ""
#endif

namespace akmw {

using akb::fmt;

// Column order of the tables (those that ran).
inline const std::vector<std::string> &column_order() {
  static const std::vector<std::string> c = {"arenakit", "arenakit+prof", "arenakit-base", "glibc",
                                             "simple",   "jemalloc",      "tcmalloc",      "mimalloc"};
  return c;
}

// ---- child side -----------------------------------------------------------------

// The random stream of the workloads: splitmix64 from a fixed seed, so that
// every allocator column gets the same sequence of requests.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t range(std::size_t lo, std::size_t hi) { return lo + next() % (hi - lo + 1); }
  // log-uniform in [lo, hi]
  std::size_t logsize(std::size_t lo, std::size_t hi) {
    int bits = 0;
    while ((lo << (bits + 1)) <= hi) bits++;
    std::size_t base = lo << (next() % static_cast<std::uint64_t>(bits + 1));
    std::size_t n = base + next() % base;
    return n > hi ? hi : n;
  }
};

struct Column {
  std::string label;
  std::string preload;  // "" : inherit this process's environment
};

// argv[3] of this process (`ak_bench child <scenario> <allocator> ...`).
inline std::string self_label() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::size_t s = 0;
  for (std::size_t i = 0; i < all.size(); i++)
    if (all[i] == '\0') {
      argv.push_back(all.substr(s, i - s));
      s = i + 1;
    }
  return argv.size() > 3 ? argv[3] : std::string("?");
}

// The columns this child measures: its own allocator, plus arenakit and
// simple in the glibc child; only arenakit with `arenakit_only` (the
// hardened-build cost: the path is this ak_bench's build's
// libarenakit-malloc.so, so a hardened ak_bench measures the hardened one).
// `with_prof`: also "arenakit+prof", the drop-in with the heap profiler
// started at default sampling (start_profiler_if_asked, in the child).
// AK_BENCH_BASELINE=PATH (a libarenakit-malloc.so built from another
// revision, scripts/bench_baseline.sh): also "arenakit-base", that library
// preloaded, for a same-run comparison of two builds of the drop-in.
inline std::vector<Column> child_columns(bool arenakit_only = false, bool with_prof = false) {
  std::vector<Column> cols = {{self_label(), ""}};
  const char *pre = std::getenv("LD_PRELOAD");
  if (arenakit_only && (!pre || !*pre)) {
    cols.clear();
    if (*AKB_ARENAKIT_MALLOC && access(AKB_ARENAKIT_MALLOC, R_OK) == 0)
      cols.push_back(Column{"arenakit", AKB_ARENAKIT_MALLOC});
    else
      std::fprintf(stderr, "ak_bench: no arenakit column: %s not built\n", AKB_ARENAKIT_MALLOC);
    return cols;
  }
  if (!pre || !*pre) {
    if (*AKB_ARENAKIT_MALLOC && access(AKB_ARENAKIT_MALLOC, R_OK) == 0) {
      cols.insert(cols.begin(), Column{"arenakit", AKB_ARENAKIT_MALLOC});
      if (with_prof) cols.insert(cols.begin() + 1, Column{"arenakit+prof", AKB_ARENAKIT_MALLOC});
    } else
      std::fprintf(stderr, "ak_bench: no arenakit column: %s not built\n", AKB_ARENAKIT_MALLOC);
    const char *base = std::getenv("AK_BENCH_BASELINE");
    if (base && *base) {
      if (access(base, R_OK) == 0)
        cols.push_back(Column{"arenakit-base", base});
      else
        std::fprintf(stderr, "ak_bench: no arenakit-base column: AK_BENCH_BASELINE=%s: %s\n", base,
                     std::strerror(errno));
    }
    if (*AKB_SIMPLE_MALLOC && access(AKB_SIMPLE_MALLOC, R_OK) == 0)
      cols.push_back(Column{"simple", AKB_SIMPLE_MALLOC});
    else
      std::fprintf(stderr, "ak_bench: no simple column: %s not built\n", AKB_SIMPLE_MALLOC);
  }
  return cols;
}

// A field of /proc/self/status in bytes ("VmHWM", "VmRSS"); NaN if absent.
inline double proc_status_bytes(const char *field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  std::string want = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.compare(0, want.size(), want) == 0) return std::atof(line.c_str() + want.size()) * 1024.0;
  return NAN;
}

// The 1-minute load average (/proc/loadavg; NaN if unreadable): on a shared
// machine, how many processes competed for its cores while a child ran.
inline double load_average() {
  std::ifstream f("/proc/loadavg");
  double v = NAN;
  return (f >> v) ? v : NAN;
}

// Minor page faults of this process so far (getrusage, every thread):
// each one a page the kernel had to find and zero or map, 10-30 us under
// load on this machine. A workload reports the difference across its run.
inline double minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_minflt);
}

// In a sub-process of the "arenakit+prof" column: starts the preloaded
// drop-in's heap profiler (ak_prof_start, found with dlsym: the runner
// does not link the library) at its default sampling. False when the
// column is another one, or the symbol is missing.
inline bool start_profiler_if_asked() {
  if (self_label() != "arenakit+prof") return false;
  auto start = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "ak_prof_start"));
  if (!start || start() != 0) {
    std::fprintf(stderr, "ak_bench: arenakit+prof: ak_prof_start %s\n", start ? "failed" : "not found");
    return false;
  }
  return true;
}

struct SubResult {
  enum Kind { kOk, kOver, kCrash } kind = kOk;
  int status = 0;  // wait status when it crashed
  double wall = 0;
  std::map<std::string, std::string> kv;
  double num(const std::string &k) const {
    auto it = kv.find(k);
    return it == kv.end() ? NAN : std::atof(it->second.c_str());
  }
};

inline std::string basename_of(const std::string &p) {
  std::size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// Time limits of one measurement, in seconds: the simple column's is short
// (one locked first-fit list: its row shows how far behind a naive
// allocator falls, not the exact time), and a quick run's shorter still (a
// smoke run shows the column is wired).
constexpr double kLimitS = 120;
inline double simple_limit_s(bool quick) { return quick ? 1 : 20; }

// Runs `ak_bench child <scenario> <col.label> sub=1 args...` with the
// column's LD_PRELOAD, kills it after limit_s seconds. Its stderr is ours.
inline SubResult run_sub(const Column &col, const std::string &scenario, const std::vector<std::string> &args,
                         double limit_s) {
  SubResult r;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  std::vector<std::string> av = {exe, "child", scenario, col.label};
  av.insert(av.end(), args.begin(), args.end());
  av.push_back("sub=1");
  double t0 = akb::now_s();
  int fd;
  pid_t pid = akb::spawn_piped(av, col.preload, false, &fd);
  if (pid < 0) {
    r.kind = SubResult::kCrash;
    return r;
  }
  std::string out;
  bool killed = false;
  int status = akb::wait_piped(pid, fd, t0 + limit_s, out, &killed);
  r.wall = akb::now_s() - t0;
  for (const auto &[k, v] : akb::key_values(out)) r.kv[k] = v;
  if (killed) {
    r.kind = SubResult::kOver;
    return r;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.kind = SubResult::kCrash;
    r.status = status;
    std::fprintf(stderr, "ak_bench: %s/%s sub-process failed (%s %d):", scenario.c_str(), col.label.c_str(),
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    for (const auto &a : args) std::fprintf(stderr, " %s", a.c_str());
    std::fprintf(stderr, "\n");
    return r;
  }
  // The preload must have taken.
  std::string want = col.preload.empty() ? std::string() : basename_of(col.preload);
  if (!want.empty() && r.kv["malloc_from"].find(want) == std::string::npos) {
    std::fprintf(stderr, "ak_bench: %s: malloc resolves to %s, expected %s - LD_PRELOAD did not take\n",
                 col.label.c_str(), r.kv["malloc_from"].c_str(), want.c_str());
    r.kind = SubResult::kCrash;
  }
  return r;
}

// Configurations that ran past their limit in an earlier repetition of the
// same `ak_bench run` (keyed by the runner's pid and start time) are not
// run again: "over" is remembered in a file under /tmp.
class OverMemo {
 public:
  explicit OverMemo(const std::string &scenario) {
    pid_t pp = getppid();
    std::ifstream st("/proc/" + std::to_string(pp) + "/stat");
    std::string s((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    std::size_t close_paren = s.rfind(')');
    std::string start = "0";
    if (close_paren != std::string::npos) {
      std::istringstream in(s.substr(close_paren + 2));
      std::string f;
      for (int i = 3; i <= 22 && in >> f; i++)
        if (i == 22) start = f;
    }
    path_ = "/tmp/akb-" + scenario + "-" + std::to_string(pp) + "-" + start + ".over";
    std::ifstream f(path_);
    std::string line;
    while (std::getline(f, line)) over_[line] = true;
  }
  bool over(const std::string &key) const { return over_.count(key) != 0; }
  void add(const std::string &key) {
    over_[key] = true;
    std::ofstream f(path_, std::ios::app);
    f << key << "\n";
  }

 private:
  std::string path_;
  std::map<std::string, bool> over_;
};

// ---- parent side --------------------------------------------------------------------

// The child that reported "<col>.<key>" (arenakit and simple come from the
// glibc child); "" if none.
inline std::string host_of(const akb::RunData &d, const std::string &col, const std::string &key) {
  for (const auto &a : d.allocators)
    if (d.has(a.label, col + "." + key)) return a.label;
  return "";
}

inline double median(const akb::RunData &d, const std::string &col, const std::string &key) {
  std::string h = host_of(d, col, key);
  return h.empty() ? NAN : d.median(h, col + "." + key);
}

inline bool has(const akb::RunData &d, const std::string &col, const std::string &key) {
  return !host_of(d, col, key).empty();
}

// The columns with any result, in column_order().
inline std::vector<std::string> columns(const akb::RunData &d, const std::string &probe_key) {
  std::vector<std::string> out;
  for (const auto &c : column_order())
    if (has(d, c, probe_key)) out.push_back(c);
  return out;
}

}  // namespace akmw

#endif  // AK_BENCH_MW_COMMON_H
