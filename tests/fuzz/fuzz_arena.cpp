/* SPDX-License-Identifier: MIT */
/* fuzz_arena.cpp - libFuzzer target for the region arena (ak_arena): a
 * differential check against a model of every live allocation.
 *
 * Input: a few option bytes (first/max chunk, caller buffer, max_bytes
 * budget, retain policy), then operations: alloc and zalloc with decoded
 * size and alignment (bad alignments too), alloc_array (with overflowing
 * products), strndup, realloc (of the newest block, so it may grow in
 * place, or of any block), save/restore of marks, clear, defer, owns.
 * The model asserts that no two live blocks overlap, alignment holds, each
 * block keeps its byte pattern until clear/restore drops it, the stats
 * agree (requested exactly; used grows by the rounded size plus at most
 * the alignment padding; reserved equals what the OS layer has mapped),
 * budget failures are NULL + ENOMEM with nothing changed, and cleanups run
 * newest first exactly when they should. */
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "arenakit/arena.h"
#include "fuzz_model.h"
#include "os/os_mem.h"

extern "C" void _ak_arena_cache_drain(void); /* src/arena/arena_cache.c */

#define AKF_TARGET "arena"

namespace {

using akfuzz::Block;

constexpr size_t kMaxOps = 1500;
constexpr size_t kMaxFillBytes = 2u << 20;  /* pattern bytes written per input */
constexpr size_t kMaxBlockFill = 64u << 10; /* ... and per block (its first bytes) */
constexpr size_t kMaxMarks = 16;
constexpr size_t kCleanupSize = 3 * sizeof(void *); /* an arena cleanup record */

size_t granules(size_t n) { return (n + AK_ARENA_GRANULE - 1) & ~static_cast<size_t>(AK_ARENA_GRANULE - 1); }

/* The cleanups that ran, in order (ids). */
std::vector<unsigned> g_ran;
void cleanup_fn(void *arg) { g_ran.push_back(static_cast<unsigned>(reinterpret_cast<uintptr_t>(arg))); }

alignas(64) unsigned char g_buffer[AK_ARENA_MIN_BUFFER + 255 * 32 +
                                   64]; /* the largest buffer decoded, at offset 8 */

struct Mark {
  ak_arena_mark mark;
  size_t nblocks;
  std::vector<size_t> sizes; /* size of each block at the time */
  size_t requested;
  size_t used;
  size_t ncleanups;
};

struct Model {
  akfuzz::LiveSet live{AKF_TARGET}; /* live blocks by address */
  std::vector<void *> order;        /* the same, in order of allocation */
  size_t requested = 0;
  std::vector<unsigned> cleanups; /* registered, oldest first */
  std::vector<Mark> marks;
  uint64_t seq = 0;
  size_t filled = 0;
};

class ArenaFuzz {
 public:
  ArenaFuzz(akfuzz::Reader &in) : in_(in) {}

  void run() {
    if (!init()) return;
    for (size_t op = 0; op < kMaxOps && !in_.empty(); op++) {
      step();
      check_stats("after an operation");
    }
    verify_all("at the end of the input");
    size_t before = g_ran.size();
    ak_arena_destroy(&a_);
    expect_cleanups(before, 0, "ak_arena_destroy");
    _ak_arena_cache_drain();
    _ak_os_counters c;
    _ak_os_get_counters(&c);
    AKF_CHECK(c.mapped_bytes == os_base_, "ak_arena_destroy left %zu bytes mapped (baseline %zu)",
              c.mapped_bytes, os_base_);
  }

