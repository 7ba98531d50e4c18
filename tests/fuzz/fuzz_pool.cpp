/* SPDX-License-Identifier: MIT */
/* fuzz_pool.cpp - libFuzzer target for the fixed-size object pool
 * (ak_pool): a differential check against a model of every live object.
 *
 * Input: option bytes (object size, alignment, sync mode NONE / SPINLOCK /
 * LOCKFREE / THREADS, slab size, max_objects cap, spare slabs, defragment,
 * mmap or heap backing), then operations: alloc, free, free or alloc on
 * the worker thread (cross-thread hand-off, concurrent modes only; the
 * worker is one persistent thread and every hand-off is synchronous, so
 * inputs stay deterministic), trim, reserve, set_defragment, owns.
 * The model asserts that no two live objects overlap (slot extents),
 * alignment holds, every object keeps its byte pattern until freed, the
 * cap gives NULL + ENOMEM exactly at max_objects, and the stats agree
 * (live exactly in the serial and lock-free modes; in AK_SYNC_THREADS
 * never below the model and above it only by frees not yet collected), and
 * that destroy gives back every byte the OS layer mapped. */
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "arenakit/pool.h"
#include "fuzz_model.h"
#include "os/os_mem.h"

#define AKF_TARGET "pool"

namespace {

using akfuzz::Block;

constexpr size_t kMaxOps = 1500;
constexpr size_t kMaxLive = 4096;
constexpr size_t kMaxLiveBytes = 2u << 20; /* slot bytes live at once */

const char *const kSyncNames[] = {"THREADS", "NONE", "SPINLOCK", "LOCKFREE"};

class PoolFuzz {
 public:
  explicit PoolFuzz(akfuzz::Reader &in) : in_(in) {}

  void run() {
    if (!create()) return;
    for (size_t op = 0; op < kMaxOps && !in_.empty(); op++) {
      step();
      check_stats("after an operation");
    }
    live_.verify_all("at the end of the input");
    /* Free everything (half of it on the worker in concurrent modes). */
    size_t k = 0;
    while (!live_.empty()) free_one(live_.map().begin(), concurrent_ && (k++ & 1));
    check_stats("after freeing everything");
    ak_pool_destroy(p_);
    _ak_os_counters c;
    _ak_os_get_counters(&c);
    AKF_CHECK(c.mapped_bytes == os_base_, "ak_pool_destroy (%s) left %zu bytes mapped (baseline %zu)",
              kSyncNames[sync_], c.mapped_bytes, os_base_);
  }

 private:
  static size_t natural_align(size_t size) {
    size_t a = size & (~size + 1);
    return a > 16 ? 16 : a;
  }

  bool create() {
    uint8_t f = in_.u8();
    ak_pool_options o;
    std::memset(&o, 0, sizeof o);
    uint8_t k = in_.u8();
    if (k < 192)
      o.object_size = k + 1u; /* 1..192 */
    else
      o.object_size = in_.u16() % 8192 + 1;
    o.sync = static_cast<ak_sync>(f & 3);
    o.backing = (f & 4) ? AK_BACKING_HEAP : AK_BACKING_MMAP;
    o.defragment = (f & 8) != 0;
    if (f & 16) o.max_objects = in_.u8() % 64 + 1;
    if (f & 32) o.slab_size = _ak_os_page_size() << (in_.u8() % 5);
    if (f & 64) o.align = static_cast<size_t>(1) << (in_.u8() % 13);
    if (f & 128) o.spare_slabs = in_.u8() % 4;
    o.name = "fuzz";
    sync_ = o.sync;
    concurrent_ = o.sync != AK_SYNC_NONE;
    cap_ = o.max_objects;
    object_size_ = o.object_size;
    align_ = o.align ? o.align : natural_align(o.object_size);
    _ak_os_counters c;
    _ak_os_get_counters(&c);
    os_base_ = c.mapped_bytes;
    errno = 0;
    p_ = ak_pool_create(&o);
    if (!p_) {
      /* Only a slab too small for the object (or its alignment) is refused. */
      AKF_CHECK(errno == EINVAL && o.slab_size != 0,
                "ak_pool_create(size %zu, align %zu, slab %zu) failed: %s", o.object_size, o.align,
                o.slab_size, ak_last_error());
      return false;
    }
    ak_pool_stats s;
    ak_pool_stats_get(p_, &s);
    AKF_CHECK(s.version == AK_POOL_STATS_VERSION && s.object_size == object_size_ &&
                  s.slot_size >= object_size_ && s.slot_size % align_ == 0 && s.live == 0,
              "fresh pool: stats version %u, object %zu, slot %zu, live %zu (object %zu, align %zu)",
              s.version, s.object_size, s.slot_size, s.live, object_size_, align_);
    slot_ = s.slot_size;
    AKF_CHECK(std::strcmp(ak_pool_name(p_), "fuzz") == 0, "ak_pool_name is '%s'", ak_pool_name(p_));
    return true;
  }

