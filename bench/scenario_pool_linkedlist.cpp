/* SPDX-License-Identifier: MIT */
// scenario_pool_linkedlist.cpp - pool-linkedlist: 4,096 list nodes (a
// string and a counter each) freed and allocated again in a loop, with
// new/delete and with free lists and pools, stage by stage side by side.
//
// memnode_benchmark(noperations, step): allocate 4,096 nodes, then
// `noperations` (10 million) times free the one at (i * step) % 4096 and
// allocate a new one in its place, setting `file` and `line`; finally sum
// the lines and free everything. The returned sum is the check value: the
// same in every stage (printed in the report; a child fails on a mismatch).
// Stages, as the lecture builds them:
//   1. std::string file + new/delete       (two allocations per list_node)
//   2. const char *file + new/delete
//   3. vector free list (memnode_arena with std::vector free and allocated
//      lists; new for fresh nodes, delete all at the end)
//   4. intrusive free list (union freeable_node, groups of 4,096)
//   5. ak_pool (C API, AK_SYNC_NONE) + placement new
//   6. ak::object_pool<list_node> (AK_SYNC_NONE)
// Every stage runs in every child (stages 1-3 call the preloaded malloc),
// `rounds` times interleaved; a child emits its best round per stage.
//
// Stage 4 is a floor rather than a peer: its arena is a local whose address
// never escapes, so the compiler keeps the list head in a register and,
// since each free is followed by an allocation that takes the same node
// back, folds the pair away (the loop body is the node's two field stores;
// objdump -d ak_bench). The pool stages cannot fold so: their slow paths
// are calls that return into the loop, after which the compiler no longer
// knows the pool's head, so stages 5 and 6 load it and store it, the
// current slab's count and the node's link in every iteration (replacing
// the slow calls by abort() lets GCC 12 fold them away too).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "arenakit/arenakit.hpp"
#include "bench.h"
#include "bench_util.h"

