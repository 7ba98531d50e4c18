/* SPDX-License-Identifier: MIT */
/* pool.c - the pool's API: options and their validation, the geometry of
 * the slabs, create and destroy, and the calls that dispatch to the pool's
 * sync mode through its mode table (_ak_pool_mode): the slow paths,
 * reserve, trim, the defragmenter switch and stats. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "os/os_mem.h"
#include "pool/modes.h"
#include "pool/slab/backing.h"
#include "pool/slab/spares.h"
#include "prof/prof.h"

#define DEFAULT_SLAB ((size_t)64 * 1024)
#define MIN_SLOTS 8

/* ---- public API --------------------------------------------------------------------- */

void *ak_pool_alloc_slow(ak_pool *pub) {
  if (!pub) {
    _ak_error(EINVAL, "ak_pool_alloc: pool is NULL");
    return NULL;
  }
  _ak_pool_impl *p = _ak_impl(pub);
  if (_ak_config_validate && AK_UNLIKELY(p->destroyed))
    _ak_fatal("ak_pool_alloc(%p): pool '%s' was destroyed (ak_pool_destroy)", (void *)pub, p->name);
  /* A signal handler's call, the thread interrupted inside the pool's
   * code: served without waiting, or refused (pool/inside.h). */
  if (AK_UNLIKELY(_ak_pool_inside)) return _ak_pool_nested_alloc(p);
  _ak_pool_enter();
  bool sample = p->prof && _ak_prof_sample_due(p->object_size);
  void *o = p->alloc(p);
  AK_ASSERT(o == NULL || _ak_pool_slab_ok(p, o, _ak_slab_of(o, p->slab_size))); /* a slot of p */
  if (AK_UNLIKELY(sample) && o) _ak_pool_prof_sampled(p, o);
  _ak_pool_leave();
  return o;
}

void ak_pool_free_slow(ak_pool *pub, void *o) {
  if (!pub || !o) return;
  _ak_pool_impl *p = _ak_impl(pub);
  if (_ak_config_validate && AK_UNLIKELY(p->destroyed))
    _ak_fatal("ak_pool_free(%p): pool '%s' was destroyed (ak_pool_destroy)", o, p->name);
  if (AK_UNLIKELY(_ak_pool_inside)) { /* a signal handler's call, as in ak_pool_alloc_slow */
    _ak_pool_nested_free(p, o);
    return;
  }
  _ak_pool_enter();
  if (AK_UNLIKELY(p->prof)) _ak_pool_prof_free(p, o); /* before the slot can be handed out again */
  p->free(p, o);
  /* A slab put aside may want the background thread (no pool lock is held
   * here). LOCKFREE puts none aside (a trim decommits its slabs itself),
   * and its free starts no thread: it serves signal handlers. */
  if (p->sync != AK_SYNC_LOCKFREE) _ak_reclaim_start_wanted();
  _ak_pool_leave();
}

/* Hardened (guards): the last page of a slab of at least four pages is a
 * guard page; smaller slabs have none (it would take a quarter or more). */
static size_t guard_size(size_t slab) {
  size_t ps = _ak_os_page_size();
  return ak_harden_guards && slab >= 4 * ps ? ps : 0;
}

static size_t natural_align(size_t size) {
  size_t a = size & (~size + 1); /* lowest set bit */
  return a > 16 ? 16 : a;
}

/* The headers define ak_pool_create as a macro (ak_pool_create_inline with
 * their layout version); the parentheses keep it from expanding here. A
 * call of the symbol itself (a function pointer) is taken to come from
 * this build's headers, with links not encoded. */
ak_pool *(ak_pool_create)(const ak_pool_options *opts) {
  return ak_pool_create_inline(opts, AK_POOL_LAYOUT_VERSION << 8);
}

/* Validates the options of ak_pool_create and the layout version of the
 * caller's headers: 0, or an errno with the message set. */
