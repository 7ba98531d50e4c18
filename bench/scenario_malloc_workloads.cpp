/* SPDX-License-Identifier: MIT */
// scenario_malloc_workloads.cpp - malloc-workloads: a standard set of allocator
// workloads, each timed under every malloc (arenakit, glibc, simple,
// jemalloc, tcmalloc, mimalloc; see mw_common.h), each in a process of its
// own so that its peak resident memory (VmHWM) is its own.
//
//   larson     server simulation (after Larson and Krishnan): 2 threads at a
//              time each own 2,000 slots of 16-512 byte objects and replace
//              random ones; every generation hands the slots to 2 new
//              threads, which free the old threads' objects (40 generations)
//   prodcons   one thread allocates 16-255 byte messages, another frees
//              them, through a 1,024-entry ring
//   scratch    false-sharing probe (Hoard's cache-scratch): the main thread
//              allocates one 8-byte object per thread, back to back; each of
//              2 threads frees its object, then 2,000 times allocates 8
//              bytes, writes them 10,000 times and frees them. An allocator
//              that hands the freed neighbours back to different threads
//              makes the threads write to one cache line
//   random     2 threads, each 10,000 slots, random replacement with sizes
//              8 B - 32 KiB (log-uniform): random sizes, random lifetimes
//   realloc    2 threads, each growing 16 buffers by realloc, 1-256 bytes
//              at a time, to random targets of 4 KiB - 1 MiB, every byte
//              written and checked
//   threads    2,000 short-lived threads, 2 at a time: each allocates 1,000
//              blocks of 16-1024 bytes, frees 3/4 and leaves 1/4 for the
//              main thread to free after it exits
//   churn      thread churn: 60 rounds of 2 threads; each thread frees a
//              random half of the 2,000 blocks that a thread of the round
//              before kept and allocates their replacements, allocates 4,000
//              blocks and frees them again except every 8th, which it hands
//              to the next thread of its round to free (its inbox), then
//              frees what its own inbox holds and exits. Sizes 8 B - 8 KiB
//              (log-uniform), 1 in 64 of 16 - 256 KiB, 1 in 4,096 of 1 - 8
//              MiB, every byte of every block written. What an inbox still
//              holds at the end of a round, a thread of the next round frees
//   churn8     churn with 8 threads a round on 2 cores (oversubscribed)
//   frag       fragmentation probe, 1 thread: allocate 1.5 M blocks of
//              16-256 bytes (~200 MiB), free all but every 32nd, then
//              allocate 100 MiB of 300-1200 byte blocks; resident memory
//              after the free (the residue) and at the end
//   small      single-thread small-object churn: 10 M replacements of a
//              random one of 10,000 blocks of 8 B - 1 KiB (log-uniform)
// Every block carries a tag checked before it is freed (realloc: every
// byte), so an allocator that gives out overlapping memory is caught.
// Time: wall time of the workload. Peak: VmHWM at the end of the process.
// Minor faults: getrusage's ru_minflt across the workload (every thread).
// --quick runs every workload at 15% of its size.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "mw_common.h"

