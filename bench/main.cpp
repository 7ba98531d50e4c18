/* SPDX-License-Identifier: MIT */
// main.cpp - ak_bench, the benchmark runner.
//
//   ak_bench list
//   ak_bench run <scenario|all> [--quick] [--reps N] [--rounds N] [--n N]
//                [--out DIR] [--allocators a,b,...] [--cpu N|none] [--no-plot]
//                [--strict] [--hardened-exe PATH [--hardened-only]
//                [--hardened-reps N] [--hardened-tag TAG]]
//   ak_bench info                                        (build: hardened?)
//   ak_bench child <scenario> <allocator> key=value...   (internal)
//
// `run` detects the installed mallocs, lets the scenario choose its
// parameters, then runs one child process per allocator and repetition,
// interleaved (A B C D A B C D ...), each child being this program again
// with LD_PRELOAD set to the allocator's library (glibc: no preload). It
// takes the median of every measurement over the repetitions, prints the
// scenario's tables and acceptance checks, and writes <out>/<scenario>.md,
// .csv, .table.md (headline table), .svg (bench/plot.py) and README-table.md
// (the headline tables of every scenario whose results are in <out>;
// scripts/bench.sh copies them into docs/benchmarks.md, "Current figures").
//
// With --hardened-exe PATH (an ak_bench built with -DAK_HARDENED=ON), `run`
// then measures the cost of the hardened build: for each scenario that
// lists arenakit's metrics (Scenario::metrics), the glibc child of this
// ak_bench ("normal") and of PATH ("hardened"), interleaved (normal,
// hardened, normal, ...), only arenakit's measurements
// (akb_arenakit_only=1); per metric the medians and the slowdown
// (hardened / normal for times, normal / hardened for throughputs), their
// geometric mean and the acceptance check on it, in
// <out>/hardened-cost[-TAG].{md,csv}.
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <sched.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench.h"
#include "bench_util.h"

extern char **environ;

namespace fs = std::filesystem;

#ifndef AKB_SOURCE_DIR
#define AKB_SOURCE_DIR "."
#endif
#ifndef AKB_BINARY_DIR
#define AKB_BINARY_DIR "."
#endif
#ifndef AKB_MULTIARCH
#define AKB_MULTIARCH ""
#endif
#ifndef AKB_HARDENED_MASK
#define AKB_HARDENED_MASK 0
#endif
#ifndef AKB_HARDEN
#define AKB_HARDEN ""
#endif
#ifndef AKB_ARENAKIT_MALLOC
#define AKB_ARENAKIT_MALLOC ""
#endif

namespace akb {

// ---- child-side helpers ------------------------------------------------------

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void emit(const std::string &key, double value) {
  std::printf("%s=%.9g\n", key.c_str(), value);
  std::fflush(stdout);
}

void emit_str(const std::string &key, const std::string &value) {
  std::printf("%s=%s\n", key.c_str(), value.c_str());
  std::fflush(stdout);
}

std::uint64_t param_u64(const Params &p, const std::string &key, std::uint64_t def) {
  auto it = p.find(key);
  if (it == p.end()) return def;
  return std::strtoull(it->second.c_str(), nullptr, 10);
}

// ---- RunData -------------------------------------------------------------------

static const std::vector<double> *find_samples(const RunData &d, const std::string &alloc,
                                               const std::string &key) {
  auto a = d.samples.find(alloc);
  if (a == d.samples.end()) return nullptr;
  auto k = a->second.find(key);
  if (k == a->second.end() || k->second.empty()) return nullptr;
  return &k->second;
}

bool RunData::has(const std::string &alloc, const std::string &key) const {
  return find_samples(*this, alloc, key) != nullptr;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double RunData::median(const std::string &alloc, const std::string &key) const {
  const std::vector<double> *s = find_samples(*this, alloc, key);
  return s ? median_of(*s) : NAN;
}

double RunData::median_ratio(const std::string &alloc, const std::string &num, const std::string &den) const {
  const std::vector<double> *a = find_samples(*this, alloc, num), *b = find_samples(*this, alloc, den);
  if (!a || !b || a->size() != b->size()) return NAN;
  std::vector<double> r;
  for (std::size_t i = 0; i < a->size(); i++) r.push_back((*a)[i] / (*b)[i]);
  return median_of(r);
}

double RunData::max(const std::string &alloc, const std::string &key) const {
  const std::vector<double> *s = find_samples(*this, alloc, key);
  return s ? *std::max_element(s->begin(), s->end()) : NAN;
}

double RunData::min(const std::string &alloc, const std::string &key) const {
  const std::vector<double> *s = find_samples(*this, alloc, key);
  return s ? *std::min_element(s->begin(), s->end()) : NAN;
}

}  // namespace akb

namespace {

using akb::Allocator;
using akb::Options;
using akb::Report;
using akb::RunData;
using akb::Scenario;
using akb::Table;

// ---- small utilities -------------------------------------------------------------

// Runs a shell command, returns its stdout ("" when it fails).
std::string capture(const std::string &cmd) {
  std::string out;
  FILE *f = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!f) return out;
  char buf[4096];
  std::size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, k);
  pclose(f);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) i++;
  return s.substr(i);
}

std::string shell_quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string fmt_num(double v, int precision) {
  if (std::isnan(v)) return "n/a";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", precision, v);
  return b;
}

bool write_file(const fs::path &p, const std::string &text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::fprintf(stderr, "ak_bench: cannot write %s\n", p.c_str());
    return false;
  }
  return true;
}

