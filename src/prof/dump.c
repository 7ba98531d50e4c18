/* SPDX-License-Identifier: MIT */
/* dump.c - writing the profile: pprof's profile.proto (uncompressed,
 * which pprof reads as well as gzip), built from a snapshot of the tables.
 *
 * Under `mu` the dump copies the sites, sums the live set per site and
 * notes the counts of frames, nodes and labels (those below the counts
 * never change); then, with no lock but `dump_mu` (one dump at a time),
 * it reads the mappings, encodes and writes, while other threads go on
 * sampling and freeing. All its memory is one scratch mapping from the OS
 * layer, bump-allocated and unmapped at the end.
 *
 * The profile: sample types alloc_objects/count, alloc_space/bytes,
 * inuse_objects/count, inuse_space/bytes (the default); one sample per
 * site, its locations innermost first, values already unsampled, its
 * label as a string label (pprof's -tagfocus=KEY=VALUE); one location per
 * frame (address, mapping; location id = frame id); the executable mappings of
 * /proc/self/maps, the main program first, with file offsets and GNU
 * build ids so that pprof symbolizes from the files; period_type
 * space/bytes and the period; drop_frames naming the allocator's entry
 * points, so that a static link, whose frames of the library are not
 * left out at capture, shows the caller of malloc as the allocating
 * frame. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/assert.h"
#include "os/os_mem.h"
#include "prof/prof_internal.h"
#include "prof/proto.h"

/* Frames pprof drops, with those they called (a regular expression
 * matched against whole function names). */
static const char drop_frames[] =
    "_ak_.*|ak_(malloc|calloc|realloc|reallocarray|free|aligned_alloc|posix_memalign|memalign|"
    "pool_alloc.*|arena_alloc.*|arena_zalloc.*|arena_realloc.*|arena_strndup.*)|"
    "malloc|calloc|realloc|reallocarray|valloc|pvalloc|aligned_alloc|posix_memalign|memalign|"
    "operator new.*";

/* Profile fields (profile.proto). */
enum {
  F_SAMPLE_TYPE = 1,
  F_SAMPLE = 2,
  F_MAPPING = 3,
  F_LOCATION = 4,
  F_STRING = 6,
  F_DROP_FRAMES = 7,
  F_TIME = 9,
  F_PERIOD_TYPE = 11,
  F_PERIOD = 12,
  F_COMMENT = 13,
  F_DEFAULT_TYPE = 14
};

#define MAX_MAPS 4096
#define NAMES_BYTES (512 * 1024)
#define MAX_STRINGS (32 + 2 * AK_PROF_MAX_LABELS + 2 * MAX_MAPS)
#define OUT_BYTES (64 * 1024)

typedef struct dmap {
  uintptr_t start, limit;
  uint64_t offset;
  uint32_t file, build; /* string ids */
  bool main;
} dmap;

typedef struct dump {
  char *base; /* the scratch mapping */
  size_t size, used;
  _ak_prof_site *sites;              /* the snapshot */
  uint64_t *inuse_obj, *inuse_bytes; /* per site, summed from the live set */
  uint32_t nsites, nlabels;
  _ak_prof_vec nodes, frames;
  const _ak_prof_label *labels;
  size_t counters[5]; /* stacks, dropped stacks, dropped live, dropped labels, samples */
  uint64_t period;
  int method;
  dmap *maps;
  uint32_t nmaps;
  char *names;
  size_t names_used;
  const char **str; /* the string table */
  uint32_t nstr, *str_slots, str_mask;
  _ak_pb out;
} dump;

/* ---- scratch --------------------------------------------------------------------- */

static void *take(dump *d, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n > d->size - d->used) return NULL;
  void *p = d->base + d->used;
  d->used += n;
  return p;
}