namespace {

const char *const kName = "malloc-workloads";
const char *const kWorkloads[] = {"larson",  "prodcons", "scratch", "random", "realloc",
                                  "threads", "churn",    "churn8",  "frag",   "small"};
constexpr double kSimpleLimit = 20, kQuickSimpleLimit = 5, kLimit = 120;
constexpr double kMaxRssVsMimalloc = 1.2;    // peak at most 1.2x mimalloc's, each workload
constexpr double kMinSpeedVsMimalloc = 1.0;  // geometric mean time at most mimalloc's

// ---- helpers --------------------------------------------------------------------

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

std::atomic<std::uint64_t> g_bad{0};

// A tagged block: {size, tag} in its first 16 bytes (blocks >= 16 bytes).
void *tagged_alloc(std::size_t n, std::uint64_t tag) {
  auto *p = static_cast<std::uint64_t *>(std::malloc(n));
  if (!p) std::abort();
  p[0] = n;
  p[1] = tag;
  return p;
}
void tagged_free(void *v, std::uint64_t tag) {
  if (!v) return;
  auto *p = static_cast<std::uint64_t *>(v);
  if (p[1] != tag || p[0] < 16) g_bad.fetch_add(1, std::memory_order_relaxed);
  std::free(v);
}
std::uint64_t tag_of(std::size_t i) { return 0xA5A5000000000000ull ^ i; }

// ---- the workloads ------------------------------------------------------------------

void larson(double scale) {
  constexpr int kT = 2, kGenerations = 40;
  constexpr std::size_t kSlots = 2000;
  const std::size_t ops = static_cast<std::size_t>(50000 * scale);
  std::vector<std::vector<void *>> slots(kT, std::vector<void *>(kSlots));
  Rng r0(1);
  for (auto &s : slots)
    for (std::size_t i = 0; i < kSlots; i++) s[i] = tagged_alloc(r0.range(16, 512), tag_of(i));
  for (int g = 0; g < kGenerations; g++) {
    std::vector<std::thread> ts;
    for (int t = 0; t < kT; t++) {
      // generation g's thread t takes over the slots of generation g-1's
      // thread t+1: it frees another thread's objects
      std::vector<void *> *mine = &slots[static_cast<std::size_t>((t + g) % kT)];
      ts.emplace_back([mine, ops, g, t] {
        Rng r(static_cast<std::uint64_t>(g * 16 + t + 2));
        std::vector<void *> &s = *mine;
        for (std::size_t k = 0; k < ops; k++) {
          std::size_t i = r.next() % kSlots;
          tagged_free(s[i], tag_of(i));
          s[i] = tagged_alloc(r.range(16, 512), tag_of(i));
        }
      });
    }
    for (auto &th : ts) th.join();
  }
  for (auto &s : slots)
    for (std::size_t i = 0; i < kSlots; i++) tagged_free(s[i], tag_of(i));
}

void prodcons(double scale) {
  constexpr std::size_t kRing = 1024;
  const std::size_t n = static_cast<std::size_t>(3000000 * scale);
  std::vector<std::atomic<void *>> ring(kRing);
  for (auto &x : ring) x.store(nullptr);
  std::thread consumer([&] {
    for (std::size_t i = 0; i < n; i++) {
      std::atomic<void *> &cell = ring[i % kRing];
      void *p;
      int spins = 0;
      while (!(p = cell.load(std::memory_order_acquire)))
        if (++spins > 64) sched_yield();
      cell.store(nullptr, std::memory_order_relaxed);
      tagged_free(p, tag_of(i));
    }
  });
  Rng r(7);
  for (std::size_t i = 0; i < n; i++) {
    void *p = tagged_alloc(r.range(16, 255), tag_of(i));
    std::atomic<void *> &cell = ring[i % kRing];
    int spins = 0;
    while (cell.load(std::memory_order_acquire))
      if (++spins > 64) sched_yield();
    cell.store(p, std::memory_order_release);
  }
  consumer.join();
}

void scratch(double scale) {
  constexpr int kT = 2;
  constexpr int kWrites = 10000;
  const int iterations = static_cast<int>(2000 * scale);
  std::vector<char *> first(kT);
  for (int t = 0; t < kT; t++) first[static_cast<std::size_t>(t)] = static_cast<char *>(std::malloc(8));
  std::vector<std::thread> ts;
  for (int t = 0; t < kT; t++) {
    ts.emplace_back([&, t] {
      std::free(first[static_cast<std::size_t>(t)]);
      for (int i = 0; i < iterations; i++) {
        volatile char *p = static_cast<char *>(std::malloc(8));
        if (!p) std::abort();
        for (int w = 0; w < kWrites; w++)
          for (int k = 0; k < 8; k++) p[k] = static_cast<char>(p[k] + 1);
        std::free(const_cast<char *>(p));
      }
    });
  }
  for (auto &th : ts) th.join();
}

void random_sizes(double scale) {
  constexpr int kT = 2;
  constexpr std::size_t kSlots = 10000;
  const std::size_t ops = static_cast<std::size_t>(1000000 * scale);
  std::vector<std::thread> ts;
  for (int t = 0; t < kT; t++) {
    ts.emplace_back([ops, t] {
      Rng r(static_cast<std::uint64_t>(100 + t));
      std::vector<void *> s(kSlots, nullptr);
      for (std::size_t k = 0; k < ops; k++) {
        std::size_t i = r.next() % kSlots;
        tagged_free(s[i], tag_of(i));
        std::size_t n = r.logsize(16, 32768);
        s[i] = tagged_alloc(n, tag_of(i));
        if (n > 16) static_cast<char *>(s[i])[n - 1] = 1;  // the last byte (past the tag)
      }
      for (std::size_t i = 0; i < kSlots; i++) tagged_free(s[i], tag_of(i));
    });
  }
  for (auto &th : ts) th.join();
}

// One thread, a working set of 10,000 blocks of random sizes from 8 B to
// 1 KiB (log-uniform, as programs' small objects are mostly small), each
// replaced at random (random lifetimes): the single-thread small-object
// churn of a typical program. Each block's first and last bytes are
// checked when it is freed.
void small_churn(double scale) {
  constexpr std::size_t kSlots = 10000;
  const std::size_t ops = static_cast<std::size_t>(10000000 * scale);
  struct Block {
    unsigned char *p = nullptr;
    std::size_t n = 0;
  };
  std::vector<Block> s(kSlots);
  Rng r(300);
  auto check_free = [](Block &b, std::size_t i) {
    if (!b.p) return;
    if (b.p[0] != static_cast<unsigned char>(i) || b.p[b.n - 1] != static_cast<unsigned char>(b.n))
      g_bad.fetch_add(1, std::memory_order_relaxed);
    std::free(b.p);
  };
  for (std::size_t k = 0; k < ops; k++) {
    std::size_t i = r.next() % kSlots;
    check_free(s[i], i);
    std::size_t n = r.logsize(8, 1024);
    auto *p = static_cast<unsigned char *>(std::malloc(n));
    if (!p) std::abort();
    p[n - 1] = static_cast<unsigned char>(n);
    p[0] = static_cast<unsigned char>(i);
    s[i] = Block{p, n};
  }
  for (std::size_t i = 0; i < kSlots; i++) check_free(s[i], i);
}

unsigned char pattern(std::size_t off, std::size_t id) {
  return static_cast<unsigned char>(off * 131 + id * 7);
}

void realloc_growth(double scale) {
  constexpr int kT = 2;
  constexpr std::size_t kBuffers = 16;
  const std::size_t total = static_cast<std::size_t>(128.0 * 1048576 * scale);  // bytes appended per thread
  std::vector<std::thread> ts;
  for (int t = 0; t < kT; t++) {
    ts.emplace_back([total, t] {
      Rng r(static_cast<std::uint64_t>(200 + t));
      struct Buf {
        unsigned char *p = nullptr;
        std::size_t len = 0, target = 0, id = 0;
      };
      std::vector<Buf> b(kBuffers);
      std::size_t next_id = 0;
      for (auto &x : b) {
        x.target = r.logsize(4096, 1 << 20);
        x.id = next_id++;
      }
      std::size_t done = 0;
      while (done < total) {
        Buf &x = b[r.next() % kBuffers];
        std::size_t add = r.range(1, 256);
        auto *q = static_cast<unsigned char *>(std::realloc(x.p, x.len + add));
        if (!q) std::abort();
        x.p = q;
        for (std::size_t i = 0; i < add; i++) x.p[x.len + i] = pattern(x.len + i, x.id);
        x.len += add;
        done += add;
        if (x.len >= x.target) {
          for (std::size_t i = 0; i < x.len; i++)
            if (x.p[i] != pattern(i, x.id)) {
              g_bad.fetch_add(1, std::memory_order_relaxed);
              break;
            }
          std::free(x.p);
          x = Buf{};
          x.target = r.logsize(4096, 1 << 20);
          x.id = next_id++;
        }
      }
      for (auto &x : b) std::free(x.p);
    });
  }
  for (auto &th : ts) th.join();
}

void short_threads(double scale) {
  constexpr int kAtOnce = 2;
  constexpr std::size_t kBlocks = 1000;
  const int total = static_cast<int>(2000 * scale);
  for (int g = 0; g < total / kAtOnce; g++) {
    std::vector<std::vector<void *>> left(kAtOnce);
    std::vector<std::thread> ts;
    for (int t = 0; t < kAtOnce; t++) {
      ts.emplace_back([&left, g, t] {
        Rng r(static_cast<std::uint64_t>(g * kAtOnce + t + 1000));
        std::vector<void *> mine(kBlocks);
        for (std::size_t i = 0; i < kBlocks; i++) mine[i] = tagged_alloc(r.range(16, 1024), tag_of(i));
        std::vector<void *> &keep = left[static_cast<std::size_t>(t)];
        keep.reserve(kBlocks / 4);
        for (std::size_t i = 0; i < kBlocks; i++) {
          if (i % 4 == 3)
            keep.push_back(mine[i]);
          else
            tagged_free(mine[i], tag_of(i));
        }
      });
    }
    for (auto &th : ts) th.join();
    for (auto &keep : left)
      for (std::size_t j = 0; j < keep.size(); j++) tagged_free(keep[j], tag_of(j * 4 + 3));
  }
}

// A block of 8 B or more of churn: its first word holds its tag (blocks of
// 16 B or more: {size, tag} as tagged_alloc).
struct Slot {
  void *p = nullptr;
  std::size_t n = 0;
  std::uint64_t tag = 0;
};
// Every byte is written, as a program fills what it allocates.
Slot slot_alloc(std::size_t n, std::uint64_t tag) {
  auto *p = static_cast<std::uint64_t *>(std::malloc(n));
  if (!p) std::abort();
  std::memset(p, 0x5a, n);
  p[0] = n;
  if (n >= 16)
    p[1] = tag;
  else
    p[0] = tag;
  return Slot{p, n, tag};
}
void slot_free(Slot &s) {
  if (!s.p) return;
  if (s.n >= 16) {
    tagged_free(s.p, s.tag);
  } else {
    if (*static_cast<std::uint64_t *>(s.p) != s.tag) g_bad.fetch_add(1, std::memory_order_relaxed);
    std::free(s.p);
  }
  s = Slot{};
}
std::size_t churn_size(Rng &r) {
  std::uint64_t x = r.next() % 4096;
  return x == 0 ? r.logsize(1 << 20, 8 << 20) : x % 64 == 0 ? r.logsize(16384, 262144) : r.logsize(8, 8192);
}

void churn(double scale, int threads) {
  constexpr std::size_t kKeep = 2000, kWork = 4000, kHandEvery = 8;
  const int rounds = std::max(1, static_cast<int>(60 * scale));
  const std::size_t T = static_cast<std::size_t>(threads);
  std::vector<std::vector<Slot>> kept(T, std::vector<Slot>(kKeep));
  std::vector<std::vector<Slot>> inbox(T);
  std::vector<std::mutex> inbox_mu(T);
  for (int g = 0; g < rounds; g++) {
    std::vector<std::thread> ts;
    for (std::size_t t = 0; t < T; t++) {
      ts.emplace_back([&, g, t] {
        Rng r(static_cast<std::uint64_t>(g) * 64 + t + 5000);
        // The kept blocks of another thread index: a thread of the round
        // before allocated them, and has exited since.
        std::vector<Slot> &mine = kept[(t + static_cast<std::size_t>(g)) % T];
        for (std::size_t i = 0; i < kKeep; i++)
          if (!mine[i].p || (r.next() & 1)) {
            slot_free(mine[i]);
            mine[i] = slot_alloc(churn_size(r), tag_of(i));
          }
        std::vector<Slot> work(kWork);
        for (std::size_t i = 0; i < kWork; i++) work[i] = slot_alloc(churn_size(r), tag_of(i));
        std::vector<Slot> give;
        for (std::size_t k = 0; k < kWork; k++) {
          std::size_t i = (k * 2654435761u) % kWork;  // a scattered order (kWork is not a multiple of it)
          if (i % kHandEvery == 0)
            give.push_back(work[i]);
          else
            slot_free(work[i]);
        }
        {
          std::lock_guard<std::mutex> lk(inbox_mu[(t + 1) % T]);
          auto &to = inbox[(t + 1) % T];
          to.insert(to.end(), give.begin(), give.end());
        }
        std::vector<Slot> got;
        {
          std::lock_guard<std::mutex> lk(inbox_mu[t]);
          got.swap(inbox[t]);
        }
        for (auto &s : got) slot_free(s);
      });
    }
    for (auto &th : ts) th.join();
  }
  for (auto &v : kept)
    for (auto &s : v) slot_free(s);
  for (auto &v : inbox)
    for (auto &s : v) slot_free(s);
}

void frag(double scale) {
  const std::size_t n = static_cast<std::size_t>(1500000 * scale);
  constexpr std::size_t kKeep = 32;
  Rng r(300);
  std::vector<void *> v(n);
  for (std::size_t i = 0; i < n; i++) v[i] = tagged_alloc(r.range(16, 256), tag_of(i));
  for (std::size_t i = 0; i < n; i++)
    if (i % kKeep) {
      tagged_free(v[i], tag_of(i));
      v[i] = nullptr;
    }
  // Give delayed purging a chance (and a malloc call to run it from).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::free(std::malloc(64));
  akb::emit("rss_residue", akmw::proc_status_bytes("VmRSS"));
  const std::size_t volume = static_cast<std::size_t>(100.0 * 1048576 * scale);
  std::vector<void *> w;
  for (std::size_t got = 0; got < volume;) {
    std::size_t sz = r.range(300, 1200);
    w.push_back(tagged_alloc(sz, tag_of(w.size())));
    got += sz;
  }
  akb::emit("rss_end", akmw::proc_status_bytes("VmRSS"));
  for (std::size_t i = 0; i < w.size(); i++) tagged_free(w[i], tag_of(i));
  for (std::size_t i = 0; i < n; i += kKeep) tagged_free(v[i], tag_of(i));
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["scale"] = opts.quick ? "0.15" : "1";
  p["simple_limit_s"] = akmw::fmt("%.0f", opts.quick ? kQuickSimpleLimit : kSimpleLimit);
  p["limit_s"] = akmw::fmt("%.0f", kLimit);
  return p;
}

int sub(const akb::Params &p) {
  const std::string wl = p.at("wl");
  double scale = std::atof(p.at("scale").c_str());
  double f0 = akmw::minor_faults();
  double t0 = akb::now_s();
  if (wl == "larson")
    larson(scale);
  else if (wl == "prodcons")
    prodcons(scale);
  else if (wl == "scratch")
    scratch(scale);
  else if (wl == "random")
    random_sizes(scale);
  else if (wl == "realloc")
    realloc_growth(scale);
  else if (wl == "threads")
    short_threads(scale);
  else if (wl == "churn")
    churn(scale, 2);
  else if (wl == "churn8")
    churn(scale, 8);
  else if (wl == "frag")
    frag(scale);
  else if (wl == "small")
    small_churn(scale);
  else
    return 2;
  double t = akb::now_s() - t0;
  akb::emit("minflt", akmw::minor_faults() - f0);
  akb::emit("time", t);
  akb::emit("peak_rss", akmw::proc_status_bytes("VmHWM"));
  akb::emit("bad", static_cast<double>(g_bad.load()));
  if (g_bad.load())
    std::fprintf(stderr, "ak_bench: workload %s: %llu blocks came back corrupted\n", wl.c_str(),
                 static_cast<unsigned long long>(g_bad.load()));
  return 0;
}

int child(const akb::Params &p) {
  if (p.count("sub")) return sub(p);
  akb::widen_affinity();
  std::vector<akmw::Column> cols = akmw::child_columns(akb::arenakit_only(p));
  akmw::OverMemo memo(kName);
  for (const char *wl : kWorkloads) {
    for (const akmw::Column &col : cols) {
      std::string k = col.label + "." + wl;
      if (memo.over(k)) {
        akb::emit(k + ".over", 1);
        continue;
      }
      double limit = std::atof(p.at(col.label == "simple" ? "simple_limit_s" : "limit_s").c_str());
      akmw::SubResult r =
          akmw::run_sub(col, kName, {std::string("wl=") + wl, "scale=" + p.at("scale")}, limit);
      if (r.kind == akmw::SubResult::kOver) {
        memo.add(k);
        akb::emit(k + ".over", 1);
      } else if (r.kind == akmw::SubResult::kCrash) {
        akb::emit(k + ".crash", r.status);
      } else {
        for (const char *key : {"time", "peak_rss", "minflt", "bad", "rss_residue", "rss_end"})
          if (r.kv.count(key)) akb::emit(k + "." + key, r.num(key));
      }
    }
  }
  return 0;
}

// ---- report -------------------------------------------------------------------------

akb::Report report(const akb::RunData &d, const akb::Params &p) {
  akb::Report rep;
  std::vector<std::string> cols;
  for (const auto &c : akmw::column_order()) {
    bool any = false;
    for (const char *wl : kWorkloads)
      for (const char *w : {".time", ".over", ".crash"}) any = any || akmw::has(d, c, std::string(wl) + w);
    if (any) cols.push_back(c);
  }
  std::vector<std::string> problems;
  auto grid = [&](const std::string &id, const std::string &title, const std::string &unit, int precision,
                  auto value) {
    akb::Table t = akb::make_table(id, title, "workload", unit, precision);
    t.columns = cols;
    for (const char *wl : kWorkloads) {
      t.rows.push_back(wl);
      std::vector<double> line;
      for (const auto &c : cols) line.push_back(value(c, std::string(wl)));
      t.cells.push_back(line);
    }
    return t;
  };
  auto time_of = [&](const std::string &c, const std::string &wl) {
    return akmw::median(d, c, wl + ".time");
  };
  auto geomean = [&](const std::string &c) {
    double s = 0;
    for (const char *wl : kWorkloads) s += std::log(time_of(c, wl));
    return std::exp(s / static_cast<double>(std::size(kWorkloads)));
  };
  for (const auto &c : cols)
    for (const char *wl : kWorkloads) {
      std::string w = wl;
      if (akmw::has(d, c, w + ".crash")) problems.push_back("CRASH: " + c + " " + w);
      std::string h = akmw::host_of(d, c, w + ".bad");
      if (!h.empty() && d.max(h, c + "." + w + ".bad") > 0)
        problems.push_back("WRONG RESULT (corrupted blocks): " + c + " " + w);
    }

  akb::Table time = grid("time", "Workload time, seconds (lower is better)", "s", 3, time_of);
  time.rows.push_back("geometric mean");
  std::vector<double> g;
  for (const auto &c : cols) g.push_back(geomean(c));
  time.cells.push_back(g);
  time.note =
      "n/a: ran past its time limit (simple: " + p.at("simple_limit_s") +
      " s, the others: " + p.at("limit_s") +
      " s) or crashed. 2 threads on 2 cores unless the workload says otherwise "
      "(prodcons: 2 threads, scratch: 2, larson: 2 at a time, threads: 2 at a time, churn: 2 a round); "
      "churn8 runs 8 threads a round on the 2 cores: oversubscribed. Medians.";
  rep.tables.push_back(time);
  akb::Table rss = grid("peak_rss", "Peak resident memory (VmHWM of the process), MiB", "MiB", 1,
                        [&](const std::string &c, const std::string &wl) {
                          return akmw::median(d, c, wl + ".peak_rss") / 1048576.0;
                        });
  rss.note = "Includes the benchmark program itself (about 4 MiB under glibc).";
  rep.tables.push_back(rss);
  akb::Table flt = grid("minflt", "Minor page faults during the workload (getrusage, all threads), thousands",
                        "k", 1, [&](const std::string &c, const std::string &wl) {
                          return akmw::median(d, c, wl + ".minflt") / 1000.0;
                        });
  flt.note =
      "Each fault is a page the kernel finds, zeroes and maps: 10-30 us under load on a virtual machine.";
  rep.tables.push_back(flt);
  if (std::find(cols.begin(), cols.end(), "mimalloc") != cols.end()) {
    akb::Table sp = grid("speed_vs_mimalloc", "Speed relative to mimalloc (mimalloc's time / this time)", "x",
                         2, [&](const std::string &c, const std::string &wl) {
                           return time_of("mimalloc", wl) / time_of(c, wl);
                         });
    sp.rows.push_back("geometric mean");
    std::vector<double> gm;
    for (const auto &c : cols) gm.push_back(geomean("mimalloc") / geomean(c));
    sp.cells.push_back(gm);
    rep.tables.push_back(sp);
  }
  akb::Table fr =
      akb::make_table("tab_frag", "Fragmentation probe (frag): resident memory, MiB", "moment", "MiB", 1);
  fr.columns = cols;
  fr.rows = {"peak (VmHWM)", "after freeing all but every 32nd block (VmRSS)",
             "after 100 MiB of 300-1200 B blocks"};
  for (const char *k : {"peak_rss", "rss_residue", "rss_end"}) {
    std::vector<double> line;
    for (const auto &c : cols) line.push_back(akmw::median(d, c, std::string("frag.") + k) / 1048576.0);
    fr.cells.push_back(line);
  }
  rep.tables.push_back(fr);

  std::string det;
  for (const auto &pr : problems) det += "- " + pr + "\n";
  if (!det.empty()) {
    std::printf("\n%s", det.c_str());
    rep.details_md = "## Failures\n\n" + det;
  }

  double ga = geomean("arenakit"), gm = geomean("mimalloc");
  rep.checks.push_back(akb::speedup("geometric mean time over the " + std::to_string(std::size(kWorkloads)) +
                                        " workloads: mimalloc " + akmw::fmt("%.3f", gm) + " s / arenakit " +
                                        akmw::fmt("%.3f", ga) + " s (arenakit at most 1.0x mimalloc)",
                                    ga, gm, kMinSpeedVsMimalloc));
  for (const char *wl : kWorkloads) {
    double a = akmw::median(d, "arenakit", std::string(wl) + ".peak_rss") / 1048576.0;
    double m = akmw::median(d, "mimalloc", std::string(wl) + ".peak_rss") / 1048576.0;
    rep.checks.push_back(akb::at_most(std::string("peak RSS, ") + wl + ": arenakit " + akmw::fmt("%.1f", a) +
                                          " MiB = " + akmw::fmt("%.2f", a / m) + "x mimalloc's " +
                                          akmw::fmt("%.1f", m) + " MiB; 1.2 x mimalloc / arenakit",
                                      a / m, kMaxRssVsMimalloc));
  }
  for (const char *wl : kWorkloads) {
    double a = akmw::median(d, "arenakit", std::string(wl) + ".minflt");
    double m = akmw::median(d, "mimalloc", std::string(wl) + ".minflt");
    rep.checks.push_back(akb::speedup(std::string("minor faults, ") + wl + ": arenakit " +
                                          akmw::fmt("%.0f", a) + ", mimalloc " + akmw::fmt("%.0f", m) +
                                          "; mimalloc / arenakit (at most mimalloc's)",
                                      std::max(a, 1.0), m, 1.0));
  }
  for (const char *wl : {"churn", "churn8"}) {
    double a = time_of("arenakit", wl), gl = time_of("glibc", wl);
    rep.checks.push_back(akb::speedup(std::string("thread churn ") + wl + ": glibc " + akmw::fmt("%.3f", gl) +
                                          " s / arenakit " + akmw::fmt("%.3f", a) +
                                          " s (arenakit at most glibc's time)",
                                      a, gl, 1.0));
  }
  {
    double a = time_of("arenakit", "small"), m = time_of("mimalloc", "small");
    rep.checks.push_back(akb::speedup("single-thread small-object churn (small): mimalloc " +
                                          akmw::fmt("%.3f", m) + " s / arenakit " + akmw::fmt("%.3f", a) +
                                          " s (arenakit at most mimalloc's time)",
                                      a, m, 1.0));
  }
  rep.checks.push_back(akb::all_ok(
      "workloads with intact blocks and no crash (" + std::to_string(problems.size()) + " problems): all",
      problems.empty()));
  return rep;
}

}  // namespace

AKB_SCENARIO(
    malloc_workloads, kName,
    "allocator workloads: larson server simulation, producer/consumer, false-sharing probe (cache-scratch), "
    "random sizes and lifetimes, realloc growth, short-lived threads, thread churn, fragmentation probe, "
    "single-thread small-object churn; "
    "time, "
    "peak resident memory and minor page faults under arenakit, glibc, simple, jemalloc, tcmalloc, mimalloc",
    {{"arenakit.*.time", akb::Better::lower, "s"}},
    // Five repetitions: the threaded workloads' page faults depend on how
    // the threads are scheduled (larson, 8 runs: 763-1252 for arenakit,
    // 864-1184 for mimalloc), too wide for a median of three.
    5);