std::string read_file(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- allocators -------------------------------------------------------------------

struct KnownMalloc {
  const char *label;
  std::vector<const char *> sonames;  // in order of preference
  const char *package;                // Debian package that provides it
};

const std::vector<KnownMalloc> &known_mallocs() {
  // Column order of the seed's table.
  static const std::vector<KnownMalloc> k = {
      {"glibc", {}, "libc6"},
      {"tcmalloc", {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4"}, "libtcmalloc-minimal4"},
      {"mimalloc", {"libmimalloc.so.2", "libmimalloc.so"}, "libmimalloc2.0"},
      {"jemalloc", {"libjemalloc.so.2", "libjemalloc.so"}, "libjemalloc2"},
  };
  return k;
}

// Where the dynamic linker would find `soname`: ldconfig's cache first
// (entries for this architecture), then the usual directories.
std::string find_library(const std::string &soname) {
  std::string cache = capture("/sbin/ldconfig -p || /usr/sbin/ldconfig -p || ldconfig -p");
  std::istringstream in(cache);
  std::string line;
#if defined(__x86_64__)
  const char *arch_tag = "x86-64";
#elif defined(__aarch64__)
  const char *arch_tag = "AArch64";
#else
  const char *arch_tag = "";
#endif
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (t.compare(0, soname.size() + 1, soname + " ") != 0) continue;
    if (*arch_tag && t.find(arch_tag) == std::string::npos) continue;
    std::size_t arrow = t.find("=> ");
    if (arrow == std::string::npos) continue;
    std::string path = t.substr(arrow + 3);
    // merged /usr: prefer the /usr/lib name that dpkg knows
    if (path.rfind("/lib", 0) == 0 && access(("/usr" + path).c_str(), R_OK) == 0) path = "/usr" + path;
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  std::vector<std::string> dirs;
  if (*AKB_MULTIARCH) {
    dirs.push_back(std::string("/usr/lib/") + AKB_MULTIARCH);
    dirs.push_back(std::string("/lib/") + AKB_MULTIARCH);
  }
  for (const char *d : {"/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib64", "/lib"}) dirs.push_back(d);
  for (const auto &d : dirs) {
    std::string path = d + "/" + soname;
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

// The Debian package owning `path`, and its version ("" when unknown).
void package_of(const std::string &path, std::string &pkg, std::string &ver) {
  std::string owner;
  for (const std::string &p : {path, fs::weakly_canonical(path).string()}) {
    owner = trim(capture("dpkg-query -S " + shell_quote(p)));
    if (!owner.empty()) break;
  }
  std::size_t colon = owner.find(": ");
  if (colon != std::string::npos) {
    pkg = owner.substr(0, colon);
    std::size_t comma = pkg.find(',');
    if (comma != std::string::npos) pkg = pkg.substr(0, comma);
  }
  if (!pkg.empty()) ver = trim(capture("dpkg-query -W -f='${Version}' " + shell_quote(pkg)));
}

std::string env_name(const std::string &label) {
  std::string e = "AK_BENCH_";
  for (char c : label) e += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return e;  // e.g. AK_BENCH_JEMALLOC=/path/to/libjemalloc.so
}

// Detects the mallocs; `missing` gets one line per absent one.
std::vector<Allocator> detect_allocators(const std::vector<std::string> &wanted,
                                         std::vector<std::string> &missing) {
  std::vector<Allocator> out;
  for (const auto &k : known_mallocs()) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), k.label) == wanted.end()) continue;
    Allocator a;
    a.label = k.label;
    if (a.label == "glibc") {
      a.package = "libc6";
      a.version = trim(capture("dpkg-query -W -f='${Version}' libc6"));
      if (a.version.empty()) a.version = gnu_get_libc_version();
      out.push_back(a);
      continue;
    }
    const char *override_path = std::getenv(env_name(k.label).c_str());
    if (override_path && *override_path) {
      a.path = override_path;
    } else {
      for (const char *so : k.sonames) {
        a.path = find_library(so);
        if (!a.path.empty()) break;
      }
    }
    if (a.path.empty() || access(a.path.c_str(), R_OK) != 0) {
      missing.push_back(std::string(k.label) + ": not installed (Debian: sudo apt-get install " + k.package +
                        ", or scripts/deps.sh bench; or set " + env_name(k.label) + "=/path/to/lib.so)");
      continue;
    }
    package_of(a.path, a.package, a.version);
    out.push_back(a);
  }
  return out;
}

// ---- the machine -------------------------------------------------------------------

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, family, mod;
  bool hv = false;
  while (std::getline(f, line)) {
    auto val = [&]() { return trim(line.substr(line.find(':') + 1)); };
    if (model.empty() && line.rfind("model name", 0) == 0) model = val();
    if (family.empty() && line.rfind("cpu family", 0) == 0) family = val();
    if (mod.empty() && line.rfind("model\t", 0) == 0) mod = val();
    if (line.rfind("flags", 0) == 0 && line.find(" hypervisor") != std::string::npos) hv = true;
  }
  if (model.empty()) model = "unknown CPU";
  if (!family.empty()) model += " (family " + family + ", model " + mod + ")";
  if (hv) model += ", virtual machine";
  return model;
}

std::string machine_md(const std::vector<Allocator> &allocs) {
  std::string md;
  utsname u{};
  uname(&u);
  char date[64];
  std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  md += "- CPU: " + cpu_model() + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores online\n";
  md += std::string("- OS: ") + u.sysname + " " + u.release + " " + u.machine;
  std::string os = capture(". /etc/os-release && echo \"$PRETTY_NAME\"");
  if (!trim(os).empty()) md += " (" + trim(os) + ")";
  md += "\n";
  md += std::string("- glibc: ") + gnu_get_libc_version();
  for (const auto &a : allocs)
    if (a.label == "glibc" && !a.version.empty()) md += " (" + a.package + " " + a.version + ")";
  md += "\n";
  for (const auto &a : allocs) {
    if (a.label == "glibc") continue;
    md += "- " + a.label + ": " + (a.package.empty() ? "?" : a.package) + " " +
          (a.version.empty() ? "(version unknown)" : a.version) + " (`" + a.path + "`)\n";
  }
  md += std::string("- Compiler: gcc ") + __VERSION__ + ", " + date + "\n";
  return md;
}

// ---- tables ---------------------------------------------------------------------------