static uint32_t pow2_at_least(size_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

/* ---- snapshot (under mu) ----------------------------------------------------------- */

/* Bytes of each piece of the scratch, in the order they are taken. */
static void piece_sizes(uint32_t nsites, size_t sz[6]) {
  sz[0] = (size_t)nsites * (sizeof(_ak_prof_site) + 2 * sizeof(uint64_t));
  sz[1] = OUT_BYTES;
  sz[2] = MAX_STRINGS * sizeof(char *);
  sz[3] = (size_t)pow2_at_least(2 * MAX_STRINGS) * 4;
  sz[4] = MAX_MAPS * sizeof(dmap);
  sz[5] = NAMES_BYTES;
}

static size_t scratch_bytes(uint32_t nsites) {
  size_t sz[6], total = 0;
  piece_sizes(nsites, sz);
  for (int i = 0; i < 6; i++) total += (sz[i] + 15) & ~(size_t)15;
  return total;
}

/* Copies what the dump needs and sums the live set per site; maps the
 * scratch (while holding mu: one mmap). -1 with ENOMEM. */
static int snapshot(dump *d) {
  _ak_prof_tables *t = &_ak_prof_g.t;
  pthread_mutex_lock(&_ak_prof_g.mu);
  if (AK_CHECKED && t->ready) {
    _ak_prof_check_stacks(t);
    _ak_prof_check_live(t);
  }
  d->nsites = t->ready ? t->sites.n : 0;
  d->nodes = t->nodes;
  d->frames = t->frames;
  d->labels = t->labels;
  d->nlabels = t->nlabels;
  size_t c[5] = {t->stacks, t->dropped_stacks, t->dropped_live, t->dropped_labels, t->samples};
  memcpy(d->counters, c, sizeof c);
  d->size = scratch_bytes(d->nsites);
  d->base = (char *)_ak_os_alloc(d->size, 1);
  if (d->base) {
    d->sites = (_ak_prof_site *)take(d, (size_t)d->nsites * (sizeof(_ak_prof_site) + 2 * sizeof(uint64_t)));
    d->inuse_obj = (uint64_t *)(d->sites + d->nsites);
    d->inuse_bytes = d->inuse_obj + d->nsites;
    for (uint32_t i = 1; i < d->nsites; i++)
      d->sites[i] = *(const _ak_prof_site *)_ak_prof_vec_at(&t->sites, i);
    if (d->nsites) _ak_prof_live_sum(t, d->inuse_obj, d->inuse_bytes, d->nsites);
  }
  pthread_mutex_unlock(&_ak_prof_g.mu);
  if (!d->base) errno = ENOMEM;
  return d->base ? 0 : -1;
}

/* ---- strings --------------------------------------------------------------------------- */

static uint64_t str_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
  return h;
}

/* The id of `s` (which must outlive the dump) in the string table. */
static uint32_t str_id(dump *d, const char *s) {
  for (uint32_t h = (uint32_t)str_hash(s) & d->str_mask;; h = (h + 1) & d->str_mask) {
    uint32_t id = d->str_slots[h];
    if (id == 0) {
      if (d->nstr >= MAX_STRINGS) return 0;
      d->str[d->nstr] = s;
      d->str_slots[h] = d->nstr + 1;
      return d->nstr++;
    }
    if (strcmp(d->str[id - 1], s) == 0) return id - 1;
  }
}

/* A copy of `s` in the scratch names; "" when they are full. */
static const char *keep(dump *d, const char *s) {
  size_t n = strlen(s) + 1;
  if (n > NAMES_BYTES - d->names_used) return "";
  char *p = d->names + d->names_used;
  memcpy(p, s, n);
  d->names_used += n;
  return p;
}

/* ---- mappings -------------------------------------------------------------------------- */

typedef struct maps_ctx {
  dump *d;
  char exe[AK_PROF_PATH_MAX];
} maps_ctx;

static bool maps_step(void *arg, const _ak_prof_map_line *m) {
  maps_ctx *c = (maps_ctx *)arg;
  dump *d = c->d;
  if (!m->exec || m->path[0] == '\0' || d->nmaps >= MAX_MAPS) return d->nmaps < MAX_MAPS;
  dmap *x = &d->maps[d->nmaps++];
  x->start = m->start;
  x->limit = m->end;
  x->offset = m->offset;
  x->main = strcmp(m->path, c->exe) == 0;
  const char *prev = d->nmaps > 1 ? d->str[d->maps[d->nmaps - 2].file] : NULL;
  x->file = str_id(d, prev && strcmp(prev, m->path) == 0 ? prev : keep(d, m->path));
  char hex[2 * 64 + 1];
  x->build = 0;
  if (prev && strcmp(prev, m->path) == 0)
    x->build = d->maps[d->nmaps - 2].build;
  else if (_ak_prof_build_id(m->path, hex, sizeof hex))
    x->build = str_id(d, keep(d, hex));
  return true;
}

static void read_maps(dump *d) {
  maps_ctx c;
  c.d = d;
  if (!_ak_prof_exe_path(c.exe, sizeof c.exe)) c.exe[0] = '\0';
  d->nmaps = 0;
  if (_ak_prof_maps_each(maps_step, &c) != 0) d->nmaps = 0;
}

/* The mapping id (index + 1) of the mapping holding `pc`; 0 if none. */
static uint32_t map_of(const dump *d, uint64_t pc) {
  uint32_t lo = 0, hi = d->nmaps;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (pc < d->maps[mid].start)
      hi = mid;
    else if (pc >= d->maps[mid].limit)
      lo = mid + 1;
    else
      return mid + 1;
  }
  return 0;
}