  void check_stats(const char *when) {
    ak_pool_stats s;
    ak_pool_stats_get(p_, &s);
    size_t model = live_.size();
    if (sync_ == AK_SYNC_THREADS) {
      AKF_CHECK(s.live >= model && s.live <= model + remote_frees_,
                "%s: %s pool: live %zu, model %zu (+%zu remote)", when, kSyncNames[sync_], s.live, model,
                remote_frees_);
    } else {
      AKF_CHECK(s.live == model, "%s: %s pool: live %zu, model %zu", when, kSyncNames[sync_], s.live, model);
    }
    AKF_CHECK(s.peak_live >= s.live, "%s: peak_live %zu < live %zu", when, s.peak_live, s.live);
    if (cap_ && sync_ != AK_SYNC_THREADS)
      AKF_CHECK(s.peak_live <= cap_, "%s: peak_live %zu above max_objects %zu", when, s.peak_live, cap_);
    AKF_CHECK(s.peak_slabs >= s.slabs, "%s: peak_slabs %zu < slabs %zu", when, s.peak_slabs, s.slabs);
    AKF_CHECK(s.slab_allocs - s.slab_releases == s.slabs, "%s: %zu slabs but %zu obtained and %zu released",
              when, s.slabs, s.slab_allocs, s.slab_releases);
    AKF_CHECK(model == 0 || s.slabs > 0, "%s: %zu live objects in no slab", when, model);
    AKF_CHECK(s.slabs == 0 || s.bytes_reserved >= s.slabs * _ak_os_page_size(), "%s: %zu slabs in %zu bytes",
              when, s.slabs, s.bytes_reserved);
    AKF_CHECK(s.bytes_reserved >= s.live * slot_, "%s: %zu live slots of %zu bytes in %zu bytes", when,
              s.live, slot_, s.bytes_reserved);
  }

  /* Checks and records a new object (allocated on `owner`). */
  void record(void *o, unsigned owner, const char *call) {
    AKF_CHECK((reinterpret_cast<uintptr_t>(o) & (align_ - 1)) == 0, "%s = %p not aligned to %zu", call, o,
              align_);
    AKF_CHECK(ak_pool_owns(p_, o), "ak_pool_owns(%p) is false for a live object", o);
    Block b;
    b.size = object_size_;
    b.extent = slot_;
    b.align = align_;
    b.seed = static_cast<uint8_t>(seq_ * 29 + 3);
    b.seq = seq_++;
    b.owner = owner;
    akfuzz::fill(o, 0, b.size, b.seed);
    live_.add(o, b);
  }

  void alloc_one(bool on_worker) {
    if (live_.size() >= kMaxLive || (live_.size() + 1) * slot_ > kMaxLiveBytes) return;
    void *o = nullptr;
    int err = 0;
    if (on_worker) {
      akfuzz::Worker::get().run([&] {
        errno = 0;
        o = ak_pool_alloc(p_);
        err = errno;
      });
    } else {
      errno = 0;
      o = ak_pool_alloc(p_);
      err = errno;
    }
    bool at_cap = cap_ && live_.size() >= cap_;
    if (!o) {
      AKF_CHECK(at_cap && err == ENOMEM, "ak_pool_alloc (%s, %zu live, cap %zu) failed with errno %d: %s",
                kSyncNames[sync_], live_.size(), cap_, err, ak_last_error());
      return;
    }
    AKF_CHECK(!at_cap, "ak_pool_alloc (%s) gave an object past max_objects %zu", kSyncNames[sync_], cap_);
    record(o, on_worker ? 1 : 0, on_worker ? "ak_pool_alloc (worker)" : "ak_pool_alloc");
  }

