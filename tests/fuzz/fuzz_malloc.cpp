/* SPDX-License-Identifier: MIT */
/* fuzz_malloc.cpp - libFuzzer target for the general-purpose heap
 * (ak_malloc and friends): a differential check against a model of every
 * live block.
 *
 * Input: operations - ak_malloc, ak_calloc (with overflowing products),
 * ak_realloc (grow, shrink, to 0, to an impossible size), ak_reallocarray
 * (with overflow), ak_free, ak_aligned_alloc / ak_posix_memalign /
 * ak_memalign (with bad alignments), allocations and frees on the worker
 * thread (cross-thread hand-off: one persistent thread, synchronous, so
 * inputs stay deterministic), ak_collect - with sizes across the small,
 * medium and large ranges. The model asserts that usable sizes cover the
 * request and no two usable ranges overlap, alignment holds (16, 8 for
 * tiny blocks, or the requested alignment), contents survive until freed
 * (and across realloc), calloc zeroes, bad input gets the documented errno
 * (EINVAL / ENOMEM, posix_memalign leaving errno alone) with the block
 * untouched, and the stats count at least the live blocks and nothing once
 * everything is freed and collected. */
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "arenakit/malloc.h"
#include "fuzz_model.h"

#define AKF_TARGET "malloc"

namespace {

using akfuzz::Block;

/* A usable size above this is surely a block with a mapping of its own (a
 * "large block" in the stats): larger than any solo span (63 pages of
 * 64 KiB, malloc_internal.h). Smaller large blocks are not counted by the
 * model, which only checks a lower bound. */
constexpr size_t kLargeMin = static_cast<size_t>(63) << 16;

constexpr size_t kMaxOps = 1000;
constexpr size_t kMaxLive = 2048;
constexpr size_t kMaxFillBytes = 4u << 20;  /* pattern bytes written per input */
constexpr size_t kMaxBlockFill = 64u << 10; /* ... and per block (its first bytes) */
constexpr size_t kMaxLiveBytes = 16u << 20; /* bytes live at once */
constexpr size_t kZeroCheck = 256u << 10;   /* calloc: bytes checked at the start (and 4 KiB at the end) */

class MallocFuzz {
 public:
  explicit MallocFuzz(akfuzz::Reader &in) : in_(in) {}

  void run() {
    for (size_t op = 0; op < kMaxOps && !in_.empty(); op++) step();
    live_.verify_all("at the end of the input");
    check_stats("at the end of the input");
    size_t k = 0;
    while (!live_.empty()) free_one(live_.map().begin(), (k++ % 3) == 1);
    /* Both threads collect what the other freed into their pages. */
    akfuzz::Worker::get().run([] { ak_collect(true); });
    ak_collect(true);
    ak_malloc_stats s;
    ak_malloc_stats_get(&s);
    AKF_CHECK(s.allocated == 0 && s.large_blocks == 0 && s.large_bytes == 0,
              "everything freed and collected, yet %zu bytes allocated, %zu large blocks (%zu bytes)",
              s.allocated, s.large_blocks, s.large_bytes);
  }

 private:
  size_t decode_size() {
    uint8_t k = in_.u8();
    switch (k >> 5) {
      case 0:
      case 1: return k & 63; /* tiny: 0..63 */
      case 2:
      case 3: return in_.u8() * static_cast<size_t>((k & 7) + 1); /* small: up to 2 KiB */
      case 4:
      case 5: return in_.u16();                                        /* medium: up to 64 KiB */
      case 6: return (static_cast<size_t>(in_.u8()) << 11) + in_.u8(); /* up to 512 KiB */
      default:
        return (static_cast<size_t>(512) << 10) + (static_cast<size_t>(in_.u8() % 64) << 14) +
               (k & 31); /* large: 512 KiB .. 1.5 MiB */
    }
  }

  /* Sizes no allocator can satisfy. */
  size_t decode_huge() {
    uint8_t k = in_.u8();
    switch (k % 4) {
      case 0: return SIZE_MAX - k;
      case 1: return SIZE_MAX / 2 + k;
      case 2: return (static_cast<size_t>(1) << 62) + k;
      default: return static_cast<size_t>(1) << (48 + k % 15); /* 256 TiB and up: beyond the address space */
    }
  }