std::string table_md(const Table &t) {
  std::vector<std::string> head = {t.corner};
  head.insert(head.end(), t.columns.begin(), t.columns.end());
  std::vector<std::vector<std::string>> body;
  for (std::size_t r = 0; r < t.rows.size(); r++) {
    std::vector<std::string> row = {t.rows[r]};
    for (std::size_t c = 0; c < t.columns.size(); c++) row.push_back(fmt_num(t.cells[r][c], t.precision));
    body.push_back(row);
  }
  std::vector<std::size_t> w(head.size(), 3);
  for (std::size_t c = 0; c < head.size(); c++) {
    w[c] = std::max(w[c], head[c].size());
    for (const auto &row : body) w[c] = std::max(w[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string> &cells) {
    std::string s = "|";
    for (std::size_t c = 0; c < cells.size(); c++)
      s += " " + cells[c] + std::string(w[c] - cells[c].size(), ' ') + " |";
    return s + "\n";
  };
  std::string s = line(head);
  std::vector<std::string> sep;
  for (std::size_t c = 0; c < head.size(); c++) sep.push_back("---");
  s += line(sep);
  for (const auto &row : body) s += line(row);
  return s;
}

std::string csv_field(const std::string &s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string tables_csv(const Report &rep) {
  std::string s = "table,row,allocator,value,unit\n";
  for (const auto &t : rep.tables)
    for (std::size_t r = 0; r < t.rows.size(); r++)
      for (std::size_t c = 0; c < t.columns.size(); c++) {
        double v = t.cells[r][c];
        char b[64];
        std::snprintf(b, sizeof b, "%.6g", v);
        s += csv_field(t.id) + "," + csv_field(t.rows[r]) + "," + csv_field(t.columns[c]) + "," +
             (std::isnan(v) ? std::string("") : std::string(b)) + "," + csv_field(t.unit) + "\n";
      }
  return s;
}

// One acceptance check as printed: PASS/FAIL on a full run; at --quick sizes
// the figure is shown but not judged (too few repetitions and too small a
// working set to say anything about the requirement).
std::string check_line(const akb::Check &c, bool quick) {
  char b[512];
  if (quick)
    std::snprintf(b, sizeof b, "not judged at quick sizes: %s = %.3f %s (a full run requires >= %.0f %s)",
                  c.name.c_str(), c.value, c.unit.c_str(), c.threshold, c.unit.c_str());
  else
    std::snprintf(b, sizeof b, "%s: %s = %.3f %s (required >= %.0f %s)", c.pass() ? "PASS" : "FAIL",
                  c.name.c_str(), c.value, c.unit.c_str(), c.threshold, c.unit.c_str());
  return b;
}

// ---- children ----------------------------------------------------------------------------

std::string self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : p.string();
}

// Runs one child (the program `exe`, "": this one); returns false if it
// failed. Its "key=value" lines go to `nums` (numbers) and `strs` (anything
// else); `order`, if given, gets the numbers' keys in the order printed.
bool run_child(const Scenario &sc, const Allocator &al, const akb::Params &params,
               std::map<std::string, double> &nums, std::map<std::string, std::string> &strs,
               const std::string &exe_path = "", std::vector<std::string> *order = nullptr) {
  std::string exe = exe_path.empty() ? self_exe() : exe_path;
  std::vector<std::string> args = {exe, "child", sc.name, al.label};
  for (const auto &kv : params) args.push_back(kv.first + "=" + kv.second);
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env;
  for (char **e = environ; *e; e++)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.emplace_back(*e);
  if (!al.path.empty()) env.push_back("LD_PRELOAD=" + al.path);
  std::vector<char *> envp;
  for (auto &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("ak_bench: pipe");
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  pid_t pid;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    std::fprintf(stderr, "ak_bench: cannot start %s: %s\n", exe.c_str(), std::strerror(rc));
    close(fds[0]);
    return false;
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t k = read(fds[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    out.append(buf, static_cast<std::size_t>(k));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "ak_bench: child %s/%s failed (status %d; %s)\n", sc.name, al.label.c_str(), status,
                 exe.c_str());
    return false;
  }
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    char *end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (!v.empty() && end && *end == '\0') {
      if (order && !nums.count(k)) order->push_back(k);
      nums[k] = d;
    } else {
      strs[k] = v;
    }
  }
  // The preload must have taken: malloc must come from the allocator's
  // library (glibc: from libc).
  std::string from = strs.count("malloc_from") ? strs["malloc_from"] : "?";
  std::string want = al.path.empty() ? std::string("libc.so") : fs::path(al.path).filename().string();
  std::string from_real = fs::weakly_canonical(from).filename().string();
  std::string want_real = al.path.empty() ? want : fs::weakly_canonical(al.path).filename().string();
  if (from.find(want) == std::string::npos && from_real != want_real) {
    std::fprintf(stderr, "ak_bench: child %s: malloc resolves to %s, expected %s - LD_PRELOAD did not take\n",
                 al.label.c_str(), from.c_str(), want.c_str());
    return false;
  }
  return true;
}

int child_main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: ak_bench child <scenario> <allocator> key=value...\n");
    return 2;
  }
  const Scenario *sc = nullptr;
  for (const Scenario *s : akb::scenarios())
    if (std::strcmp(s->name, argv[2]) == 0) sc = s;
  if (!sc) {
    std::fprintf(stderr, "ak_bench: unknown scenario %s\n", argv[2]);
    return 2;
  }
  akb::Params params;
  for (int i = 4; i < argc; i++) {
    const char *eq = std::strchr(argv[i], '=');
    if (eq) params[std::string(argv[i], static_cast<std::size_t>(eq - argv[i]))] = eq + 1;
  }
  // Which object does malloc come from in this process?
  Dl_info info{};
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  akb::emit_str("malloc_from", m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "?");
  akb::emit_str("allocator", argv[3]);
  return sc->child(params);
}

// ---- run ----------------------------------------------------------------------------------