 private:
  bool init() {
    uint8_t flags = in_.u8();
    ak_arena_options o;
    std::memset(&o, 0, sizeof o);
    if (flags & 1) o.first_chunk = (static_cast<size_t>(in_.u8() % 16) + 1) * 1024;
    if (flags & 2) {
      size_t first = o.first_chunk ? o.first_chunk : 4096;
      first = (first + 4095) & ~static_cast<size_t>(4095);
      o.max_chunk = first << (in_.u8() % 8);
    }
    if (flags & 4) {
      o.buffer_size = AK_ARENA_MIN_BUFFER + static_cast<size_t>(in_.u8()) * 32;
      o.buffer = g_buffer + (flags & 8 ? 8 : 0);
    }
    if (flags & 16) o.max_bytes = static_cast<size_t>(in_.u16()) * 8 + (flags & 32 ? 1 : 0);
    o.retain = static_cast<ak_arena_retain>((flags >> 6) % 3);
    if (o.retain == AK_ARENA_RETAIN_LIMIT) o.retain_limit = static_cast<size_t>(in_.u16()) * 16;
    budget_ = o.max_bytes;
    retain_none_ = o.retain == AK_ARENA_RETAIN_NONE;
    _ak_arena_cache_drain(); /* the OS layer's counters then hold this arena's chunks only */
    _ak_os_counters c;
    _ak_os_get_counters(&c);
    os_base_ = c.mapped_bytes;
    int rc = ak_arena_init(&a_, &o);
    AKF_CHECK(rc == 0, "ak_arena_init failed (%d: %s) on valid options", rc, ak_last_error());
    check_stats("after init");
    return true;
  }

  ak_arena_stats stats() const {
    ak_arena_stats s;
    ak_arena_stats_get(&a_, &s);
    return s;
  }

  void check_stats(const char *when) {
    ak_arena_stats s = stats();
    AKF_CHECK(s.requested == m_.requested, "%s: stats.requested %zu, model %zu", when, s.requested,
              m_.requested);
    if (budget_) AKF_CHECK(s.used <= budget_, "%s: used %zu exceeds the budget %zu", when, s.used, budget_);
    AKF_CHECK(s.peak_reserved >= s.reserved, "%s: peak_reserved %zu < reserved %zu", when, s.peak_reserved,
              s.reserved);
    AKF_CHECK((s.chunks == 0) == (s.reserved == 0), "%s: %zu chunks but %zu bytes reserved", when, s.chunks,
              s.reserved);
    _ak_arena_cache_drain(); /* chunks the arena gave back wait in the cache of chunks */
    _ak_os_counters c;
    _ak_os_get_counters(&c);
    AKF_CHECK(c.mapped_bytes - os_base_ == s.reserved, "%s: stats.reserved %zu but the OS layer maps %zu",
              when, s.reserved, c.mapped_bytes - os_base_);
  }

  size_t decode_size() {
    uint8_t k = in_.u8();
    switch (k >> 6) {
      case 0: return k & 63;                                       /* 0..63 */
      case 1: return in_.u8() * static_cast<size_t>(1 + (k & 15)); /* up to ~4 KiB */
      case 2: return in_.u16() % (64u << 10);                      /* up to 64 KiB */
      default:
        if ((k & 0x30) == 0x30) return (static_cast<size_t>(in_.u8()) << 12) + (k & 15); /* up to ~1 MiB */
        return (static_cast<size_t>(in_.u8()) << 6) + (k & 15);                          /* up to 16 KiB */
    }
  }

  /* 1..4096 mostly; now and then 64 KiB, 0 or a non-power of two. */
  size_t decode_align() {
    uint8_t k = in_.u8();
    if (k < 240) return static_cast<size_t>(1) << (k % 13);
    if (k < 246) return static_cast<size_t>(1) << 16;
    if (k < 250) return 0;
    return 3 + 2 * static_cast<size_t>(k - 250);
  }

  static bool good_align(size_t align) { return align != 0 && (align & (align - 1)) == 0; }

  /* Whether an allocation of `n` bytes at `align` must succeed / fail now. */
  bool must_fail(size_t n, size_t used) const { return budget_ && granules(n ? n : 1) > budget_ - used; }
  bool must_succeed(size_t n, size_t align, size_t used) const {
    return !budget_ || granules(n ? n : 1) + align - 1 <= budget_ - used;
  }