static int check_options(const ak_pool_options *opts, int inline_abi) {
  static const char *const call = "ak_pool_create";
  if (!opts) {
    _ak_error(EINVAL, "%s: options are NULL (object_size is required)", call);
    return EINVAL;
  }
  /* Programs read the pool's head and the thread heaps inline with the
   * layout of the headers they were compiled with: another layout is
   * refused, never misread. */
  if ((inline_abi >> 8) != AK_POOL_LAYOUT_VERSION) {
    _ak_error(EPROTO,
              "%s: pool '%s': the program was compiled with arenakit pool headers of layout version %d, "
              "this library has version %d: rebuild it against this library's headers",
              call, opts->name ? opts->name : "pool", inline_abi >> 8, AK_POOL_LAYOUT_VERSION);
    return EPROTO;
  }
  const ak_pool_options o = *opts;
  size_t ps = _ak_os_page_size();
  const char *bad = NULL;
  if (o.object_size == 0)
    bad = "object_size is 0";
  else if (o.object_size > SIZE_MAX / 4)
    bad = "object_size is too large";
  else if (o.align & (o.align - 1))
    bad = "align is not a power of two";
  else if (o.slab_size && ((o.slab_size & (o.slab_size - 1)) || o.slab_size < ps))
    bad = "slab_size is not a power of two >= the page size";
  else if ((unsigned)o.sync > AK_SYNC_LOCKFREE)
    bad = "unknown sync mode";
  else if ((unsigned)o.backing > AK_BACKING_FILE)
    bad = "unknown backing";
  else if ((o.backing == AK_BACKING_FILE) != (o.path != NULL))
    bad = "a path is needed with, and only with, AK_BACKING_FILE";
  if (!bad) return 0;
  _ak_error(EINVAL, "%s: pool '%s': %s", call, o.name ? o.name : "pool", bad);
  return EINVAL;
}

/* The shape of a pool's slabs, from its options. */
typedef struct geometry {
  size_t slot;     /* bytes per slot: the object, rounded up */
  size_t align;    /* of the first slot in a slab */
  size_t slab;     /* slab size, a power of two */
  size_t guard;    /* hardened: guard bytes at the end of each slab */
  size_t capacity; /* slots per slab */
} geometry;

/* Computes the geometry of valid options `o`: 0, or an errno with the
 * message set (an object that fits no slab, a slab no system could commit). */
static int pool_geometry(const ak_pool_options *o, geometry *g) {
  static const char *const call = "ak_pool_create";
  size_t ps = _ak_os_page_size();
  size_t align = o->align ? o->align : natural_align(o->object_size);
  size_t ialign = align < sizeof(void *) ? sizeof(void *) : align;
  size_t slot = (o->object_size < sizeof(void *) ? sizeof(void *) : o->object_size);
  /* AK_SYNC_LOCKFREE: the first slot of a batch holds two words (its
   * link and the batch word, modes/lockfree.c). */
  if (o->sync == AK_SYNC_LOCKFREE && slot < 2 * sizeof(void *)) slot = 2 * sizeof(void *);
  slot = (slot + ialign - 1) & ~(ialign - 1);
  /* Where the slots start in a slab: aligned to the largest power of two
   * dividing the slot size, up to a cache line, so that no slot straddles
   * a line it could sit inside (16-byte slots after a header rounded only
   * to 8 would have every fourth cross a line: two lines per store). At
   * most 56 bytes of a slab go to it. */
  size_t lalign = slot & (~slot + 1);
  if (lalign > 64) lalign = 64;
  if (lalign < ialign) lalign = ialign;
  AK_ASSERT((lalign & (lalign - 1)) == 0 && lalign % ialign == 0 && slot % ialign == 0); /* powers of two */
  size_t slab = o->slab_size;
  if (!slab) {
    slab = DEFAULT_SLAB < ps ? ps : DEFAULT_SLAB;
    while (slab < (SIZE_MAX >> 2) &&
           _ak_slab_capacity(slab - guard_size(slab), slot, lalign, _ak_config_checked) < MIN_SLOTS)
      slab *= 2;
  }
  size_t guard = guard_size(slab);
  if (ialign > slab / 2 || _ak_slab_capacity(slab - guard, slot, lalign, _ak_config_checked) == 0) {
    _ak_error(EINVAL, "%s: pool '%s': an object of %zu bytes aligned to %zu does not fit a %zu-byte slab",
              call, o->name ? o->name : "pool", o->object_size, align, slab);
    return EINVAL;
  }
  /* A slab that no request could commit (1 TiB objects: 16 TiB slabs)
   * would fail at the first allocation anyway, or under a permissive
   * overcommit policy hand out memory that cannot exist: refused now.
   * Only larger slabs than the default ask (the check reads /proc). */
  if (slab > DEFAULT_SLAB && o->backing != AK_BACKING_FILE && slab > _ak_os_commit_limit()) {
    _ak_error(
        ENOMEM,
        "%s: pool '%s': an object of %zu bytes needs slabs of %zu bytes, more than the system can commit",
        call, o->name ? o->name : "pool", o->object_size, slab);
    return ENOMEM;
  }
  *g = (geometry){slot, lalign, slab, guard,
                  _ak_slab_capacity(slab - guard, slot, lalign, _ak_config_checked)};
  AK_ASSERT(g->capacity > 0 && (g->slab & (g->slab - 1)) == 0 && g->slot % ialign == 0);
  return 0;
}