void usage() {
  std::fprintf(
      stderr,
      "usage: ak_bench list\n"
      "       ak_bench run <scenario|all> [<scenario>...] [--quick] [--reps N] [--rounds N] [--n N]\n"
      "                [--out DIR] [--allocators glibc,tcmalloc,...] [--cpu N|none] [--no-plot] "
      "[--strict]\n"
      "                [--hardened-exe PATH [--hardened-only] [--hardened-reps N] [--hardened-tag TAG]]\n"
      "       ak_bench info\n");
}

std::string python() {
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";  // Debian's, with matplotlib
  return "python3";
}

// Headline tables of every scenario with results in `dir`, registry order.
void write_readme_snippet(const fs::path &dir) {
  std::string s =
      "<!-- Generated by ak_bench (scripts/bench.sh); do not edit. Full results: results/*.md -->\n";
  for (const Scenario *sc : akb::scenarios()) {
    fs::path p = dir / (std::string(sc->name) + ".table.md");
    if (fs::exists(p)) s += "\n" + read_file(p);
  }
  // The hardened build's cost (all mitigations; --hardened-tag runs are not
  // included), after the scenarios.
  fs::path h = dir / "hardened-cost.table.md";
  if (fs::exists(h)) s += "\n" + read_file(h);
  write_file(dir / "README-table.md", s);
}

int run_scenario(const Scenario &sc, const Options &opts, const std::vector<Allocator> &allocs,
                 const std::vector<std::string> &missing, bool plot, bool &all_pass, akb::Params &params) {
  int reps = opts.reps > 0 ? opts.reps : (opts.quick ? sc.quick_reps : sc.default_reps);
  std::printf("== %s: %s\n", sc.name, sc.description);
  std::fflush(stdout);
  params = sc.prepare(opts);
  RunData data;
  data.allocators = allocs;
  data.reps = reps;
  double t_start = akb::now_s();
  for (int r = 0; r < reps; r++) {
    for (const auto &al : allocs) {
      double t0 = akb::now_s();
      std::map<std::string, double> nums;
      std::map<std::string, std::string> strs;
      if (!run_child(sc, al, params, nums, strs)) return 1;
      for (const auto &kv : nums) data.samples[al.label][kv.first].push_back(kv.second);
      if (r == 0) data.strings[al.label] = strs;
      std::fprintf(stderr, "  [%s rep %d/%d] %-9s %.1f s\n", sc.name, r + 1, reps, al.label.c_str(),
                   akb::now_s() - t0);
    }
  }
  double elapsed = akb::now_s() - t_start;
  Report rep = sc.report(data, params);

  std::string params_line;
  for (const auto &kv : params) params_line += (params_line.empty() ? "" : ", ") + kv.first + "=" + kv.second;
  std::string method =
      std::to_string(reps) + (reps == 1 ? " repetition" : " interleaved repetitions") +
      " of one child process per allocator (" + std::to_string(allocs.size()) + " allocators, LD_PRELOAD, " +
      opts.pinned + "), medians quoted; parameters: " + params_line +
      (opts.quick ? " (--quick: not for publication)" : "") + "; " + fmt_num(elapsed, 0) + " s.";

  // stdout
  std::printf("\nAllocators: ");
  for (std::size_t i = 0; i < allocs.size(); i++)
    std::printf("%s%s %s", i ? ", " : "", allocs[i].label.c_str(), allocs[i].version.c_str());
  std::printf("\n");
  for (const auto &m : missing) std::printf("Missing: %s\n", m.c_str());
  std::printf("Method: %s\n", method.c_str());
  for (const auto &t : rep.tables) {
    std::printf("\n%s\n\n%s", t.title.c_str(), table_md(t).c_str());
    if (!t.note.empty()) std::printf("\n%s\n", t.note.c_str());
  }
  std::printf("\nAcceptance (computed from this run%s):\n",
              opts.quick ? "; --quick sizes are too small to judge it, use the full run" : "");
  for (const auto &c : rep.checks) {
    std::printf("%s\n", check_line(c, opts.quick).c_str());
    if (!opts.quick && !c.pass()) all_pass = false;
  }
  std::printf("\n");
  std::fflush(stdout);

  // files
  fs::path dir = opts.out_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "ak_bench: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::string machine = machine_md(allocs);
  std::string md = "# Benchmark " + std::string(sc.name) + "\n\n" + sc.description + ".\n\n";
  md +=
      "Generated by `ak_bench run " + std::string(sc.name) + "` (see docs/benchmarks.md). " + method + "\n\n";
  md += "## Machine\n\n" + machine;
  for (const auto &m : missing) md += "- missing: " + m + "\n";
  md += "\n## Results\n";
  for (const auto &t : rep.tables) {
    md += "\n### " + t.title + "\n\n" + table_md(t);
    if (!t.note.empty()) md += "\n" + t.note + "\n";
  }
  if (!rep.checks.empty()) {
    md += "\n## Acceptance\n\n";
    for (const auto &c : rep.checks) md += "- " + check_line(c, opts.quick) + "\n";
  }
  std::string stem = sc.name;
  if (fs::exists(dir / (stem + ".svg")) || plot) md += "\n![" + stem + "](" + stem + ".svg)\n";
  if (!rep.details_md.empty()) md += "\n" + rep.details_md;
  bool ok = write_file(dir / (stem + ".md"), md);
  ok = write_file(dir / (stem + ".csv"), tables_csv(rep)) && ok;

  // raw samples (results/raw/ is not committed)
  fs::create_directories(dir / "raw", ec);
  std::string raw = "allocator,key,rep,value\n";
  for (const auto &a : data.samples)
    for (const auto &k : a.second)
      for (std::size_t i = 0; i < k.second.size(); i++) {
        char b[64];
        std::snprintf(b, sizeof b, "%.9g", k.second[i]);
        raw += a.first + "," + k.first + "," + std::to_string(i + 1) + "," + b + "\n";
      }
  write_file(dir / "raw" / (stem + ".csv"), raw);

  // headline snippet
  if (!rep.tables.empty()) {
    const Table &h = rep.tables[0];
    std::string snip = "#### " + std::string(sc.name) + ": " + h.title + "\n\n" + table_md(h);
    std::string cpu = cpu_model();
    snip += "\n" + cpu + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores, glibc " +
            gnu_get_libc_version() + ". ";
    snip += "Details: [results/" + stem + ".md](../results/" + stem + ".md).\n";
    ok = write_file(dir / (stem + ".table.md"), snip) && ok;
    write_readme_snippet(dir);
  }

  if (plot) {
    fs::path script = fs::path(AKB_SOURCE_DIR) / "bench" / "plot.py";
    std::string cmd = shell_quote(python()) + " " + shell_quote(script.string()) + " " +
                      shell_quote((dir / (stem + ".csv")).string()) + " " +
                      shell_quote((dir / (stem + ".svg")).string()) + " " + shell_quote(stem);
    int prc = std::system(cmd.c_str());
    if (prc != 0) std::printf("Plot: skipped (%s exited with %d; see above)\n", script.c_str(), prc);
  }
  std::printf("Wrote %s/%s.{md,csv,table.md%s} and %s/README-table.md\n\n", dir.c_str(), stem.c_str(),
              plot ? ",svg" : "", dir.c_str());
  return ok ? 0 : 1;
}