namespace {

using akb::fmt;

constexpr std::uint64_t kOps = 10000000;  // the lecture's 10 million
constexpr std::uint64_t kQuickOps = 1000000;
constexpr unsigned kStep = 13;  // odd
constexpr int kRounds = 3;
constexpr int kQuickRounds = 1;
constexpr unsigned kNodes = 4096;
constexpr double kMinSpeedup = 20;  // ak_pool vs stage 1 (glibc)

const char *const kFile = "datarep/mb-filename.cc";  // 22 characters: not a short string

struct list_node_str {
  std::string file;
  unsigned line;
};
struct list_node {
  const char *file;
  unsigned line;
};

// Stage 1 and 2: new and delete.
template <class Node>
__attribute__((noinline)) unsigned long bench_new(unsigned noperations, unsigned step) {
  long counter = 0;
  Node *m[kNodes];
  for (unsigned i = 0; i != kNodes; ++i) {
    m[i] = new Node;
    m[i]->file = kFile;
    m[i]->line = static_cast<unsigned>(counter);
    ++counter;
  }
  for (unsigned i = 0; i != noperations; ++i) {
    unsigned pos = (i * step) % kNodes;
    delete m[pos];
    m[pos] = new Node;
    m[pos]->file = kFile;
    m[pos]->line = static_cast<unsigned>(counter);
    ++counter;
  }
  unsigned long result = 0;
  for (unsigned i = 0; i != kNodes; ++i) {
    result += m[i]->line;
    delete m[i];
  }
  return result;
}

// The benchmark over an arena type with allocate()/deallocate().
template <class Arena>
__attribute__((noinline)) unsigned long bench_arena(unsigned noperations, unsigned step) {
  long counter = 0;
  Arena arena;
  list_node *m[kNodes];
  for (unsigned i = 0; i != kNodes; ++i) {
    m[i] = arena.allocate();
    m[i]->file = kFile;
    m[i]->line = static_cast<unsigned>(counter);
    ++counter;
  }
  for (unsigned i = 0; i != noperations; ++i) {
    unsigned pos = (i * step) % kNodes;
    arena.deallocate(m[pos]);
    m[pos] = arena.allocate();
    m[pos]->file = kFile;
    m[pos]->line = static_cast<unsigned>(counter);
    ++counter;
  }
  unsigned long result = 0;
  for (unsigned i = 0; i != kNodes; ++i) {
    result += m[i]->line;
    arena.deallocate(m[i]);
  }
  return result;
}

// Stage 3: the lecture's memnode_arena with std::vector lists.
struct vector_arena {
  std::vector<list_node *> allocated;
  std::vector<list_node *> free_list;
  vector_arena() = default;
  vector_arena(const vector_arena &) = delete;
  vector_arena &operator=(const vector_arena &) = delete;
  ~vector_arena() {
    for (list_node *a : allocated) delete a;
  }
  list_node *allocate() {
    list_node *n;
    if (free_list.empty()) {
      n = new list_node;
      allocated.push_back(n);
    } else {
      n = free_list.back();
      free_list.pop_back();
    }
    return n;
  }
  void deallocate(list_node *n) { free_list.push_back(n); }
};

// Stage 4: the intrusive free list in the freed nodes themselves.
union freeable_node {
  list_node n;
  freeable_node *next_free;
};
struct intrusive_arena {
  std::vector<freeable_node *> allocated_groups;
  freeable_node *free_list = nullptr;
  intrusive_arena() = default;
  intrusive_arena(const intrusive_arena &) = delete;
  intrusive_arena &operator=(const intrusive_arena &) = delete;
  ~intrusive_arena() {
    for (freeable_node *g : allocated_groups) delete[] g;
  }
  void refresh_free_list() {
    freeable_node *g = new freeable_node[kNodes];
    allocated_groups.push_back(g);
    for (unsigned i = 0; i != kNodes; ++i) {
      g[i].next_free = free_list;
      free_list = &g[i];
    }
  }
  list_node *allocate() {
    if (!free_list) refresh_free_list();
    freeable_node *fn = free_list;
    free_list = fn->next_free;
    return &fn->n;
  }
  void deallocate(list_node *n) {
    freeable_node *fn = reinterpret_cast<freeable_node *>(n);
    fn->next_free = free_list;
    free_list = fn;
  }
};

// Stage 5: ak_pool, C API.
struct akpool_arena {
  ak_pool *p;
  akpool_arena() {
    ak_pool_options o{};
    o.object_size = sizeof(list_node);
    o.sync = AK_SYNC_NONE;
    p = ak_pool_create(&o);
    if (!p) {
      std::fprintf(stderr, "ak_bench: ak_pool_create: %s\n", ak_last_error());
      std::exit(1);
    }
  }
  akpool_arena(const akpool_arena &) = delete;
  akpool_arena &operator=(const akpool_arena &) = delete;
  ~akpool_arena() { ak_pool_destroy(p); }
  list_node *allocate() {
    void *m = ak_pool_alloc(p);
    if (!m) std::abort();
    return ::new (m) list_node;
  }
  void deallocate(list_node *n) { ak_pool_free(p, n); }
};

// Stage 6: ak::object_pool<list_node>.
struct objpool_arena {
  ak::object_pool<list_node> pool{AK_SYNC_NONE};
  list_node *allocate() { return pool.create(); }
  void deallocate(list_node *n) { pool.destroy(n); }
};

struct Stage {
  const char *key;
  const char *label;
};
const Stage kStages[] = {
    {"string_new", "1. std::string + new/delete"},
    {"cstr_new", "2. const char * + new/delete"},
    {"vector_fl", "3. vector free list"},
    {"intrusive_fl", "4. intrusive free list"},
    {"ak_pool", "5. ak_pool (C API, AK_SYNC_NONE)"},
    {"object_pool", "6. ak::object_pool<list_node>"},
};
constexpr std::size_t kNumStages = sizeof kStages / sizeof kStages[0];

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["noperations"] = std::to_string(opts.n ? opts.n : (opts.quick ? kQuickOps : kOps));
  p["step"] = std::to_string(kStep);
  p["rounds"] = std::to_string(opts.rounds > 0 ? opts.rounds : (opts.quick ? kQuickRounds : kRounds));
  return p;
}