  void free_one(std::map<uintptr_t, Block>::iterator it, bool on_worker) {
    void *o = reinterpret_cast<void *>(it->first);
    live_.verify(it->first, it->second, "before ak_pool_free");
    AKF_CHECK(ak_pool_owns(p_, o), "ak_pool_owns(%p) is false for a live object", o);
    unsigned owner = it->second.owner;
    live_.map().erase(it);
    if (on_worker) {
      akfuzz::Worker::get().run([&] { ak_pool_free(p_, o); });
      if (owner == 0) remote_frees_++;
    } else {
      ak_pool_free(p_, o);
      if (owner == 1) remote_frees_++;
    }
  }

  void do_free(bool on_worker) {
    if (live_.empty()) return;
    free_one(live_.pick(in_.u16()), on_worker && concurrent_);
  }

  void do_trim() {
    ak_pool_trim(p_);
    if (sync_ == AK_SYNC_NONE || sync_ == AK_SYNC_SPINLOCK) {
      /* Spares and empty slabs went back: at most one slab per slab's
       * worth of live objects remains. */
      ak_pool_stats s;
      ak_pool_stats_get(p_, &s);
      AKF_CHECK(!live_.empty() || s.slabs == 0, "ak_pool_trim (%s) with nothing live kept %zu slabs",
                kSyncNames[sync_], s.slabs);
    }
  }

  void do_reserve() {
    size_t n = in_.u8() % 128;
    errno = 0;
    int rc = ak_pool_reserve(p_, n);
    if (cap_ && n > cap_) { /* room that could never be used is refused */
      AKF_CHECK(rc == ENOMEM && errno == ENOMEM, "ak_pool_reserve(%zu) past max_objects %zu gave %d", n, cap_,
                rc);
      return;
    }
    AKF_CHECK(rc == 0, "ak_pool_reserve(%zu) failed: %d %s", n, rc, ak_last_error());
  }

  void do_owns() {
    int local = 0;
    AKF_CHECK(!ak_pool_owns(p_, &local), "ak_pool_owns claims a stack address");
    AKF_CHECK(!ak_pool_owns(p_, nullptr), "ak_pool_owns claims NULL");
    if (live_.empty()) return;
    auto it = live_.pick(in_.u16());
    auto *o = reinterpret_cast<unsigned char *>(it->first);
    AKF_CHECK(ak_pool_owns(p_, o), "ak_pool_owns(%p) is false for a live object", static_cast<void *>(o));
    if (slot_ > 1)
      AKF_CHECK(!ak_pool_owns(p_, o + 1), "ak_pool_owns(%p) is true inside an object",
                static_cast<void *>(o + 1));
    live_.verify(it->first, it->second, "ak_pool_owns");
  }

  void step() {
    uint8_t op = in_.u8();
    switch (op % 16) {
      case 0:
      case 1:
      case 2:
      case 3: alloc_one(false); break;
      case 4:
      case 5:
      case 6: do_free(false); break;
      case 7:
      case 8: do_free(true); break;
      case 9:
        if (concurrent_)
          alloc_one(true);
        else
          alloc_one(false);
        break;
      case 10: do_trim(); break;
      case 11: do_reserve(); break;
      case 12: ak_pool_set_defragment(p_, (op & 32) != 0); break;
      case 13: do_owns(); break;
      case 14:
        /* A burst: allocate up to 64 objects at once (fills slabs). */
        for (unsigned i = in_.u8() % 64; i > 0; i--) alloc_one(false);
        break;
      default: live_.verify_all("on request"); break;
    }
  }

  akfuzz::Reader &in_;
  ak_pool *p_ = nullptr;
  akfuzz::LiveSet live_{AKF_TARGET};
  ak_sync sync_ = AK_SYNC_THREADS;
  bool concurrent_ = false;
  size_t cap_ = 0, object_size_ = 0, align_ = 1, slot_ = 0;
  size_t remote_frees_ = 0; /* frees made by a thread other than the allocating one */
  uint64_t seq_ = 0;
  size_t os_base_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  akfuzz::Reader in(data, size);
  PoolFuzz f(in);
  f.run();
  return 0;
}
