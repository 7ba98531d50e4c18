// main.cpp - ak_bench, the benchmark runner.
//
//   ak_bench list
//   ak_bench run <scenario|all> [--quick] [--reps N] [--rounds N] [--n N]
//                [--out DIR] [--allocators a,b,...] [--cpu N|none] [--no-plot]
//                [--strict]
//   ak_bench child <scenario> <allocator> key=value...   (internal)
//
// `run` detects the installed mallocs, lets the scenario choose its
// parameters, then runs one child process per allocator and repetition,
// interleaved (A B C D A B C D ...), each child being this program again
// with LD_PRELOAD set to the allocator's library (glibc: no preload). It
// takes the median of every measurement over the repetitions, prints the
// scenario's tables and acceptance checks, and writes <out>/<scenario>.md,
// .csv, .table.md (headline table), .svg (bench/plot.py) and README-table.md
// (the headline tables of every scenario whose results are in <out>).
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

double RunData::median(const std::string &alloc, const std::string &key) const {
  const std::vector<double> *s = find_samples(*this, alloc, key);
  if (!s) return NAN;
  std::vector<double> v = *s;
  std::sort(v.begin(), v.end());
  std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
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

std::string check_line(const akb::Check &c) {
  char b[512];
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

// Runs one child; returns false if it failed. Its "key=value" lines go to
// `nums` (numbers) and `strs` (anything else).
bool run_child(const Scenario &sc, const Allocator &al, const akb::Params &params,
               std::map<std::string, double> &nums, std::map<std::string, std::string> &strs) {
  std::string exe = self_exe();
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
    std::fprintf(stderr, "ak_bench: child %s/%s failed (status %d)\n", sc.name, al.label.c_str(), status);
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
    if (!v.empty() && end && *end == '\0')
      nums[k] = d;
    else
      strs[k] = v;
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
      "[--strict]\n");
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
  write_file(dir / "README-table.md", s);
}

int run_scenario(const Scenario &sc, const Options &opts, const std::vector<Allocator> &allocs,
                 const std::vector<std::string> &missing, bool plot, bool &all_pass) {
  int reps = opts.reps > 0 ? opts.reps : (opts.quick ? sc.quick_reps : sc.default_reps);
  std::printf("== %s: %s\n", sc.name, sc.description);
  std::fflush(stdout);
  akb::Params params = sc.prepare(opts);
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
      std::to_string(reps) + " interleaved repetitions of one child process per allocator (" +
      std::to_string(allocs.size()) + " allocators, LD_PRELOAD, " + opts.pinned +
      "), medians quoted; parameters: " + params_line +
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
    std::printf("%s\n", check_line(c).c_str());
    if (!c.pass()) all_pass = false;
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
    for (const auto &c : rep.checks) md += "- " + check_line(c) + "\n";
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
    int passed = 0;
    for (const auto &c : rep.checks) passed += c.pass();
    if (!rep.checks.empty())
      snip += "Acceptance: " + std::to_string(passed) + "/" + std::to_string(rep.checks.size()) + " pass. ";
    snip += "Details: [results/" + stem + ".md](results/" + stem + ".md).\n";
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

int run_main(int argc, char **argv) {
  Options opts;
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
    } else if (!a.empty() && a[0] == '-') {
      usage();
      return 2;
    } else {
      names.push_back(a);
    }
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
  for (const Scenario *s : todo) rc |= run_scenario(*s, opts, allocs, missing, plot, all_pass);
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
  usage();
  return 2;
}