static void emit_mapping(dump *d, uint32_t i) {
  uint8_t buf[128];
  _ak_pb m;
  _ak_pb_init(&m, buf, sizeof buf, -1);
  const dmap *x = &d->maps[i];
  _ak_pb_uint(&m, 1, i + 1);
  _ak_pb_uint(&m, 2, x->start);
  _ak_pb_uint(&m, 3, x->limit);
  _ak_pb_uint(&m, 4, x->offset);
  _ak_pb_int(&m, 5, x->file);
  _ak_pb_int(&m, 6, x->build);
  _ak_pb_message(&d->out, F_MAPPING, &m);
}

/* The main program first (pprof takes mapping[0] for it), then the rest. */
static void emit_mappings(dump *d) {
  for (uint32_t i = 0; i < d->nmaps; i++)
    if (d->maps[i].main) emit_mapping(d, i);
  for (uint32_t i = 0; i < d->nmaps; i++)
    if (!d->maps[i].main) emit_mapping(d, i);
}

/* ---- locations and samples ----------------------------------------------------------------- */

/* Read with no lock: a growth of the node heads may rewrite the word's
 * chain bits meanwhile (atomically; frame and parent stay). */
static _ak_prof_node node_at(const dump *d, uint32_t id) {
  return __atomic_load_n((const _ak_prof_node *)_ak_prof_vec_at(&d->nodes, id), __ATOMIC_RELAXED);
}

/* One location per frame: id = frame id, its mapping, its address. */
static void emit_locations(dump *d) {
  for (uint32_t id = 1; id < d->frames.n; id++) {
    uint64_t pc = _ak_prof_frame_pc((const _ak_prof_frame *)_ak_prof_vec_at(&d->frames, id));
    uint8_t buf[64];
    _ak_pb l;
    _ak_pb_init(&l, buf, sizeof buf, -1);
    _ak_pb_uint(&l, 1, id);
    _ak_pb_uint(&l, 2, map_of(d, pc));
    _ak_pb_uint(&l, 3, pc);
    _ak_pb_message(&d->out, F_LOCATION, &l);
  }
}

static uint64_t objects(uint64_t fixed) { return (fixed + AK_PROF_OBJ_ONE / 2) / AK_PROF_OBJ_ONE; }

static void emit_sample(dump *d, uint32_t site, const uint32_t *label_str) {
  const _ak_prof_site *s = &d->sites[site];
  uint64_t locs[AK_PROF_MAX_DEPTH];
  size_t n = 0;
  for (uint32_t x = _ak_prof_site_node(s); x != 0 && n < AK_PROF_MAX_DEPTH;
       x = _ak_prof_node_parent(node_at(d, x)))
    locs[n++] = _ak_prof_node_frame(node_at(d, x));
  uint64_t v[4] = {objects(s->alloc_obj), s->alloc_bytes, objects(d->inuse_obj[site]), d->inuse_bytes[site]};
  uint32_t label = _ak_prof_site_label(s);
  uint8_t buf[1024], lbuf[32];
  _ak_pb smp, lab;
  _ak_pb_init(&smp, buf, sizeof buf, -1);
  _ak_pb_packed(&smp, 1, locs, n);
  _ak_pb_packed(&smp, 2, v, 4);
  if (label != 0 && label <= d->nlabels) {
    _ak_pb_init(&lab, lbuf, sizeof lbuf, -1);
    _ak_pb_int(&lab, 1, label_str[2 * label]);
    _ak_pb_int(&lab, 2, label_str[2 * label + 1]);
    _ak_pb_message(&smp, 3, &lab);
  }
  _ak_pb_message(&d->out, F_SAMPLE, &smp);
}

/* ---- the profile ------------------------------------------------------------------------------------ */

static void emit_value_type(_ak_pb *out, uint32_t field, uint32_t type, uint32_t unit) {
  uint8_t buf[16];
  _ak_pb vt;
  _ak_pb_init(&vt, buf, sizeof buf, -1);
  _ak_pb_int(&vt, 1, type);
  _ak_pb_int(&vt, 2, unit);
  _ak_pb_message(out, field, &vt);
}

/* Comments (pprof -comments): the period, the stack method, the drops. */
static void comments(dump *d, uint32_t *ids) {
  char text[2][160];
  snprintf(text[0], sizeof text[0], "arenakit heap profile: mean %llu bytes between samples, stacks by %s",
           (unsigned long long)d->period, d->method == AK_PROF_STACK_FP ? "frame pointers" : "the unwinder");
  snprintf(text[1], sizeof text[1], "%zu samples, %zu stacks; dropped: %zu stacks, %zu live, %zu labels",
           d->counters[4], d->counters[0], d->counters[1], d->counters[2], d->counters[3]);
  ids[0] = str_id(d, keep(d, text[0]));
  ids[1] = str_id(d, keep(d, text[1]));
}

/* Sets up the string table (every string the profile refers to); fills
 * `label_str` with the key and value ids of each label. */
