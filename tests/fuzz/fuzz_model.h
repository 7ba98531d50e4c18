/* SPDX-License-Identifier: MIT */
/* fuzz_model.h - shared pieces of the arenakit fuzz targets: a byte reader
 * that decodes operations from the fuzzer's input, the model of live
 * allocations (no two overlap, each keeps a byte pattern that must survive
 * until it is freed), the check macro, and a persistent worker thread that
 * runs hand-off work synchronously (so every input stays deterministic).
 *
 * Header-only, C++17, no dependency beyond the standard library and
 * pthreads. Every failed check prints one line naming the target and the
 * broken property, then aborts (libFuzzer records the input). */
#ifndef AK_FUZZ_MODEL_H
#define AK_FUZZ_MODEL_H

#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

/* The pattern loops touch every byte: coverage instrumentation there would
 * cost more than the allocator calls and find nothing. */
#if defined(__clang__)
#define AKF_NO_COVERAGE __attribute__((no_sanitize("coverage"), noinline))
#else
#define AKF_NO_COVERAGE
#endif

namespace akfuzz {

/* Prints "fuzz_<target>: check failed: <message>" and aborts. */
[[noreturn]] inline void fail(const char *target, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
inline void fail(const char *target, const char *fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "fuzz_%s: check failed: ", target);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::fflush(stderr);
  std::abort();
}

#define AKF_CHECK(cond, ...)                              \
  do {                                                    \
    if (!(cond)) ::akfuzz::fail(AKF_TARGET, __VA_ARGS__); \
  } while (0)

/* Reads integers from the input; past its end every read gives 0. */
class Reader {
 public:
  Reader(const uint8_t *data, size_t size) : d_(data), n_(size) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint16_t u16() {
    uint16_t lo = u8();
    return static_cast<uint16_t>(lo | (static_cast<uint16_t>(u8()) << 8));
  }
  uint32_t u32() {
    uint32_t lo = u16();
    return lo | (static_cast<uint32_t>(u16()) << 16);
  }

 private:
  const uint8_t *d_;
  size_t n_;
  size_t i_ = 0;
};

/* The byte at offset `off` of a block filled with pattern `seed`. The
 * pattern repeats every 256 bytes, so fills and checks go by memcpy and
 * memcmp of a 256-byte reference (the sanitizers check each range once
 * instead of each byte); blocks get different seeds. */
inline uint8_t pattern_byte(uint8_t seed, size_t off) {
  return static_cast<uint8_t>(seed + (off & 255) * 37u);
}

struct PatternRef {
  uint8_t b[512]; /* two periods: a window of 256 bytes starts at any phase */
  explicit PatternRef(uint8_t seed) {
    for (size_t i = 0; i < sizeof b; i++) b[i] = pattern_byte(seed, i);
  }
};

AKF_NO_COVERAGE inline void fill(void *p, size_t from, size_t to, uint8_t seed) {
  if (from >= to) return;
  PatternRef ref(seed);
  auto *b = static_cast<uint8_t *>(p);
  for (size_t i = from; i < to;) {
    size_t phase = i & 255, n = to - i < 256 ? to - i : 256;
    std::memcpy(b + i, ref.b + phase, n);
    i += n;
  }
}

/* Offset of the first byte in [0, n) that differs from the pattern, or n. */
AKF_NO_COVERAGE inline size_t first_mismatch(const void *p, size_t n, uint8_t seed) {
  if (n == 0) return 0;
  PatternRef ref(seed);
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t i = 0; i < n; i += 256) {
    size_t m = n - i < 256 ? n - i : 256;
    if (std::memcmp(b + i, ref.b, m) != 0) {
      for (size_t k = i; k < i + m; k++)
        if (b[k] != pattern_byte(seed, k)) return k;
    }
  }
  return n;
}

AKF_NO_COVERAGE inline bool all_zero(const void *p, size_t n) {
  static const uint8_t zeros[4096] = {};
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t i = 0; i < n; i += sizeof zeros) {
    size_t m = n - i < sizeof zeros ? n - i : sizeof zeros;
    if (std::memcmp(b + i, zeros, m) != 0) return false;
  }
  return true;
}

