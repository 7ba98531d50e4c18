/* SPDX-License-Identifier: MIT */
// hardened_cost.cpp - the cost of the hardened build (`ak_bench run ...
// --hardened-exe PATH`): for each scenario that lists arenakit's metrics
// (Scenario::metrics), the glibc child of this ak_bench ("normal") and of
// PATH, an ak_bench built with -DAK_HARDENED=ON ("hardened"), interleaved
// (normal, hardened, normal, ...), with only arenakit's measurements
// (akb_arenakit_only=1); per metric the medians and the slowdown (hardened /
// normal for times, normal / hardened for throughputs), their geometric
// mean and the acceptance check on it, in <out>/hardened-cost[-TAG].{md,csv}.
// `ak_bench info` says how an ak_bench was built.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "runner.h"

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

namespace {

constexpr double kMaxHardenedSlowdown = 1.10;  // acceptance: geometric mean at most 1.10x
constexpr int kMinHardenedReps = 3;

// The `info` lines of another ak_bench (empty if it does not run).
std::map<std::string, std::string> exe_info(const std::string &exe) {
  std::map<std::string, std::string> m;
  for (const auto &[k, v] : key_values(capture(shell_quote(exe) + " info"))) m[k] = v;
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
  Better better = Better::lower;
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
    r.better = f[3] == "higher" ? Better::higher : Better::lower;
    auto num = [](const std::string &v) { return v.empty() ? NAN : std::strtod(v.c_str(), nullptr); };
    r.normal = num(f[4]);
    r.hardened = num(f[5]);
    r.slowdown = num(f[6]);
    out[f[0]].push_back(r);
  }
  return out;
}

// Runs the comparison for one scenario.
ScenarioCost scenario_cost(const Scenario &sc, Params params, int reps, const std::string &hexe,
                           std::map<std::string, std::map<std::string, std::vector<double>>> &raw) {
  ScenarioCost c;
  c.sc = &sc;
  c.reps = reps;
  params[kArenakitOnly] = "1";
  for (const auto &kv : params) c.params += (c.params.empty() ? "" : ", ") + kv.first + "=" + kv.second;
  Allocator glibc;
  glibc.label = "glibc";
  const std::string exes[2] = {self_exe(), hexe};
  const char *names[2] = {"normal", "hardened"};
  std::map<std::string, std::vector<double>> samples[2];
  std::vector<std::string> order;  // keys in the order the children print them
  double t_start = now_s();
  for (int r = 0; r < reps && !c.failed; r++) {
    for (int v = 0; v < 2; v++) {
      double t0 = now_s();
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
                   now_s() - t0);
    }
  }
  c.seconds = now_s() - t_start;
  for (int v = 0; v < 2; v++) raw[std::string(sc.name) + "," + names[v]] = samples[v];
  if (c.failed) return c;
  std::vector<std::string> used;
  for (const Metric &m : sc.metrics) {
    for (const std::string &k : order) {
      if (!glob_match(m.key, k.c_str()) || std::find(used.begin(), used.end(), k) != used.end()) continue;
      used.push_back(k);
      CostRow row;
      row.key = k;
      row.unit = m.unit ? m.unit : "";
      row.better = m.better;
      row.normal = samples[0].count(k) ? median_of(samples[0][k]) : NAN;
      row.hardened = samples[1].count(k) ? median_of(samples[1][k]) : NAN;
      if (row.normal > 0 && row.hardened > 0 && std::isfinite(row.normal) && std::isfinite(row.hardened)) {
        row.slowdown = m.better == Better::lower ? row.hardened / row.normal : row.normal / row.hardened;
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
    rows.push_back({r.key, r.unit, r.better == Better::lower ? "lower" : "higher", fmt_g(r.normal),
                    fmt_g(r.hardened), fmt_g(r.slowdown, "%.3fx")});
  rows.push_back({"geometric mean", "", "", "", "", fmt_g(geomean(c.ratios), "%.3fx")});
  return md_table({"metric", "unit", "better", "normal", "hardened", "slowdown"}, rows);
}

}  // namespace

int info_main() {
  std::printf("hardened=%d\n", static_cast<int>(AKB_HARDENED_MASK));
  std::printf("harden=%s\n", AKB_HARDENED_MASK ? AKB_HARDEN : "");
  std::printf("arenakit_malloc=%s\n", AKB_ARENAKIT_MALLOC);
  std::printf("exe=%s\n", self_exe().c_str());
  return 0;
}

int hardened_cost(const std::vector<const Scenario *> &todo, const std::map<std::string, Params> &prepared,
                  const Options &opts, const HardenedOptions &h, bool &all_pass) {
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
  double t_start = now_s();
  for (const Scenario *sc : todo) {
    if (sc->metrics.empty()) continue;
    auto it = prepared.find(sc->name);
    Params params = it != prepared.end() ? it->second : sc->prepare(opts);
    int sreps = opts.reps > 0 ? opts.reps : (opts.quick ? sc->quick_reps : sc->default_reps);
    int reps = h.reps > 0 ? h.reps : std::max(kMinHardenedReps, sreps);
    costs.push_back(scenario_cost(*sc, params, reps, h.exe, raw));
    if (costs.back().failed) rc = 1;
  }
  double elapsed = now_s() - t_start;

  // A run of some of the scenarios keeps the others' rows from the earlier
  // report (same file, same mitigations), as headline-tables.md keeps their
  // tables; they are marked "earlier run". Registry order.
  fs::path dir = opts.out_dir;
  int n_earlier = 0;
  {
    std::map<std::string, std::vector<CostRow>> old = earlier_costs(dir / (stem + ".csv"), mitigations);
    std::vector<ScenarioCost> merged;
    for (const Scenario *sc : scenarios()) {
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
      md_table({"scenario", "metrics", "slowdown (geometric mean)", "lowest", "highest"}, summary);

  Check check;
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
      std::string(kArenakitOnly) +
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
  glibc.version = libc_package_version();
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
             (r.better == Better::lower ? "lower" : "higher") + "," + csv_num(r.normal, "%.9g") + "," +
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

  // The tables snippet (headline-tables.md) takes the default (all mitigations) report only.
  if (h.tag.empty()) {
    std::string snip = "#### hardened-cost: slowdown of the hardened build (" + mitigations +
                       "), arenakit's metrics\n\n" + summary_md + "\n" + cpu_model() + ", " +
                       std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores. Details: [results/" + stem +
                       ".md](../results/" + stem + ".md).\n";
    ok = write_file(dir / (stem + ".table.md"), snip) && ok;
    write_readme_snippet(dir);
  }
  std::printf("Wrote %s/%s.{md,csv%s}%s\n\n", dir.c_str(), stem.c_str(), h.tag.empty() ? ",table.md" : "",
              h.tag.empty() ? (" and " + dir.string() + "/headline-tables.md").c_str() : "");
  return ok ? rc : 1;
}

}  // namespace akb