static void strings(dump *d, uint32_t *fixed, uint32_t *label_str) {
  static const char *const names[] = {"",      "alloc_objects", "count",       "alloc_space",
                                      "bytes", "inuse_objects", "inuse_space", "space"};
  for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) fixed[i] = str_id(d, names[i]);
  fixed[8] = str_id(d, drop_frames);
  comments(d, fixed + 9);
  for (uint32_t id = 1; id <= d->nlabels; id++) {
    label_str[2 * id] = str_id(d, d->labels[id].key);
    label_str[2 * id + 1] = str_id(d, d->labels[id].value);
  }
}

/* Carves the rest of the scratch into the dump's tables (pieces 1..5). */
static void carve(dump *d, void **out) {
  size_t sz[6];
  piece_sizes(d->nsites, sz);
  *out = take(d, sz[1]);
  d->str = (const char **)take(d, sz[2]);
  d->str_mask = pow2_at_least(2 * MAX_STRINGS) - 1;
  d->str_slots = (uint32_t *)take(d, sz[3]);
  d->maps = (dmap *)take(d, sz[4]);
  d->names = (char *)take(d, sz[5]);
  AK_ASSERT(d->used <= d->size && d->names != NULL);
}

/* Encodes the whole profile to `fd`. 0, or -1 with errno. */
static int encode(dump *d, int fd) {
  enum { EMPTY, ALLOC_OBJECTS, COUNT, ALLOC_SPACE, BYTES, INUSE_OBJECTS, INUSE_SPACE, SPACE, DROP, COMMENT };
  uint32_t s[COMMENT + 2], label_str[2 * AK_PROF_MAX_LABELS];
  void *out;
  carve(d, &out);
  _ak_pb_init(&d->out, out, OUT_BYTES, fd);
  strings(d, s, label_str);
  read_maps(d); /* adds the files and build ids to the strings */
  _ak_pb *o = &d->out;
  emit_value_type(o, F_SAMPLE_TYPE, s[ALLOC_OBJECTS], s[COUNT]);
  emit_value_type(o, F_SAMPLE_TYPE, s[ALLOC_SPACE], s[BYTES]);
  emit_value_type(o, F_SAMPLE_TYPE, s[INUSE_OBJECTS], s[COUNT]);
  emit_value_type(o, F_SAMPLE_TYPE, s[INUSE_SPACE], s[BYTES]);
  for (uint32_t i = 0; i < d->nstr; i++) _ak_pb_str(o, F_STRING, d->str[i]);
  emit_mappings(d);
  emit_locations(d);
  for (uint32_t i = 1; i < d->nsites; i++)
    if (d->sites[i].alloc_obj != 0) emit_sample(d, i, label_str);
  _ak_pb_int(o, F_DROP_FRAMES, s[DROP]);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  _ak_pb_int(o, F_TIME, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
  emit_value_type(o, F_PERIOD_TYPE, s[SPACE], s[BYTES]);
  _ak_pb_int(o, F_PERIOD, (int64_t)d->period);
  _ak_pb_int(o, F_COMMENT, s[COMMENT]);
  _ak_pb_int(o, F_COMMENT, s[COMMENT + 1]);
  _ak_pb_int(o, F_DEFAULT_TYPE, s[INUSE_SPACE]);
  return _ak_pb_flush(o);
}

/* Writes `path` through a temporary file renamed into place. 0, or -1
 * with errno and the message. */
static int write_file(dump *d, const char *call, const char *path) {
  char tmp[AK_PROF_PATH_MAX + 32];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    _ak_error(e, "%s: cannot create '%s': %s", call, tmp, strerror(e));
    return -1;
  }
  int rc = encode(d, fd);
  int e = errno;
  if (close(fd) != 0 && rc == 0) {
    rc = -1;
    e = errno;
  }
  if (rc == 0 && rename(tmp, path) != 0) {
    rc = -1;
    e = errno;
  }
  if (rc != 0) {
    unlink(tmp);
    _ak_error(e, "%s: cannot write '%s': %s", call, path, strerror(e));
  }
  return rc;
}

int _ak_prof_write(const char *call, const char *path) {
  dump d;
  memset(&d, 0, sizeof d);
  d.period = __atomic_load_n(&_ak_prof_g.period, __ATOMIC_RELAXED);
  d.method = __atomic_load_n(&_ak_prof_g.stack_method, __ATOMIC_RELAXED);
  pthread_mutex_lock(&_ak_prof_g.dump_mu);
  int rc = snapshot(&d);
  if (rc != 0)
    _ak_error(ENOMEM, "%s: no memory for the dump of '%s'", call, path);
  else
    rc = write_file(&d, call, path);
  if (d.base) _ak_os_free(d.base, d.size);
  if (rc == 0) __atomic_add_fetch(&_ak_prof_g.dumps, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&_ak_prof_g.dump_mu);
  return rc;
}
