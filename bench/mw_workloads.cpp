/* SPDX-License-Identifier: MIT */
// mw_workloads.cpp - the workloads of malloc-workloads (mw_workloads.h), one
// function each, and the table from their names to them. What each one
// does is described in the header comment of
// bench/scenario_malloc_workloads.cpp; the comments here say how.
#include "mw_workloads.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "mw_common.h"

namespace akmw {
namespace {

// ---- helpers --------------------------------------------------------------------

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

// ---- the stress-test shape (after mimalloc's test/test-stress.c) ------------------

// Every word of a stress block holds a pattern of its index and of the
// block's length in words; word 0 is the length itself (xor the cookie),
// so that the check knows how far to read.
constexpr std::uint64_t kStressCookie = 0xC3A5C85C97CB3127ull;
constexpr std::size_t kStressTransfers = 1000;  // slots of the array shared by all threads
constexpr std::size_t kStressGrow = 100000;     // a thread's pointer array grows by this many
constexpr unsigned kStressShifts = 5;           // ordinary blocks: 2^0 .. 2^4 words
constexpr unsigned kStressRetainedShifts = 7;   // retained blocks: 2^0 .. 2^6 words
constexpr std::size_t kStressLarge = 100;       // 1 % of the blocks are this many times larger
constexpr std::size_t kStressMaxWords = (std::size_t{1} << (kStressRetainedShifts - 1)) * kStressLarge;
constexpr std::size_t kStressScale = 25;  // the source's SCALE
constexpr int kStressRounds = 50;         // the source's ITER

using StressTransfers = std::array<std::atomic<void *>, kStressTransfers>;

std::uint64_t stress_word(std::size_t words, std::size_t i) {
  return kStressCookie ^ words ^ (static_cast<std::uint64_t>(i) << 32);
}

bool chance(Rng &r, unsigned percent) { return r.next() % 100 < percent; }

// A block of 2^k words, k below `shifts`, 1 in 100 of them 100 times that.
// calloc's block must come zeroed (checked), then every word is written.
void *stress_alloc(Rng &r, unsigned shifts) {
  std::size_t words = std::size_t{1} << (r.next() % shifts);
  if (chance(r, 1)) words *= kStressLarge;
  auto *p = static_cast<std::uint64_t *>(std::calloc(words, sizeof(std::uint64_t)));
  if (!p) std::abort();
  std::uint64_t dirty = 0;
  for (std::size_t i = 0; i < words; i++) {
    dirty |= p[i];
    p[i] = stress_word(words, i);
  }
  if (dirty) g_bad.fetch_add(1, std::memory_order_relaxed);
  return p;
}

// Checks every word of a stress block, then frees it (nullptr: nothing).
void stress_free(void *v) {
  if (!v) return;
  auto *p = static_cast<std::uint64_t *>(v);
  auto words = static_cast<std::size_t>(p[0] ^ kStressCookie);
  bool ok = words >= 1 && words <= kStressMaxWords;
  for (std::size_t i = 1; ok && i < words; i++) ok = p[i] == stress_word(words, i);
  if (!ok) g_bad.fetch_add(1, std::memory_order_relaxed);
  std::free(v);
}

// One worker of a round: `allocs` blocks kept in a pointer array that
// grows by realloc, allocs / 2 retained ones kept to the end; at each
// step it frees a random earlier block (66 %) and swaps one of its blocks
// with a random slot of the shared array (25 %), so that blocks move
// between threads and outlive the thread. At the end it frees everything
// it holds. Its random stream depends on its index only.
void stress_thread(std::size_t tid, StressTransfers &transfer) {
  Rng r(tid + 1);
  std::size_t allocs = 100 * kStressScale * (tid % 8 + 1);
  std::size_t retain = allocs / 2;
  void **data = nullptr;
  std::size_t data_size = 0, data_top = 0;
  auto **retained = static_cast<void **>(std::calloc(retain, sizeof(void *)));
  if (!retained) std::abort();
  std::size_t retain_top = 0;
  while (allocs > 0 || retain > 0) {
    if (retain == 0 || (allocs > 0 && chance(r, 50))) {
      allocs--;
      if (data_top == data_size) {
        data_size += kStressGrow;
        data = static_cast<void **>(std::realloc(data, data_size * sizeof(void *)));
        if (!data) std::abort();
      }
      data[data_top++] = stress_alloc(r, kStressShifts);
    } else {
      retained[retain_top++] = stress_alloc(r, kStressRetainedShifts);
      retain--;
    }
    if (data_top > 0 && chance(r, 66)) {
      std::size_t i = r.next() % data_top;
      stress_free(data[i]);
      data[i] = nullptr;
    }
    if (data_top > 0 && chance(r, 25)) {
      std::size_t i = r.next() % data_top;
      data[i] = transfer[r.next() % kStressTransfers].exchange(data[i], std::memory_order_acq_rel);
    }
  }
  for (std::size_t i = 0; i < retain_top; i++) stress_free(retained[i]);
  for (std::size_t i = 0; i < data_top; i++) stress_free(data[i]);
  std::free(retained);
  std::free(data);
}

// Rounds of `threads` new threads; between rounds the main thread frees a
// random half of the shared array (after the last round, all of it).
void mstress(double scale, int threads) {
  const int rounds = std::max(1, static_cast<int>(kStressRounds * scale));
  StressTransfers transfer;
  for (auto &x : transfer) x.store(nullptr, std::memory_order_relaxed);
  Rng r(700);
  for (int g = 0; g < rounds; g++) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
      ts.emplace_back(stress_thread, static_cast<std::size_t>(t), std::ref(transfer));
    for (auto &th : ts) th.join();
    for (auto &x : transfer)
      if (g + 1 == rounds || chance(r, 50)) stress_free(x.exchange(nullptr, std::memory_order_acq_rel));
  }
}

// ---- large blocks -----------------------------------------------------------------

// One thread: each iteration allocates a block of 5-25 MiB (uniform),
// writes every byte of it, then frees the block of kKeep iterations
// before, so that a few blocks, each past every malloc's small-size
// classes, are live at once and each size is new. Three bytes of each
// block are checked before it is freed.
void bigloop(double scale) {
  constexpr std::size_t kKeep = 3;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const auto iterations = std::max(kKeep + 1, static_cast<std::size_t>(200 * scale));
  struct Big {
    unsigned char *p = nullptr;
    std::size_t n = 0;
    unsigned char fill = 0;
  };
  Big live[kKeep + 1];  // block i in live[i % (kKeep + 1)]
  auto check_free = [](Big &b) {
    if (!b.p) return;
    if (b.p[0] != b.fill || b.p[b.n / 2] != b.fill || b.p[b.n - 1] != b.fill)
      g_bad.fetch_add(1, std::memory_order_relaxed);
    std::free(b.p);
    b = Big{};
  };
  Rng r(600);
  for (std::size_t i = 0; i < iterations; i++) {
    Big &b = live[i % (kKeep + 1)];
    b.n = r.range(5 * kMiB, 25 * kMiB);
    b.p = static_cast<unsigned char *>(std::malloc(b.n));
    if (!b.p) std::abort();
    b.fill = static_cast<unsigned char>(i * 37 + 1);
    std::memset(b.p, b.fill, b.n);
    if (i >= kKeep) check_free(live[(i - kKeep) % (kKeep + 1)]);
  }
  for (Big &b : live) check_free(b);
}

}  // namespace

const Workload kWorkloads[] = {
    {"larson", larson},
    {"prodcons", prodcons},
    {"scratch", scratch},
    {"random", random_sizes},
    {"realloc", realloc_growth},
    {"threads", short_threads},
    {"churn", [](double scale) { churn(scale, 2); }},
    {"churn8", [](double scale) { churn(scale, 8); }},
    {"frag", frag},
    {"small", small_churn},
    {"mstress", [](double scale) { mstress(scale, 2); }},
    {"mstress4", [](double scale) { mstress(scale, 4); }},
    {"mstress8", [](double scale) { mstress(scale, 8); }},
    {"bigloop", bigloop},
};
const std::size_t kNumWorkloads = std::size(kWorkloads);

const Workload *find_workload(const char *name) {
  for (const Workload &w : kWorkloads)
    if (std::strcmp(w.name, name) == 0) return &w;
  return nullptr;
}

std::uint64_t corrupted_blocks() { return g_bad.load(); }

}  // namespace akmw