// ---- hardened-build cost ------------------------------------------------------------------

struct HardenedOptions {
  std::string exe;    // the hardened ak_bench ("": no comparison)
  bool only = false;  // skip the normal scenario runs
  int reps = 0;       // repetitions (0: the scenario's, at least kMinHardenedReps)
  std::string tag;    // file name suffix: hardened-cost-<tag>.*
};

constexpr double kMaxHardenedSlowdown = 1.10;  // acceptance: geometric mean at most 1.10x
constexpr int kMinHardenedReps = 3;

// `ak_bench info`: how this program was built.
int info_main() {
  std::printf("hardened=%d\n", static_cast<int>(AKB_HARDENED_MASK));
  std::printf("harden=%s\n", AKB_HARDENED_MASK ? AKB_HARDEN : "");
  std::printf("arenakit_malloc=%s\n", AKB_ARENAKIT_MALLOC);
  std::printf("exe=%s\n", self_exe().c_str());
  return 0;
}

// The `info` lines of another ak_bench (empty if it does not run).
std::map<std::string, std::string> exe_info(const std::string &exe) {
  std::map<std::string, std::string> m;
  std::istringstream in(capture(shell_quote(exe) + " info"));
  std::string line;
  while (std::getline(in, line)) {
    std::size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// Shell-style pattern with '*' only.
bool glob_match(const char *pat, const char *s) {
  for (; *pat; pat++, s++) {
    if (*pat == '*') {
      for (;; s++) {
        if (glob_match(pat + 1, s)) return true;
        if (!*s) return false;
      }
    }
    if (*s != *pat) return false;
  }
  return *s == '\0';
}

std::string fmt_g(double v, const char *f = "%.4g") {
  if (std::isnan(v)) return "n/a";
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A CSV cell: empty for NaN.
std::string csv_num(double v, const char *f) { return std::isnan(v) ? std::string() : fmt_g(v, f); }

double geomean(const std::vector<double> &v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

struct CostRow {
  std::string key, unit;
  akb::Better better = akb::Better::lower;
  double normal = NAN, hardened = NAN, slowdown = NAN;
};

struct ScenarioCost {
  const Scenario *sc = nullptr;
  std::vector<CostRow> rows;
  std::vector<double> ratios;  // the valid slowdowns
  int reps = 0;
  double seconds = 0;
  bool failed = false;
  bool earlier = false;  // rows kept from the earlier report (not run this time)
  std::string params;
};

// Mitigations as written in the CSV ("links+guards": no commas, no quoting).
std::string plus_list(std::string s) {
  std::replace(s.begin(), s.end(), ',', '+');
  return s;
}

// The rows of an earlier <stem>.csv measured with the same mitigations, per
// scenario (empty if there is none).
std::map<std::string, std::vector<CostRow>> earlier_costs(const fs::path &csv,
                                                          const std::string &mitigations) {
  std::map<std::string, std::vector<CostRow>> out;
  std::istringstream in(read_file(csv));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find('"') != std::string::npos) continue;  // no such fields here
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string x;
    while (std::getline(ss, x, ',')) f.push_back(x);
    if (f.size() < 8 || f[0] == "scenario" || f[0] == "all" || f[1] == "geometric mean" ||
        f[7] != plus_list(mitigations))
      continue;
    CostRow r;
    r.key = f[1];
    r.unit = f[2];
    r.better = f[3] == "higher" ? akb::Better::higher : akb::Better::lower;
    auto num = [](const std::string &v) { return v.empty() ? NAN : std::strtod(v.c_str(), nullptr); };
    r.normal = num(f[4]);
    r.hardened = num(f[5]);
    r.slowdown = num(f[6]);
    out[f[0]].push_back(r);
  }
  return out;
}

// Runs the comparison for one scenario.
ScenarioCost scenario_cost(const Scenario &sc, akb::Params params, int reps, const std::string &hexe,
                           std::map<std::string, std::map<std::string, std::vector<double>>> &raw) {
  ScenarioCost c;
  c.sc = &sc;
  c.reps = reps;
  params[akb::kArenakitOnly] = "1";
  for (const auto &kv : params) c.params += (c.params.empty() ? "" : ", ") + kv.first + "=" + kv.second;
  Allocator glibc;
  glibc.label = "glibc";
  const std::string exes[2] = {self_exe(), hexe};
  const char *names[2] = {"normal", "hardened"};
  std::map<std::string, std::vector<double>> samples[2];
  std::vector<std::string> order;  // keys in the order the children print them
  double t_start = akb::now_s();
  for (int r = 0; r < reps && !c.failed; r++) {
    for (int v = 0; v < 2; v++) {
      double t0 = akb::now_s();
      std::map<std::string, double> nums;
      std::map<std::string, std::string> strs;
      if (!run_child(sc, glibc, params, nums, strs, exes[v], &order)) {
        std::fprintf(stderr, "ak_bench: hardened-cost: %s: the %s child failed; scenario left out\n", sc.name,
                     names[v]);
        c.failed = true;
        break;
      }
      for (const auto &kv : nums) samples[v][kv.first].push_back(kv.second);
      std::fprintf(stderr, "  [hardened-cost %s rep %d/%d] %-9s %.1f s\n", sc.name, r + 1, reps, names[v],
                   akb::now_s() - t0);
    }
  }
  c.seconds = akb::now_s() - t_start;
  for (int v = 0; v < 2; v++) raw[std::string(sc.name) + "," + names[v]] = samples[v];
  if (c.failed) return c;
  std::vector<std::string> used;
  for (const akb::Metric &m : sc.metrics) {
    for (const std::string &k : order) {
      if (!glob_match(m.key, k.c_str()) || std::find(used.begin(), used.end(), k) != used.end()) continue;
      used.push_back(k);
      CostRow row;
      row.key = k;
      row.unit = m.unit ? m.unit : "";
      row.better = m.better;
      row.normal = samples[0].count(k) ? akb::median_of(samples[0][k]) : NAN;
      row.hardened = samples[1].count(k) ? akb::median_of(samples[1][k]) : NAN;
      if (row.normal > 0 && row.hardened > 0 && std::isfinite(row.normal) && std::isfinite(row.hardened)) {
        row.slowdown = m.better == akb::Better::lower ? row.hardened / row.normal : row.normal / row.hardened;
        c.ratios.push_back(row.slowdown);
      }
      c.rows.push_back(row);
    }
  }
  return c;
}

std::string cost_table(const ScenarioCost &c) {
  std::vector<std::vector<std::string>> rows;
  for (const auto &r : c.rows)
    rows.push_back({r.key, r.unit, r.better == akb::Better::lower ? "lower" : "higher", fmt_g(r.normal),
                    fmt_g(r.hardened), fmt_g(r.slowdown, "%.3fx")});
  rows.push_back({"geometric mean", "", "", "", "", fmt_g(geomean(c.ratios), "%.3fx")});
  return akb::md_table({"metric", "unit", "better", "normal", "hardened", "slowdown"}, rows);
}

int hardened_cost(const std::vector<const Scenario *> &todo,
                  const std::map<std::string, akb::Params> &prepared, const Options &opts,
                  const HardenedOptions &h, bool &all_pass) {
  std::map<std::string, std::string> mine = exe_info(self_exe()), theirs = exe_info(h.exe);
  std::string stem = "hardened-cost" + (h.tag.empty() ? std::string() : "-" + h.tag);
  std::printf(
      "== hardened-cost: slowdown of the hardened build, arenakit's metrics of every scenario, normal "
      "against hardened ak_bench\n");
  if (theirs.empty()) {
    std::fprintf(stderr, "ak_bench: hardened-cost: %s does not run (`%s info` printed nothing)\n",
                 h.exe.c_str(), h.exe.c_str());
    return 1;
  }
  std::vector<std::string> warnings;
  if (theirs["hardened"].empty() || theirs["hardened"] == "0")
    warnings.push_back(h.exe + " was built without AK_HARDENED (`info` says hardened=" + theirs["hardened"] +
                       "): both columns measure the normal build");
  if (mine["hardened"] != "0" && !mine["hardened"].empty())
    warnings.push_back("this ak_bench (the normal column) was built with AK_HARDENED (mask " +
                       mine["hardened"] + ")");
  if (!theirs["arenakit_malloc"].empty() && theirs["arenakit_malloc"] == mine["arenakit_malloc"])
    warnings.push_back("both programs preload the same libarenakit-malloc.so (" + mine["arenakit_malloc"] +
                       "): the malloc scenarios compare it with itself");
  for (const auto &w : warnings) std::printf("Warning: %s\n", w.c_str());
  std::string mitigations = theirs["harden"].empty() ? std::string("none") : theirs["harden"];
  std::fflush(stdout);

  std::vector<ScenarioCost> costs;
  std::map<std::string, std::map<std::string, std::vector<double>>> raw;
  int rc = 0;
  double t_start = akb::now_s();
  for (const Scenario *sc : todo) {
    if (sc->metrics.empty()) continue;
    auto it = prepared.find(sc->name);
    akb::Params params = it != prepared.end() ? it->second : sc->prepare(opts);
    int sreps = opts.reps > 0 ? opts.reps : (opts.quick ? sc->quick_reps : sc->default_reps);
    int reps = h.reps > 0 ? h.reps : std::max(kMinHardenedReps, sreps);
    costs.push_back(scenario_cost(*sc, params, reps, h.exe, raw));
    if (costs.back().failed) rc = 1;
  }
  double elapsed = akb::now_s() - t_start;

  // A run of some of the scenarios keeps the others' rows from the earlier
  // report (same file, same mitigations), as README-table.md keeps their
  // tables; they are marked "earlier run". Registry order.
  fs::path dir = opts.out_dir;
  int n_earlier = 0;
  {
    std::map<std::string, std::vector<CostRow>> old = earlier_costs(dir / (stem + ".csv"), mitigations);
    std::vector<ScenarioCost> merged;
    for (const Scenario *sc : akb::scenarios()) {
      auto ran = std::find_if(costs.begin(), costs.end(), [&](const ScenarioCost &c) { return c.sc == sc; });
      if (ran != costs.end()) {
        merged.push_back(*ran);
      } else if (old.count(sc->name)) {
        ScenarioCost e;
        e.sc = sc;
        e.earlier = true;
        e.rows = old[sc->name];
        for (const auto &r : e.rows)
          if (r.slowdown > 0 && std::isfinite(r.slowdown)) e.ratios.push_back(r.slowdown);
        merged.push_back(e);
        n_earlier++;
      }
    }
    costs = merged;
  }

  std::vector<double> all;
  std::vector<std::vector<std::string>> summary;
  for (const auto &c : costs) {
    all.insert(all.end(), c.ratios.begin(), c.ratios.end());
    double lo = c.ratios.empty() ? NAN : *std::min_element(c.ratios.begin(), c.ratios.end());
    double hi = c.ratios.empty() ? NAN : *std::max_element(c.ratios.begin(), c.ratios.end());
    summary.push_back({std::string(c.sc->name) + (c.earlier ? " (earlier run)" : ""),
                       c.failed ? "failed" : std::to_string(c.ratios.size()),
                       fmt_g(geomean(c.ratios), "%.3fx"), fmt_g(lo, "%.3fx"), fmt_g(hi, "%.3fx")});
  }
  double gm = geomean(all);
  summary.push_back({"all (geometric mean of every ratio)", std::to_string(all.size()), fmt_g(gm, "%.3fx"),
                     all.empty() ? "n/a" : fmt_g(*std::min_element(all.begin(), all.end()), "%.3fx"),
                     all.empty() ? "n/a" : fmt_g(*std::max_element(all.begin(), all.end()), "%.3fx")});
  std::string summary_md =
      akb::md_table({"scenario", "metrics", "slowdown (geometric mean)", "lowest", "highest"}, summary);

  akb::Check check;
  check.name = "hardened build geometric-mean slowdown <= " + fmt_g(kMaxHardenedSlowdown, "%.2f") + "x (" +
               fmt_g(gm, "%.3f") + "x over " + std::to_string(all.size()) + " arenakit metrics of " +
               std::to_string(costs.size()) + (costs.size() == 1 ? " scenario" : " scenarios") +
               (n_earlier ? " (" + std::to_string(n_earlier) + " from an earlier run)" : std::string()) +
               "; mitigations " + mitigations + "): " + fmt_g(kMaxHardenedSlowdown, "%.2f") + " / that";
  check.value = std::isnan(gm) ? 0 : kMaxHardenedSlowdown / gm;
  check.threshold = 1;
  check.unit = "x";

  std::string method =
      "per scenario, the glibc child (no preload; arenakit's measurements only, " +
      std::string(akb::kArenakitOnly) +
      "=1) of the normal and of the hardened ak_bench, interleaved (normal, hardened, normal, ...), " +
      opts.pinned +
      "; medians of the repetitions; slowdown = hardened / normal for times (lower is better), " +
      "normal / hardened for throughputs (higher is better); " + fmt_num(elapsed, 0) + " s" +
      (opts.quick ? " (--quick: not for publication)" : "") + ".";

  // stdout
  std::printf("\nMitigations: %s\nNormal:   %s (%s)\nHardened: %s (%s)\nMethod: %s\n", mitigations.c_str(),
              self_exe().c_str(), mine["arenakit_malloc"].c_str(), h.exe.c_str(),
              theirs["arenakit_malloc"].c_str(), method.c_str());
  std::string md_tables;
  for (const auto &c : costs) {
    if (c.earlier) {
      md_tables += "\n### " + std::string(c.sc->name) + " (earlier run, from the previous " + stem +
                   ".csv)\n\n" + cost_table(c);
      continue;
    }
    std::string head = std::string(c.sc->name) + " (" + std::to_string(c.reps) + " repetitions each, " +
                       fmt_num(c.seconds, 1) + " s)";
    std::string body =
        c.failed ? std::string("failed: a child exited with an error (see stderr)\n") : cost_table(c);
    std::printf("\n%s\n\n%s", head.c_str(), body.c_str());
    md_tables += "\n### " + head + "\n\nParameters: " + c.params + "\n\n" + body;
  }
  std::printf("\nHardened build cost, per scenario (slowdown: > 1 means the hardened build is slower)\n\n%s",
              summary_md.c_str());
  std::printf("\nAcceptance (computed from this run%s):\n%s\n\n",
              opts.quick ? "; --quick sizes are too small to judge it, use the full run" : "",
              check_line(check, opts.quick).c_str());
  if (!opts.quick && !check.pass()) all_pass = false;
  std::fflush(stdout);

  // files
  std::error_code ec;
  fs::create_directories(dir / "raw", ec);
  if (ec) {
    std::fprintf(stderr, "ak_bench: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  Allocator glibc;
  glibc.label = "glibc";
  glibc.package = "libc6";
  glibc.version = trim(capture("dpkg-query -W -f='${Version}' libc6"));
  std::string md =
      "# Hardened build cost\n\nThe slowdown of an ak_bench built with `-DAK_HARDENED=ON` (mitigations: " +
      mitigations + ") against the normal build, on arenakit's own metrics of every scenario " +
      "(docs/benchmarks.md, \"Hardened build cost\").\n\nGenerated by `ak_bench run ... --hardened-exe " +
      h.exe + "`. Method: " + method + "\n\n## Machine\n\n" + machine_md({glibc}) + "- normal: `" +
      self_exe() + "` (preloads `" + mine["arenakit_malloc"] + "`)\n- hardened: `" + h.exe + "` (preloads `" +
      theirs["arenakit_malloc"] + "`; AK_HARDENED mask " + theirs["hardened"] + ")\n";
  for (const auto &w : warnings) md += "- warning: " + w + "\n";
  md += "\n## Summary\n\n" + summary_md + "\n## Acceptance\n\n- " + check_line(check, opts.quick) +
        "\n\n## Per scenario\n" + md_tables;
  bool ok = write_file(dir / (stem + ".md"), md);

  std::string csv = "scenario,metric,unit,better,normal,hardened,slowdown,mitigations\n";
  std::string mit = plus_list(mitigations);
  for (const auto &c : costs) {
    for (const auto &r : c.rows)
      csv += csv_field(c.sc->name) + "," + csv_field(r.key) + "," + csv_field(r.unit) + "," +
             (r.better == akb::Better::lower ? "lower" : "higher") + "," + csv_num(r.normal, "%.9g") + "," +
             csv_num(r.hardened, "%.9g") + "," + csv_num(r.slowdown, "%.6g") + "," + mit + "\n";
    csv += csv_field(c.sc->name) + ",geometric mean,x,lower,,," + csv_num(geomean(c.ratios), "%.6g") + "," +
           mit + "\n";
  }
  csv += "all,geometric mean,x,lower,,," + csv_num(gm, "%.6g") + "," + mit + "\n";
  ok = write_file(dir / (stem + ".csv"), csv) && ok;

  std::string rawcsv = "scenario,build,key,rep,value\n";
  for (const auto &s : raw)
    for (const auto &k : s.second)
      for (std::size_t i = 0; i < k.second.size(); i++)
        rawcsv += s.first + "," + csv_field(k.first) + "," + std::to_string(i + 1) + "," +
                  fmt_g(k.second[i], "%.9g") + "\n";
  write_file(dir / "raw" / (stem + ".csv"), rawcsv);

  // The tables snippet (README-table.md) takes the default (all mitigations) report only.
  if (h.tag.empty()) {
    std::string snip = "#### hardened-cost: slowdown of the hardened build (" + mitigations +
                       "), arenakit's metrics\n\n" + summary_md + "\n" + cpu_model() + ", " +
                       std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores. Details: [results/" + stem +
                       ".md](../results/" + stem + ".md).\n";
    ok = write_file(dir / (stem + ".table.md"), snip) && ok;
    write_readme_snippet(dir);
  }
  std::printf("Wrote %s/%s.{md,csv%s}%s\n\n", dir.c_str(), stem.c_str(), h.tag.empty() ? ",table.md" : "",
              h.tag.empty() ? (" and " + dir.string() + "/README-table.md").c_str() : "");
  return ok ? rc : 1;
}

int run_main(int argc, char **argv) {
  Options opts;
  HardenedOptions hardened;
  std::vector<std::string> names, wanted;
  bool plot = true;
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ak_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      opts.quick = true;
    } else if (a == "--reps") {
      opts.reps = std::atoi(value().c_str());
    } else if (a == "--rounds") {
      opts.rounds = std::atoi(value().c_str());
    } else if (a == "--n") {
      opts.n = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--out") {
      opts.out_dir = value();
    } else if (a == "--allocators") {
      std::stringstream ss(value());
      std::string x;
      while (std::getline(ss, x, ',')) wanted.push_back(x);
    } else if (a == "--cpu") {
      std::string v = value();
      opts.cpu = v == "none" ? -1 : std::atoi(v.c_str());
    } else if (a == "--no-plot") {
      plot = false;
    } else if (a == "--strict") {
      opts.strict = true;
    } else if (a == "--hardened-exe") {
      hardened.exe = fs::absolute(value()).lexically_normal().string();
    } else if (a == "--hardened-only") {
      hardened.only = true;
    } else if (a == "--hardened-reps") {
      hardened.reps = std::atoi(value().c_str());
    } else if (a == "--hardened-tag") {
      hardened.tag = value();
    } else if (!a.empty() && a[0] == '-') {
      usage();
      return 2;
    } else {
      names.push_back(a);
    }
  }
  if (hardened.only && hardened.exe.empty()) {
    std::fprintf(stderr, "ak_bench: --hardened-only needs --hardened-exe PATH\n");
    return 2;
  }
  if (!hardened.exe.empty() && access(hardened.exe.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "ak_bench: --hardened-exe %s: not an executable\n", hardened.exe.c_str());
    return 2;
  }
  if (opts.out_dir.empty())
    opts.out_dir = opts.quick ? std::string(AKB_BINARY_DIR) + "/results-quick"
                              : std::string(AKB_SOURCE_DIR) + "/results";
  std::vector<const Scenario *> todo;
  if (names.empty() || std::find(names.begin(), names.end(), "all") != names.end()) {
    todo = akb::scenarios();
  } else {
    for (const auto &n : names) {
      const Scenario *f = nullptr;
      for (const Scenario *s : akb::scenarios())
        if (n == s->name) f = s;
      if (!f) {
        std::fprintf(stderr, "ak_bench: unknown scenario '%s' (ak_bench list)\n", n.c_str());
        return 2;
      }
      todo.push_back(f);
    }
  }
  // Pin the runner, and so every child (they inherit the affinity), to one
  // CPU: on a shared or virtual machine the CPUs need not be equally fast,
  // and all columns must be measured on the same one.
  std::string pinned = "not pinned";
  if (opts.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(opts.cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) == 0) {
      pinned = "pinned to CPU " + std::to_string(opts.cpu);
    } else {
      std::fprintf(stderr, "ak_bench: cannot pin to CPU %d (%s); running unpinned\n", opts.cpu,
                   std::strerror(errno));
      opts.cpu = -1;
    }
  }
  opts.pinned = pinned;
  std::vector<std::string> missing;
  std::vector<Allocator> allocs = detect_allocators(wanted, missing);
  std::printf("ak_bench: allocators:");
  for (const auto &a : allocs)
    std::printf(" %s%s", a.label.c_str(), a.path.empty() ? " (no preload)" : (" (" + a.path + ")").c_str());
  std::printf("\n");
  for (const auto &m : missing) std::printf("ak_bench: missing %s\n", m.c_str());
  const char *pre = std::getenv("LD_PRELOAD");
  if (pre && *pre)
    std::printf("ak_bench: note: this process runs with LD_PRELOAD=%s; children do not inherit it\n", pre);
  std::printf("ak_bench: machine: %s, %ld cores\n\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  bool all_pass = true;
  int rc = 0;
  std::map<std::string, akb::Params> prepared;  // parameters of the scenarios run, for the hardened build
  if (!hardened.only)
    for (const Scenario *s : todo)
      rc |= run_scenario(*s, opts, allocs, missing, plot, all_pass, prepared[s->name]);
  if (!hardened.exe.empty()) rc |= hardened_cost(todo, prepared, opts, hardened, all_pass);
  if (rc) return 1;
  if (opts.strict && !all_pass) return 1;
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "list") {
    for (const Scenario *s : akb::scenarios()) std::printf("%-16s %s\n", s->name, s->description);
    return 0;
  }
  if (cmd == "run") return run_main(argc, argv);
  if (cmd == "child") return child_main(argc, argv);
  if (cmd == "info") return info_main();
  usage();
  return 2;
}