/* Fills zeroed pool `p` from valid options `o` and their geometry `g`:
 * every field but the file backing, the per-thread registry, the spare
 * set and the registry of pools. */
static void pool_init(_ak_pool_impl *p, const ak_pool_options *o, const geometry *g, bool inline_encode) {
  static const _ak_pool_mode *const modes[] = {[AK_SYNC_THREADS] = &_ak_mode_threads,
                                               [AK_SYNC_NONE] = &_ak_mode_none,
                                               [AK_SYNC_SPINLOCK] = &_ak_mode_spinlock,
                                               [AK_SYNC_LOCKFREE] = &_ak_mode_lockfree};
  p->mode = modes[o->sync];
  p->sync = o->sync;
  p->object_size = o->object_size;
  p->align = g->align;
  p->slot = g->slot;
  p->slab_size = g->slab;
  p->guard = g->guard;
  p->prof = _ak_prof_is_on();
  p->inline_ok = inline_encode == ak_harden_encode && !p->prof;
  p->capacity = g->capacity;
  /* The hardened inline frees test the slot grid (_ak_pool_on_grid); slots
   * spanning 4 GiB or more leave slot_span 0: every free reaches the library. */
  p->pub.slot_first = _ak_slab_header_size(p->capacity, g->align, _ak_config_checked);
  if (p->capacity * g->slot < ((uint64_t)1 << 32)) {
    p->pub.slot_span = p->capacity * g->slot;
    p->pub.slot_div = UINT64_MAX / g->slot + 1;
  }
  /* The slots fit the slab before its guard. */
  AK_ASSERT(p->capacity > 0 && p->pub.slot_first + p->capacity * g->slot <= g->slab - g->guard);
  p->max_objects = o->max_objects;
  p->spare_limit = o->spare_slabs;
  p->release_empty = o->release_empty;
  p->backing = o->backing;
  p->file.fd = -1;
  snprintf(p->name, sizeof p->name, "%s", o->name ? o->name : "pool");
  p->id = _ak_pools_new_id();
  atomic_init(&p->defragment, o->defragment);
  p->tracked = _ak_track_mode();
  p->debug = _ak_config_checked || p->tracked;
  pthread_mutex_init(&p->mu, NULL);
  atomic_init(&p->file.mu, 0);
  p->pub.slot = p->slot; /* the inline paths' step through never-used slots */
  p->alloc = p->mode->alloc;
  p->free = p->mode->free;
  p->mode->init(p); /* the inline paths' initial state */
  if (p->tracked & AK_TRACK_MODE_VALGRIND) {
    p->vg_pool = _ak_track_new_pool_id();
    AK_VG_CREATE_POOL(p->vg_pool);
  }
}

ak_pool *ak_pool_create_inline(const ak_pool_options *opts, int inline_abi) {
  geometry g;
  if (check_options(opts, inline_abi) != 0 || pool_geometry(opts, &g) != 0) return NULL;
  size_t bsize = (sizeof(_ak_pool_impl) + 63) & ~(size_t)63;
  _ak_pool_impl *p = aligned_alloc(64, bsize); /* the contended fields are cache-line aligned */
  if (!p) {
    _ak_error(ENOMEM, "ak_pool_create: out of memory");
    return NULL;
  }
  memset(p, 0, bsize);
  pool_init(p, opts, &g, (inline_abi & AK_POOL_INLINE_ENCODE_BIT) != 0);
  /* Every mode has the steps the API calls unconditionally. */
  AK_ASSERT(p->mode->alloc && p->mode->free && p->mode->reserve && p->mode->trim && p->mode->counts &&
            p->mode->release && p->mode->init && (p->mode->tls == NULL) == (p->sync == AK_SYNC_NONE));
  if (opts->backing == AK_BACKING_FILE && _ak_pool_file_open(p, opts->path, "ak_pool_create") != 0) {
    int e = errno;
    pthread_mutex_destroy(&p->mu);
    free(p);
    errno = e;
    return NULL;
  }
  /* The concurrent modes keep per-thread state (modes/tls.c). */
  if (p->mode->tls) _ak_tls_register(p, p->mode->tls);
  /* The reclaim policy by default: spares kept for reuse and given back by
   * time (spare_slabs, if set, caps them); with release_empty:
   * spare_slabs kept, any other empty slab released at once. */
  if (p->release_empty)
    _ak_spare_set_init(&p->spares, &_ak_pool_spare_ops, p, opts->spare_slabs, 0);
  else
    _ak_spare_set_init(&p->spares, &_ak_pool_spare_ops, p, opts->spare_slabs ? opts->spare_slabs : SIZE_MAX,
                       AK_SPARE_TIMED | AK_SPARE_REGISTERED);
  _ak_pools_add(p);
  return &p->pub;
}