/* A live allocation in the model. `extent` is the range that must not
 * overlap another live allocation (the requested size, or the usable/slot
 * size when the component promises that much); `size` the bytes holding
 * the pattern. */
struct Block {
  size_t size = 0;
  size_t extent = 0;
  size_t align = 1;
  uint8_t seed = 0;
  uint64_t seq = 0;   /* order of allocation */
  unsigned owner = 0; /* 0: main thread allocated it, 1: the worker */
};

/* Live allocations by address. */
class LiveSet {
 public:
  explicit LiveSet(const char *target) : target_(target) {}

  /* Adds a block; aborts if [p, p + extent) meets a live block. */
  void add(void *p, const Block &b) {
    auto a = reinterpret_cast<uintptr_t>(p);
    size_t ext = b.extent ? b.extent : 1;
    auto next = m_.lower_bound(a);
    if (next != m_.end() && next->first < a + ext)
      fail(target_, "new block %p+%zu overlaps live block %p+%zu", p, ext,
           reinterpret_cast<void *>(next->first), next->second.extent);
    if (next != m_.begin()) {
      auto prev = std::prev(next);
      size_t pext = prev->second.extent ? prev->second.extent : 1;
      if (prev->first + pext > a)
        fail(target_, "new block %p+%zu overlaps live block %p+%zu", p, ext,
             reinterpret_cast<void *>(prev->first), pext);
    }
    m_.emplace(a, b);
  }

  /* Changes the extent of the live block at `a`; aborts if the new range
   * meets the next live block. */
  void resize(uintptr_t a, size_t extent) {
    auto it = m_.find(a);
    if (it == m_.end()) fail(target_, "resize of %p, which is not live", reinterpret_cast<void *>(a));
    auto next = std::next(it);
    size_t ext = extent ? extent : 1;
    if (next != m_.end() && next->first < a + ext)
      fail(target_, "block %p resized to %zu overlaps live block %p+%zu", reinterpret_cast<void *>(a), ext,
           reinterpret_cast<void *>(next->first), next->second.extent);
    it->second.extent = extent;
  }

  /* Aborts unless the block's pattern is intact. */
  void verify(uintptr_t a, const Block &b, const char *when) const {
    size_t bad = first_mismatch(reinterpret_cast<const void *>(a), b.size, b.seed);
    if (bad != b.size)
      fail(target_, "%s: block %p of %zu bytes (seq %llu) lost its contents at offset %zu", when,
           reinterpret_cast<void *>(a), b.size, static_cast<unsigned long long>(b.seq), bad);
  }

  void verify_all(const char *when) const {
    for (const auto &kv : m_) verify(kv.first, kv.second, when);
  }

  /* The `i`-th live block in address order (i taken modulo the count). */
  std::map<uintptr_t, Block>::iterator pick(size_t i) {
    auto it = m_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(i % m_.size()));
    return it;
  }

  std::map<uintptr_t, Block> &map() { return m_; }
  size_t size() const { return m_.size(); }
  bool empty() const { return m_.empty(); }

 private:
  const char *target_;
  std::map<uintptr_t, Block> m_;
};

/* One thread, created once per process and never joined, that runs the
 * jobs handed to it one at a time while the caller waits: cross-thread
 * frees and allocations without any nondeterminism. */
class Worker {
 public:
  static Worker &get() {
    static Worker *w = new Worker(); /* never destroyed: the thread outlives main */
    return *w;
  }

  /* Runs `fn` on the worker thread and returns when it is done. */
  void run(const std::function<void()> &fn) {
    std::unique_lock<std::mutex> lk(mu_);
    job_ = &fn;
    done_ = false;
    cv_.notify_all();
    cv_.wait(lk, [this] { return done_; });
    job_ = nullptr;
  }

 private:
  Worker() {
    std::thread t([this] { loop(); });
    t.detach();
  }

  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [this] { return job_ != nullptr && !done_; });
      (*job_)();
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()> *job_ = nullptr;
  bool done_ = false;
};

}  // namespace akfuzz

#endif /* AK_FUZZ_MODEL_H */