  static size_t min_align(size_t n) { return n <= 8 ? 8 : 16; }

  void check_stats(const char *when) {
    ak_malloc_stats s;
    ak_malloc_stats_get(&s);
    AKF_CHECK(s.version == AK_MALLOC_STATS_VERSION, "%s: stats version %u", when, s.version);
    AKF_CHECK(s.allocated >= live_bytes_,
              "%s: stats.allocated %zu below the %zu usable bytes of %zu live blocks", when, s.allocated,
              live_bytes_, live_.size());
    AKF_CHECK(s.peak_allocated >= s.allocated, "%s: peak_allocated %zu < allocated %zu", when,
              s.peak_allocated, s.allocated);
    AKF_CHECK(s.large_blocks >= large_, "%s: %zu large blocks counted, %zu live", when, s.large_blocks,
              large_);
  }

  /* Checks a new block of `n` requested bytes at `align` and records it. */
  void record(void *p, size_t n, size_t align, unsigned owner, bool zero, const char *call) {
    AKF_CHECK((reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0, "%s(%zu) = %p not aligned to %zu", call, n,
              p, align);
    size_t us = ak_usable_size(p);
    AKF_CHECK(us >= n, "%s(%zu) = %p has a usable size of %zu", call, n, p, us);
    if (zero) {
      size_t head = n < kZeroCheck ? n : kZeroCheck, tail = n - head < 4096 ? n - head : 4096;
      AKF_CHECK(akfuzz::all_zero(p, head) && akfuzz::all_zero(static_cast<char *>(p) + n - tail, tail),
                "%s(%zu) = %p is not zeroed", call, n, p);
    }
    Block b;
    b.extent = us;
    b.align = align;
    b.seed = static_cast<uint8_t>(seq_ * 53 + 1);
    b.seq = seq_++;
    b.owner = owner;
    /* The pattern covers the usable size (writable by contract), capped. */
    size_t want = fill_len(us < n + 4096 ? us : n + 4096);
    b.size = want;
    akfuzz::fill(p, 0, b.size, b.seed);
    filled_ += b.size;
    live_.add(p, b);
    live_bytes_ += us;
    if (us > kLargeMin) large_++;
  }

  void forget(std::map<uintptr_t, Block>::iterator it) {
    live_bytes_ -= it->second.extent;
    if (it->second.extent > kLargeMin) large_--;
    live_.map().erase(it);
  }

  /* How many first bytes of a block of `n` writable bytes get the pattern. */
  size_t fill_len(size_t n) const {
    size_t f = n < kMaxBlockFill ? n : kMaxBlockFill;
    return filled_ + f <= kMaxFillBytes ? f : 0;
  }

  bool room_for(size_t n) const { return live_.size() < kMaxLive && live_bytes_ + n <= kMaxLiveBytes; }

  void free_one(std::map<uintptr_t, Block>::iterator it, bool on_worker) {
    void *p = reinterpret_cast<void *>(it->first);
    live_.verify(it->first, it->second, "before ak_free");
    AKF_CHECK(ak_usable_size(p) == it->second.extent, "ak_usable_size(%p) changed from %zu to %zu", p,
              it->second.extent, ak_usable_size(p));
    forget(it);
    if (on_worker)
      akfuzz::Worker::get().run([p] { ak_free(p); });
    else
      ak_free(p);
  }

  /* ak_malloc of a decoded size, on this thread or the worker. */
  void do_malloc(bool on_worker) {
    size_t n = decode_size();
    if (!room_for(n)) return;
    void *p = nullptr;
    int err = 0;
    auto call = [&] {
      errno = 0;
      p = ak_malloc(n);
      err = errno;
    };
    if (on_worker)
      akfuzz::Worker::get().run(call);
    else
      call();
    AKF_CHECK(p != nullptr, "ak_malloc(%zu) failed: errno %d", n, err);
    record(p, n, min_align(n), on_worker ? 1 : 0, false, "ak_malloc");
  }

  void do_calloc() {
    size_t count = in_.u8(), size = decode_size();
    bool overflow = (count & 1) && size > 1;
    if (overflow)
      count = SIZE_MAX / size + 1 + (count >> 1);
    else
      count = size > (64u << 10) ? count % 3 : count % 16;
    if (!overflow && !room_for(count * size)) return;
    errno = 0;
    void *p = ak_calloc(count, size);
    if (overflow) {
      AKF_CHECK(p == nullptr && errno == ENOMEM, "ak_calloc(%zu, %zu) overflows but gave %p errno %d", count,
                size, p, errno);
      return;
    }
    AKF_CHECK(p != nullptr, "ak_calloc(%zu, %zu) failed: errno %d", count, size, errno);
    record(p, count * size, min_align(count * size), 0, true, "ak_calloc");
  }

  void do_realloc(bool array) {
    if (live_.empty()) return;
    auto it = live_.pick(in_.u16());
    void *p = reinterpret_cast<void *>(it->first);
    Block b = it->second;
    uint8_t k = in_.u8();
    size_t n, count = 1, size = 0;
    bool impossible = false;
    if (k < 16) {
      n = decode_huge();
      impossible = true;
    } else if (k < 24 && !array) {
      n = 0;
    } else {
      n = decode_size();
    }
    if (array) {
      size = in_.u8() % 16 + 1;
      if (impossible) {
        size++; /* a product that overflows needs size > 1 */
        count = SIZE_MAX / size + 1 + k;
      } else {
        count = n / size;
        n = count * size;
      }
    }
    if (!impossible && !room_for(n)) return;
    live_.verify(it->first, b, "before ak_realloc");
    errno = 0;
    void *q = array ? ak_reallocarray(p, count, size) : ak_realloc(p, n);
    const char *call = array ? "ak_reallocarray" : "ak_realloc";
    if (impossible) {
      AKF_CHECK(q == nullptr && errno == ENOMEM, "%s(%p, %zu) of an impossible size gave %p errno %d", call,
                p, n, q, errno);
      live_.verify(it->first, b, "after a failed realloc");
      return;
    }
    if (n == 0) { /* glibc: realloc to 0 bytes frees (reallocarray too) */
      AKF_CHECK(q == nullptr, "%s(%p, 0) returned %p (want NULL: the block is freed)", call, p, q);
      forget(it);
      return;
    }
    AKF_CHECK(q != nullptr, "%s(%p, %zu) failed: errno %d", call, p, n, errno);
    forget(it);
    size_t keep = b.size < n ? b.size : n;
    size_t bad = akfuzz::first_mismatch(q, keep, b.seed);
    AKF_CHECK(bad == keep, "%s(%p -> %p, %zu -> %zu) lost the contents at offset %zu", call, p, q, b.extent,
              n, bad);
    /* Re-record with the old seed so the kept prefix is checked again. */
    size_t us = ak_usable_size(q);
    AKF_CHECK(us >= n, "%s(%zu) = %p has a usable size of %zu", call, n, q, us);
    AKF_CHECK((reinterpret_cast<uintptr_t>(q) & (min_align(n) - 1)) == 0, "%s(%zu) = %p is misaligned", call,
              n, q);
    Block nb = b;
    nb.extent = us;
    nb.align = min_align(n);
    size_t want = fill_len(us < n + 4096 ? us : n + 4096);
    nb.size = keep;
    if (want > keep) {
      akfuzz::fill(q, keep, want, b.seed);
      filled_ += want - keep;
      nb.size = want;
    }
    live_.add(q, nb);
    live_bytes_ += us;
    if (us > kLargeMin) large_++;
  }

  void do_aligned() {
    uint8_t k = in_.u8(), sel = in_.u8();
    size_t n = decode_size();
    if (!room_for(n + 8192)) return;
    size_t align = static_cast<size_t>(1) << (k % 14); /* 1 .. 8 KiB */
    bool bad = sel >= 224;                             /* now and then a bad alignment */
    if (bad) align = (sel & 1) ? 0 : align * 3;
    if (bad && align == 3) align = 24;
    void *p = nullptr;
    switch (sel % 3) {
      case 0: {
        errno = 0;
        p = ak_aligned_alloc(align, n);
        if (bad) {
          AKF_CHECK(p == nullptr && errno == EINVAL,
                    "ak_aligned_alloc(%zu, %zu) gave %p errno %d (want EINVAL)", align, n, p, errno);
          return;
        }
        AKF_CHECK(p != nullptr, "ak_aligned_alloc(%zu, %zu) failed: errno %d", align, n, errno);
        record(p, n, align, 0, false, "ak_aligned_alloc");
        return;
      }
      case 1: {
        void *out = &k; /* must stay untouched on failure */
        errno = 12345;
        int rc = ak_posix_memalign(&out, align, n);
        AKF_CHECK(errno == 12345, "ak_posix_memalign changed errno to %d", errno);
        bool invalid = bad || align < sizeof(void *);
        if (invalid) {
          AKF_CHECK(rc == EINVAL && out == &k,
                    "ak_posix_memalign(%zu, %zu) = %d (want EINVAL, out untouched)", align, n, rc);
          return;
        }
        AKF_CHECK(rc == 0 && out != &k, "ak_posix_memalign(%zu, %zu) failed: %d", align, n, rc);
        record(out, n, align, 0, false, "ak_posix_memalign");
        return;
      }
      default: {
        /* memalign rounds a non-power of two up; 0 means 1. */
        size_t want = 1;
        while (want < align) want <<= 1;
        errno = 0;
        p = ak_memalign(align, n);
        AKF_CHECK(p != nullptr, "ak_memalign(%zu, %zu) failed: errno %d", align, n, errno);
        record(p, n, want, 0, false, "ak_memalign");
        return;
      }
    }
  }

  void do_impossible() {
    size_t n = decode_huge();
    uint8_t k = in_.u8();
    errno = 0;
    void *p = nullptr;
    const char *call = "ak_malloc";
    switch (k % 3) {
      case 0: p = ak_malloc(n); break;
      case 1:
        call = "ak_aligned_alloc";
        p = ak_aligned_alloc(static_cast<size_t>(1) << (k % 16), n);
        break;
      default:
        call = "ak_calloc";
        p = ak_calloc(1, n);
        break;
    }
    AKF_CHECK(p == nullptr && errno == ENOMEM, "%s(%zu) gave %p errno %d (want NULL + ENOMEM)", call, n, p,
              errno);
    void *out = &k;
    errno = 777;
    int rc = ak_posix_memalign(&out, 64, n);
    AKF_CHECK(rc == ENOMEM && out == &k && errno == 777,
              "ak_posix_memalign(64, %zu) = %d, errno %d (want ENOMEM, out and errno untouched)", n, rc,
              errno);
  }

  void do_free(bool on_worker) {
    if (live_.empty()) return;
    free_one(live_.pick(in_.u16()), on_worker);
  }

  void step() {
    uint8_t op = in_.u8();
    switch (op % 16) {
      case 0:
      case 1:
      case 2: do_malloc(false); break;
      case 3: do_malloc(true); break;
      case 4: do_calloc(); break;
      case 5:
      case 6: do_realloc(false); break;
      case 7: do_realloc(true); break;
      case 8:
      case 9:
      case 10: do_free(false); break;
      case 11: do_free(true); break;
      case 12: do_aligned(); break;
      case 13:
        if (op & 0x80)
          do_impossible();
        else
          ak_collect((op & 0x40) != 0);
        break;
      case 14: check_stats("on request"); break;
      default: live_.verify_all("on request"); break;
    }
  }

  akfuzz::Reader &in_;
  akfuzz::LiveSet live_{AKF_TARGET};
  size_t live_bytes_ = 0, large_ = 0, filled_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  akfuzz::Reader in(data, size);
  MallocFuzz f(in);
  f.run();
  return 0;
}