void ak_pool_destroy(ak_pool *pub) {
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  if (_ak_config_validate && p->destroyed)
    _ak_fatal("ak_pool_destroy(%p): pool '%s' was destroyed already", (void *)pub, p->name);
  _ak_pools_remove(p);
  size_t live = 0, peak = 0;
  if (p->mode->settle) p->mode->settle(p);
  p->mode->counts(p, &live, &peak);
  AK_ASSERT(live <= peak); /* the high-water mark is never below the count */
  /* Frees every thread's heap or magazine; no thread exit touches p after. */
  if (p->tls_mode) _ak_tls_unregister(p);
  p->mode->release(p);
  _ak_spare_drain(&p->spares);
  _ak_spare_set_fini(&p->spares); /* waits for a pass of the background thread */
  if (_ak_config_checked && live) _ak_warn("ak_pool_destroy: pool '%s' had %zu live objects", p->name, live);
  if (p->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_DESTROY_POOL(p->vg_pool);
  _ak_pool_file_close(p);
  _ak_table_free(&p->table);
  pthread_mutex_destroy(&p->mu);
  if (_ak_config_validate) {
    /* A tombstone: every inline path now reaches the library, which names
     * the destroyed pool; the oldest tombstone is freed. */
    _ak_pool_inline_off(p);
    p->pub.tkey = 0;
    p->pub.mkey = 0;
    p->destroyed = true;
    p = _ak_pools_bury(p);
  }
  free(p);
}

/* A failed reserve reports itself as ak_pool_reserve, keeping the reason
 * the slab or backing code gave (which names ak_pool_alloc). */
static int reserve_result(_ak_pool_impl *p, int rc) {
  if (rc == 0) return 0;
  const char *m = ak_last_error();
  if (strncmp(m, "ak_pool_reserve:", 16) != 0) {
    const char *why = strstr(m, "': ");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", why ? why + 3 : strerror(rc));
    _ak_pool_error(p, rc, "ak_pool_reserve", buf);
  }
  errno = rc;
  return rc;
}

int ak_pool_reserve(ak_pool *pub, size_t n) {
  if (!pub) {
    _ak_error(EINVAL, "ak_pool_reserve: pool is NULL");
    return EINVAL;
  }
  _ak_pool_impl *p = _ak_impl(pub);
  /* Room that can never be used, or whose slabs would not fit the address
   * space: refused up front, instead of mapping slabs until the OS says no. */
  if ((p->max_objects && n > p->max_objects) || n / p->capacity >= SIZE_MAX / p->slab_size) {
    _ak_pool_error(p, ENOMEM, "ak_pool_reserve",
                   p->max_objects && n > p->max_objects ? "more objects than max_objects"
                                                        : "that many objects do not fit the address space");
    return ENOMEM;
  }
  /* What the new slabs could need at most (the room there is already is
   * not counted): more than the system can commit, or than the file
   * system has free, fails now, with nothing mapped, instead of after
   * mapping slab after slab. */
  size_t bytes = (n / p->capacity + (n % p->capacity != 0)) * p->slab_size;
  if (p->backing == AK_BACKING_FILE ? bytes > _ak_os_file_room(p->file.fd) : bytes > _ak_os_commit_limit()) {
    char msg[600];
    if (p->backing == AK_BACKING_FILE)
      snprintf(msg, sizeof msg,
               "%zu objects need up to %zu bytes, more than the file system of '%s' has free", n, bytes,
               p->file.path);
    else
      snprintf(msg, sizeof msg, "%zu objects need up to %zu bytes, more than the system can commit", n,
               bytes);
    int e = p->backing == AK_BACKING_FILE ? ENOSPC : ENOMEM;
    _ak_pool_error(p, e, "ak_pool_reserve", msg);
    return e;
  }
  return reserve_result(p, p->mode->reserve(p, n));
}

bool ak_pool_owns(const ak_pool *pub, const void *ptr) {
  if (!pub || !ptr) return false;
  _ak_pool_impl *p = _ak_impl(pub);
  const _ak_slab *s = _ak_slab_of(ptr, p->slab_size);
  return _ak_table_has(&p->table, (uintptr_t)s) && _ak_slab_is_slot(s, (uintptr_t)ptr);
}

void ak_pool_trim(ak_pool *pub) {
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  p->mode->trim(p);
}

void ak_pool_set_defragment(ak_pool *pub, bool on) {
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  if (p->mode->set_defragment)
    p->mode->set_defragment(p, on);
  else
    atomic_store(&p->defragment, on);
}

const char *ak_pool_name(const ak_pool *pub) { return pub ? _ak_impl(pub)->name : "(null)"; }

void ak_pool_stats_get(const ak_pool *pub, ak_pool_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  out->version = AK_POOL_STATS_VERSION;
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  out->object_size = p->object_size;
  out->slot_size = p->slot;
  if (p->mode->tick) (void)p->mode->tick(p);
  p->mode->counts(p, &out->live, &out->peak_live);
  _ak_spare_tick(&p->spares); /* the counts show the policy's due steps done */
  _ak_table_stats(&p->table, p->slab_size, out);
  _ak_spare_counts sc;
  _ak_spare_stats(&p->spares, &sc);
  size_t cold = sc.spare_bytes - sc.committed;
  out->bytes_committed = out->bytes_reserved > cold ? out->bytes_reserved - cold : 0;
  out->bytes_spare = sc.spare_bytes;
  out->bytes_purged = sc.purged_bytes;
  if (p->mode->stats) p->mode->stats(p, out); /* LOCKFREE: its taken-down slabs */
  /* The counts are a snapshot that other threads change while it is read
   * (live and its peak, slabs and theirs come from different reads): only
   * what this call computes is checked. */
  AK_ASSERT(out->bytes_committed <= out->bytes_reserved);
}

int ak_pool_stats_print(const ak_pool *pub, FILE *f) {
  if (!f) {
    _ak_error(EINVAL, "ak_pool_stats_print: the stream is NULL");
    return -1;
  }
  ak_pool_stats s;
  ak_pool_stats_get(pub, &s);
  const _ak_pool_impl *p = pub ? _ak_impl(pub) : NULL;
  char obj[AK_BYTES_TEXT], slot[AK_BYTES_TEXT], reserved[AK_BYTES_TEXT], resident[AK_BYTES_TEXT];
  char committed[AK_BYTES_TEXT], spare[AK_BYTES_TEXT], purged[AK_BYTES_TEXT];
  int rc = fprintf(f,
                   "pool '%s' (sync %s): objects of %s in slots of %s\n"
                   "  live objects  %zu (peak %zu)\n"
                   "  slabs         %zu (peak %zu): reserved %s, resident %s\n"
                   "  slabs obtained %zu, released %zu\n"
                   "  committed %s, spare %s, purged %s so far\n",
                   ak_pool_name(pub), p ? p->mode->name : "-", _ak_format_bytes(obj, s.object_size),
                   _ak_format_bytes(slot, s.slot_size), s.live, s.peak_live, s.slabs, s.peak_slabs,
                   _ak_format_bytes(reserved, s.bytes_reserved), _ak_format_bytes(resident, s.bytes_resident),
                   s.slab_allocs, s.slab_releases, _ak_format_bytes(committed, s.bytes_committed),
                   _ak_format_bytes(spare, s.bytes_spare), _ak_format_bytes(purged, s.bytes_purged));
  /* The text may sit in the stream's buffer: only a flush says whether
   * it was written (/dev/full takes the fprintf and fails the flush). */
  int saved = errno, e = rc < 0 ? (errno ? errno : EIO) : 0;
  errno = 0;
  if (!e && (fflush(f) != 0 || ferror(f))) e = errno ? errno : EIO;
  errno = saved;
  if (e) {
    _ak_error(e, "ak_pool_stats_print: pool '%s': cannot write the stats: %s", ak_pool_name(pub),
              strerror(e));
    return -1;
  }
  return 0;
}