  /* Checks a successful allocation and records it; fills the pattern (or
   * checks zeros first). */
  void record(void *p, size_t n, size_t align, size_t used_before, bool zero, const char *call) {
    AKF_CHECK((reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0, "%s(%zu, %zu) = %p is misaligned", call, n,
              align, p);
    AKF_CHECK((reinterpret_cast<uintptr_t>(p) & (AK_ARENA_GRANULE - 1)) == 0, "%s = %p is not 8-aligned",
              call, p);
    ak_arena_stats s = stats();
    size_t g = granules(n ? n : 1);
    AKF_CHECK(s.used >= used_before + g && s.used - used_before <= g + align - 1,
              "%s(%zu, %zu): used grew by %zu (expected %zu + padding < %zu)", call, n, align,
              s.used - used_before, g, align);
    if (zero) AKF_CHECK(akfuzz::all_zero(p, n), "%s(%zu) returned memory that is not zero", call, n);
    Block b;
    b.size = n;
    b.extent = n;
    b.align = align;
    b.seed = static_cast<uint8_t>(m_.seq * 131 + 7);
    b.seq = m_.seq++;
    b.size = fill_len(n);
    akfuzz::fill(p, 0, b.size, b.seed);
    m_.filled += b.size;
    add_live(p, b);
    AKF_CHECK(ak_arena_owns(&a_, p), "ak_arena_owns(%p) is false for a live block", p);
  }

  /* How many first bytes of an n-byte block get the pattern. */
  size_t fill_len(size_t n) const {
    size_t f = n < kMaxBlockFill ? n : kMaxBlockFill;
    return m_.filled + f <= kMaxFillBytes ? f : 0;
  }

  void add_live(void *p, const Block &b) {
    m_.live.add(p, b);
    m_.order.push_back(p);
  }

  Block &block(void *p) { return m_.live.map().at(reinterpret_cast<uintptr_t>(p)); }

  void do_alloc(bool zero) {
    size_t n = decode_size();
    size_t align = decode_align();
    size_t used = stats().used;
    errno = 0;
    void *p = zero ? ak_arena_zalloc(&a_, n, align) : ak_arena_alloc(&a_, n, align);
    const char *call = zero ? "ak_arena_zalloc" : "ak_arena_alloc";
    if (!good_align(align)) {
      AKF_CHECK(p == nullptr && errno == EINVAL, "%s with alignment %zu: %p errno %d (want NULL + EINVAL)",
                call, align, p, errno);
      AKF_CHECK(stats().used == used, "%s failed but used changed", call);
      return;
    }
    if (!p) {
      AKF_CHECK(errno == ENOMEM, "%s(%zu, %zu) failed with errno %d (want ENOMEM)", call, n, align, errno);
      AKF_CHECK(!must_succeed(n, align, used), "%s(%zu, %zu) failed with %zu of %zu budget bytes used: %s",
                call, n, align, used, budget_, ak_last_error());
      AKF_CHECK(stats().used == used, "%s failed but used changed", call);
      return;
    }
    AKF_CHECK(!must_fail(n, used), "%s(%zu, %zu) succeeded past the budget (%zu of %zu used)", call, n, align,
              used, budget_);
    m_.requested += n;
    record(p, n, align, used, zero, call);
  }

  /* Sizes that cannot be satisfied (overflow when padded, or beyond the
   * address space): NULL + ENOMEM, nothing changed. */
  void do_impossible() {
    uint8_t k = in_.u8();
    size_t sizes[] = {SIZE_MAX - k, SIZE_MAX / 2 + k, (static_cast<size_t>(1) << 62) + k,
                      (static_cast<size_t>(1) << 60) * (k % 8 + 1)};
    size_t n = sizes[k % 4];
    size_t align = static_cast<size_t>(1) << (in_.u8() % 13);
    size_t used = stats().used;
    errno = 0;
    void *p = (k & 4) ? ak_arena_zalloc(&a_, n, align) : ak_arena_alloc(&a_, n, align);
    AKF_CHECK(p == nullptr && errno == ENOMEM,
              "ak_arena_alloc(%zu, %zu) gave %p errno %d (want NULL + ENOMEM)", n, align, p, errno);
    AKF_CHECK(stats().used == used, "a failed ak_arena_alloc changed used");
    if (!m_.order.empty() && (k & 8)) {
      void *q = m_.order.back();
      Block b = block(q);
      errno = 0;
      void *r = ak_arena_realloc(&a_, q, b.extent, n, align);
      AKF_CHECK(r == nullptr && errno == ENOMEM,
                "ak_arena_realloc(%p, %zu) gave %p errno %d (want NULL + ENOMEM)", q, n, r, errno);
      verify_block(q, b, "after a failed ak_arena_realloc");
    }
  }

  void do_array() {
    size_t count = in_.u16();
    size_t size = in_.u8();
    bool overflow = (count & 1) && size > 1;
    if (overflow)
      count = SIZE_MAX / size + 1 + (count >> 1);
    else
      count %= 512;
    size_t align = static_cast<size_t>(1) << (in_.u8() % 7);
    size_t used = stats().used;
    errno = 0;
    void *p = ak_arena_alloc_array(&a_, count, size, align, 1);
    if (overflow) {
      AKF_CHECK(p == nullptr && errno == ENOMEM,
                "ak_arena_alloc_array(%zu, %zu) overflows but gave %p errno %d", count, size, p, errno);
      AKF_CHECK(stats().used == used, "ak_arena_alloc_array failed but used changed");
      return;
    }
    size_t n = count * size;
    if (!p) {
      AKF_CHECK(errno == ENOMEM && !must_succeed(n, align, used), "ak_arena_alloc_array(%zu, %zu) failed: %s",
                count, size, ak_last_error());
      return;
    }
    m_.requested += n;
    record(p, n, align, used, true, "ak_arena_alloc_array");
  }

  void do_strndup() {
    char src[64];
    size_t len = in_.u8() % 63;
    std::memset(src, 'a' + static_cast<int>(len % 26), len);
    src[len] = '\0';
    size_t limit = in_.u8() % 70;
    size_t used = stats().used;
    errno = 0;
    char *d = ak_arena_strndup(&a_, src, limit);
    size_t want = (len < limit ? len : limit);
    if (!d) {
      AKF_CHECK(errno == ENOMEM && !must_succeed(want + 1, 1, used), "ak_arena_strndup failed: %s",
                ak_last_error());
      return;
    }
    AKF_CHECK(std::strlen(d) == want && std::memcmp(d, src, want) == 0,
              "ak_arena_strndup copied the wrong string");
    m_.requested += want + 1;
    record(d, want + 1, 1, used, false, "ak_arena_strndup");
  }

  void do_realloc() {
    if (m_.order.empty()) return;
    uint8_t k = in_.u8();
    size_t idx = (k & 1) ? m_.order.size() - 1 : (k >> 1) % m_.order.size();
    void *p = m_.order[idx];
    Block b = block(p);
    size_t n = decode_size();
    size_t align = (k & 2) ? b.align : static_cast<size_t>(1) << ((k >> 2) % 8);
    size_t used = stats().used;
    verify_block(p, b, "before ak_arena_realloc");
    errno = 0;
    void *q = ak_arena_realloc(&a_, p, b.extent, n, align);
    if (!q) {
      AKF_CHECK(errno == ENOMEM && !must_succeed(n, align, used),
                "ak_arena_realloc(%p, %zu -> %zu) failed: %s", p, b.extent, n, ak_last_error());
      AKF_CHECK(stats().used == used, "ak_arena_realloc failed but used changed");
      verify_block(p, b, "after a failed ak_arena_realloc");
      return;
    }
    AKF_CHECK((reinterpret_cast<uintptr_t>(q) & (align - 1)) == 0,
              "ak_arena_realloc = %p is misaligned (%zu)", q, align);
    size_t keep = b.size < n ? b.size : n;
    size_t bad = akfuzz::first_mismatch(q, keep, b.seed);
    AKF_CHECK(bad == keep, "ak_arena_realloc(%p -> %p, %zu -> %zu) lost the contents at offset %zu", p, q,
              b.extent, n, bad);
    m_.requested += n;
    if (q == p) {
      m_.requested -= b.extent;
      ak_arena_stats s = stats();
      size_t go = granules(b.extent ? b.extent : 1), gn = granules(n ? n : 1);
      AKF_CHECK(s.used == used - go + gn, "in-place ak_arena_realloc %zu -> %zu: used %zu -> %zu", b.extent,
                n, used, s.used);
      Block nb = b;
      nb.size = b.size < n ? b.size : n;
      size_t want = fill_len(n);
      if (b.size == (b.extent < kMaxBlockFill ? b.extent : kMaxBlockFill) && want > nb.size) {
        akfuzz::fill(p, nb.size, want, b.seed); /* grow the pattern with the block */
        m_.filled += want - nb.size;
        nb.size = want;
      }
      m_.live.resize(reinterpret_cast<uintptr_t>(p), n); /* checks the next block */
      nb.extent = n;
      block(p) = nb;
      return;
    }
    /* Moved: the old block stays valid until clear or restore. */
    Block nb;
    nb.size = keep;
    nb.seed = b.seed;
    (void)used;
    record_moved(q, n, align, used, nb);
  }

  void record_moved(void *q, size_t n, size_t align, size_t used_before, Block nb) {
    ak_arena_stats s = stats();
    size_t g = granules(n ? n : 1);
    AKF_CHECK(s.used >= used_before + g && s.used - used_before <= g + align - 1,
              "ak_arena_realloc (moved, %zu bytes): used grew by %zu", n, s.used - used_before);
    nb.extent = n;
    nb.align = align;
    nb.seq = m_.seq++;
    size_t want = fill_len(n);
    if (want > nb.size) {
      akfuzz::fill(q, nb.size, want, nb.seed);
      m_.filled += want - nb.size;
      nb.size = want;
    }
    add_live(q, nb);
  }

  void do_mark() {
    if (m_.marks.size() >= kMaxMarks) return;
    Mark mk;
    mk.mark = ak_arena_save(&a_);
    mk.nblocks = m_.order.size();
    for (void *p : m_.order) mk.sizes.push_back(block(p).extent);
    mk.requested = m_.requested;
    mk.used = stats().used;
    mk.ncleanups = m_.cleanups.size();
    m_.marks.push_back(std::move(mk));
  }

  void do_restore() {
    if (m_.marks.empty()) return;
    size_t i = in_.u8() % m_.marks.size();
    Mark mk = m_.marks[i];
    m_.marks.resize(i); /* this mark and every newer one are used up */
    /* Blocks that survive are checked before and after. */
    size_t before = g_ran.size();
    ak_arena_restore(&a_, mk.mark);
    while (m_.order.size() > mk.nblocks) {
      m_.live.map().erase(reinterpret_cast<uintptr_t>(m_.order.back()));
      m_.order.pop_back();
    }
    for (size_t k = 0; k < m_.order.size(); k++) {
      Block &b = block(m_.order[k]);
      /* A block resized in place after the mark keeps its size at the mark. */
      if (b.extent > mk.sizes[k]) {
        b.extent = mk.sizes[k];
        if (b.size > b.extent) b.size = b.extent;
      }
    }
    m_.requested = mk.requested;
    expect_cleanups(before, mk.ncleanups, "ak_arena_restore");
    AKF_CHECK(stats().used == mk.used, "ak_arena_restore: used %zu, %zu at the mark", stats().used, mk.used);
    verify_all("after ak_arena_restore");
  }

  void do_clear() {
    verify_all("before ak_arena_clear");
    size_t before = g_ran.size();
    ak_arena_clear(&a_);
    expect_cleanups(before, 0, "ak_arena_clear");
    m_.live.map().clear();
    m_.order.clear();
    m_.marks.clear();
    m_.requested = 0;
    ak_arena_stats s = stats();
    AKF_CHECK(s.used == 0, "ak_arena_clear: used %zu", s.used);
    if (retain_none_)
      AKF_CHECK(s.reserved == 0, "ak_arena_clear with RETAIN_NONE kept %zu bytes", s.reserved);
  }

  /* The cleanups registered after the first `keep` must have run, newest
   * first, and no other. */
  void expect_cleanups(size_t ran_before, size_t keep, const char *call) {
    size_t want = m_.cleanups.size() - keep;
    AKF_CHECK(g_ran.size() - ran_before == want, "%s ran %zu cleanups, expected %zu", call,
              g_ran.size() - ran_before, want);
    for (size_t k = 0; k < want; k++) {
      unsigned id = m_.cleanups[m_.cleanups.size() - 1 - k];
      AKF_CHECK(g_ran[ran_before + k] == id, "%s ran cleanup %u in place of %u", call, g_ran[ran_before + k],
                id);
    }
    m_.cleanups.resize(keep);
  }

  void do_defer() {
    unsigned id = next_cleanup_++;
    size_t used = stats().used;
    errno = 0;
    int rc = ak_arena_defer(&a_, cleanup_fn, reinterpret_cast<void *>(static_cast<uintptr_t>(id)));
    if (rc != 0) {
      AKF_CHECK(rc == ENOMEM && !must_succeed(kCleanupSize, alignof(void *), used),
                "ak_arena_defer failed (%d) with budget left", rc);
      return;
    }
    m_.cleanups.push_back(id);
    m_.requested += kCleanupSize;
  }

  void do_owns() {
    int local = 0;
    AKF_CHECK(!ak_arena_owns(&a_, &local), "ak_arena_owns claims a stack address");
    if (m_.order.empty()) return;
    void *p = m_.order[in_.u8() % m_.order.size()];
    AKF_CHECK(ak_arena_owns(&a_, p), "ak_arena_owns(%p) is false for a live block", p);
    verify_block(p, block(p), "ak_arena_owns");
  }

  void verify_block(void *p, const Block &b, const char *when) {
    size_t bad = akfuzz::first_mismatch(p, b.size, b.seed);
    AKF_CHECK(bad == b.size, "%s: block %p of %zu bytes (seq %llu) lost its contents at offset %zu", when, p,
              b.size, static_cast<unsigned long long>(b.seq), bad);
  }

  void verify_all(const char *when) {
    for (void *p : m_.order) verify_block(p, block(p), when);
  }

  void step() {
    uint8_t op = in_.u8();
    switch (op % 16) {
      case 0:
      case 1:
      case 2:
      case 3: do_alloc(false); break;
      case 4: do_alloc(true); break;
      case 5: do_array(); break;
      case 6: do_strndup(); break;
      case 7:
      case 8: do_realloc(); break;
      case 9:
      case 10: do_mark(); break;
      case 11: do_restore(); break;
      case 12:
        if (op < 128)
          do_clear();
        else
          do_owns();
        break;
      case 13: do_defer(); break;
      case 14:
        if (op < 128)
          do_owns();
        else
          do_impossible();
        break;
      default: verify_all("on request"); break;
    }
  }

  akfuzz::Reader &in_;
  ak_arena a_{};
  Model m_;
  size_t budget_ = 0;
  bool retain_none_ = false;
  size_t os_base_ = 0;
  unsigned next_cleanup_ = 1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  akfuzz::Reader in(data, size);
  g_ran.clear();
  ArenaFuzz f(in);
  f.run();
  return 0;
}