int child(const akb::Params &params) {
  unsigned nops = static_cast<unsigned>(akb::param_u64(params, "noperations", kQuickOps));
  unsigned step = static_cast<unsigned>(akb::param_u64(params, "step", kStep)) | 1u;
  int rounds = static_cast<int>(akb::param_u64(params, "rounds", kRounds));
  std::vector<double> best(kNumStages, INFINITY);
  unsigned long check = 0;
  // Hardened-build cost: only the ak_pool stages (5 and 6); stage 5 then
  // gives the check value.
  const std::size_t first = akb::arenakit_only(params) ? 4 : 0;
  for (int r = 0; r < rounds; r++) {
    for (std::size_t k = first; k < kNumStages; k++) {
      double t0 = akb::now_s();
      unsigned long v = 0;
      switch (k) {
        case 0: v = bench_new<list_node_str>(nops, step); break;
        case 1: v = bench_new<list_node>(nops, step); break;
        case 2: v = bench_arena<vector_arena>(nops, step); break;
        case 3: v = bench_arena<intrusive_arena>(nops, step); break;
        case 4: v = bench_arena<akpool_arena>(nops, step); break;
        default: v = bench_arena<objpool_arena>(nops, step); break;
      }
      best[k] = std::fmin(best[k], akb::now_s() - t0);
      if (r == 0 && k == first) check = v;
      if (v != check) {
        std::fprintf(stderr, "ak_bench: list_node stage %s returned %lu, stage 1 %lu\n", kStages[k].key, v,
                     check);
        return 1;
      }
    }
  }
  akb::emit("check", static_cast<double>(check));
  for (std::size_t k = first; k < kNumStages; k++) akb::emit(std::string("s.") + kStages[k].key, best[k]);
  return 0;
}

akb::Report report(const akb::RunData &d, const akb::Params &params) {
  akb::Report rep;
  std::vector<std::string> cols;
  for (const auto &a : d.allocators) cols.push_back(a.label);
  akb::Table t = akb::make_table(
      "seconds", "Node benchmark: seconds per run, stage by stage (lower is better)", "stage", "s", 4);
  t.columns = cols;
  akb::Table sp = t;
  sp.id = "speedup";
  sp.title = "Speedup over stage 1 (std::string + new/delete) in the same process";
  sp.unit = "x";
  sp.precision = 2;
  for (const Stage &s : kStages) {
    t.rows.push_back(s.label);
    sp.rows.push_back(s.label);
    std::vector<double> a, b;
    for (const auto &c : cols) {
      double v = d.median(c, std::string("s.") + s.key);
      a.push_back(v);
      b.push_back(d.median(c, "s.string_new") / v);
    }
    t.cells.push_back(a);
    sp.cells.push_back(b);
  }
  std::string checks;
  bool same = true;
  double first = NAN;
  for (const auto &c : cols) {
    double v = d.median(c, "check");
    if (std::isnan(first)) first = v;
    if (v != first) same = false;
    checks += (checks.empty() ? "" : ", ") + c + " " + fmt("%.0f", v);
  }
  t.note = "noperations = " + (params.count("noperations") ? params.at("noperations") : std::string("?")) +
           ", step = " + (params.count("step") ? params.at("step") : std::string("?")) +
           ", 4,096 nodes; best round per child, median over repetitions. Check value (sum of lines, "
           "equal in every stage of a child): " +
           checks + (same ? " - equal in every child." : " - DIFFERENT between children.");
  rep.tables = {t, sp};
  if (d.has("glibc", "s.ak_pool")) {
    double s1 = d.median("glibc", "s.string_new"), s5 = d.median("glibc", "s.ak_pool");
    rep.checks.push_back(akb::speedup("ak_pool stage vs std::string + new/delete stage (glibc child; " +
                                          fmt("%.4f", s5) + " s vs " + fmt("%.4f", s1) + " s): speedup",
                                      s5, s1, kMinSpeedup));
  }
  return rep;
}

}  // namespace

AKB_SCENARIO(pool_linkedlist, "pool-linkedlist",
             "4,096 list nodes freed and allocated again in a loop: std::string + new/delete, const char * + "
             "new/delete, vector and "
             "intrusive free lists, ak_pool and ak::object_pool",
             {{"s.ak_pool", akb::Better::lower, "s"}, {"s.object_pool", akb::Better::lower, "s"}});
