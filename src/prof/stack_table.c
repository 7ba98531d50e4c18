/* SPDX-License-Identifier: MIT */
/* stack_table.c - where the heap profiler keeps stacks: its memory (from
 * the OS layer, counted), the chunked arrays its tables are made of, the
 * frames, the call tree that deduplicates stacks, the labels and the
 * sites.
 *
 * The call tree: a stack is inserted from its outermost frame inwards,
 * each return address interned as a frame id, then looked up as the child
 * (parent node, frame) in one hash table and added if missing, so stacks
 * that share their outer frames (all of them share the start of the
 * program, most its main loop) store those once; the stack is named by
 * its innermost node. Bounded by the frame and node bounds and the stack
 * bound (distinct stack ends, a bit per node): a stack that does not fit
 * is counted and its sample goes to the root, the empty stack, so the
 * totals stay right.
 *
 * Every function here runs under the profiler's `mu`. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "common/assert.h"
#include "os/os_mem.h"
#include "prof/prof_internal.h"

/* ---- memory ---------------------------------------------------------------- */

static size_t mapped;

void *_ak_prof_map(size_t size) {
  void *p = _ak_os_alloc(size, 1);
  if (p) __atomic_add_fetch(&mapped, _ak_os_round_page(size), __ATOMIC_RELAXED);
  return p;
}

void _ak_prof_unmap(void *p, size_t size) {
  if (!p) return;
  _ak_os_free(p, size);
  __atomic_sub_fetch(&mapped, _ak_os_round_page(size), __ATOMIC_RELAXED);
}

size_t _ak_prof_mapped(void) { return __atomic_load_n(&mapped, __ATOMIC_RELAXED); }

/* ---- chunked arrays ------------------------------------------------------------ */

static size_t vec_dir_bytes(const _ak_prof_vec *v) {
  return (((size_t)v->cap >> v->shift) + 1) * sizeof(char *);
}

static size_t vec_chunk_bytes(const _ak_prof_vec *v) { return (size_t)v->item << v->shift; }

static int vec_init(_ak_prof_vec *v, uint32_t item, uint32_t shift, size_t cap) {
  memset(v, 0, sizeof *v);
  v->item = item;
  v->shift = shift;
  v->cap = (uint32_t)cap;
  v->chunks = (char **)_ak_prof_map(vec_dir_bytes(v));
  return v->chunks ? 0 : -1;
}

static void vec_fini(_ak_prof_vec *v) {
  if (!v->chunks) return;
  for (uint32_t c = 0; c < v->nchunk; c++) _ak_prof_unmap(v->chunks[c], vec_chunk_bytes(v));
  _ak_prof_unmap(v->chunks, vec_dir_bytes(v));
  memset(v, 0, sizeof *v);
}

void *_ak_prof_vec_push(_ak_prof_vec *v, uint32_t *id) {
  if (v->n >= v->cap) return NULL;
  if ((v->n >> v->shift) >= v->nchunk) {
    char *c = (char *)_ak_prof_map(vec_chunk_bytes(v));
    if (!c) return NULL;
    v->chunks[v->nchunk++] = c;
  }
  *id = v->n++;
  return _ak_prof_vec_at(v, *id);
}

/* ---- the tables ------------------------------------------------------------------ */

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* A power of two >= n (1 for 0). */
static uint32_t pow2_at_least(size_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

/* `v` clamped to [1, max]; 0 takes `def`. */
static size_t bound(size_t v, size_t def, size_t max) { return v == 0 ? def : v > max ? max : v; }

/* Maps heads of up to `max` buckets (a power of two), one system page's
 * worth at first (fewer if `max` is smaller): _ak_prof_heads_fit grows
 * them with the table. */
static bool heads_map(_ak_prof_heads *h, uint32_t max) {
  uint32_t n = (uint32_t)(_ak_os_page_size() / sizeof(uint32_t));
  if (n > max) n = max;
  h->mask = n - 1;
  h->max_mask = max - 1;
  h->a = (uint32_t *)_ak_prof_map((size_t)n * sizeof(uint32_t));
  return h->a != NULL;
}

static void heads_unmap(_ak_prof_heads *h) {
  if (h->a) _ak_prof_unmap(h->a, ((size_t)h->mask + 1) * sizeof(uint32_t));
  h->a = NULL;
}

void _ak_prof_heads_fit(_ak_prof_tables *t, _ak_prof_heads *h, size_t entries, unsigned per,
                        _ak_prof_relink_fn relink) {
  uint32_t mask = h->mask;
  while (entries > ((size_t)mask + 1) * per && mask < h->max_mask) mask = mask * 2 + 1;
  if (mask == h->mask) return;
  _ak_prof_heads grown = {(uint32_t *)_ak_prof_map(((size_t)mask + 1) * sizeof(uint32_t)), mask, h->max_mask};
  if (!grown.a) return;
  relink(t, &grown);
  heads_unmap(h);
  *h = grown;
  AK_ASSERT(h->mask <= h->max_mask && (h->mask & (h->mask + 1)) == 0); /* a power of two, in bound */
}

/* The arrays and heads; the heads grow to their bound with the tables
 * (chains of AK_PROF_CHAIN_STACK or AK_PROF_CHAIN_SITE entries at the
 * bounds). Item 0 of each array is "none" (the root node). */
static bool tables_map(_ak_prof_tables *t, const _ak_prof_limits *l) {
  int rc = vec_init(&t->frames, sizeof(_ak_prof_frame), 10, l->frames + 1);
  rc |= vec_init(&t->nodes, sizeof(_ak_prof_node), 11, l->nodes + 1);
  rc |= vec_init(&t->sites, sizeof(_ak_prof_site), 9, l->stacks + 2); /* + (0, 0) */
  rc |= vec_init(&t->recs, sizeof(_ak_prof_rec), 9, l->live + 1);
  if (rc != 0) return false;
  bool heads = heads_map(&t->frame_heads, pow2_at_least(l->frames / AK_PROF_CHAIN_STACK));
  heads &= heads_map(&t->node_heads, pow2_at_least(l->nodes / AK_PROF_CHAIN_STACK));
  heads &= heads_map(&t->site_heads, pow2_at_least(l->stacks / AK_PROF_CHAIN_SITE));
  heads &= heads_map(&t->rec_heads, pow2_at_least(l->live / AK_PROF_CHAIN_SITE));
  t->stack_end = (uint8_t *)_ak_prof_map(l->nodes / 8 + 1);
  t->labels = (_ak_prof_label *)_ak_prof_map(AK_PROF_MAX_LABELS * sizeof(_ak_prof_label));
  uint32_t id;
  return heads && t->stack_end && t->labels && _ak_prof_vec_push(&t->frames, &id) &&
         _ak_prof_vec_push(&t->nodes, &id) && _ak_prof_vec_push(&t->sites, &id) &&
         _ak_prof_vec_push(&t->recs, &id);
}

int _ak_prof_tables_init(_ak_prof_tables *t, const _ak_prof_limits *limits) {
  static const _ak_prof_limits none;
  const _ak_prof_limits *in = limits ? limits : &none;
  _ak_prof_limits l = {bound(in->stacks, AK_PROF_MAX_STACKS, (1u << 24) - 2),
                       bound(in->nodes, AK_PROF_MAX_NODES, (1u << AK_PROF_NODE_BITS) - 2),
                       bound(in->frames, AK_PROF_MAX_FRAMES, (1u << AK_PROF_FRAME_BITS) - 2),
                       bound(in->live, AK_PROF_MAX_LIVE, (1u << 30))};
  AK_ASSERT(!t->ready);
  memset(t, 0, sizeof *t);
  t->max_stacks = l.stacks;
  if (!tables_map(t, &l)) {
    _ak_prof_tables_fini(t);
    errno = ENOMEM;
    return -1;
  }
  t->ready = true;
  uint32_t empty_site = _ak_prof_site_intern(t, 0, 0); /* site 1: the empty stack */
  AK_ASSERT(empty_site == 1);
  (void)empty_site;
  return 0;
}

void _ak_prof_tables_fini(_ak_prof_tables *t) {
  if (t->stack_end) _ak_prof_unmap(t->stack_end, (t->nodes.cap - 1) / 8 + 1);
  vec_fini(&t->frames);
  vec_fini(&t->nodes);
  vec_fini(&t->sites);
  vec_fini(&t->recs);
  heads_unmap(&t->frame_heads);
  heads_unmap(&t->node_heads);
  heads_unmap(&t->site_heads);
  heads_unmap(&t->rec_heads);
  if (t->labels) _ak_prof_unmap(t->labels, AK_PROF_MAX_LABELS * sizeof(_ak_prof_label));
  memset(t, 0, sizeof *t);
}

/* ---- frames and the call tree -------------------------------------------------------- */

static _ak_prof_frame *frame_at(const _ak_prof_tables *t, uint32_t id) {
  return (_ak_prof_frame *)_ak_prof_vec_at(&t->frames, id);
}

static _ak_prof_node *node_at(const _ak_prof_tables *t, uint32_t id) {
  return (_ak_prof_node *)_ak_prof_vec_at(&t->nodes, id);
}

static uint32_t frame_bucket(const _ak_prof_heads *h, uint64_t pc) { return (uint32_t)mix(pc) & h->mask; }

static uint32_t node_bucket(const _ak_prof_heads *h, uint32_t parent, uint32_t frame) {
  return (uint32_t)mix((uint64_t)parent << 32 | frame) & h->mask;
}

/* The relinks of _ak_prof_heads_fit: every frame, node, site. */
static void frames_relink(_ak_prof_tables *t, _ak_prof_heads *h) {
  for (uint32_t id = 1; id < t->frames.n; id++) {
    _ak_prof_frame *f = frame_at(t, id);
    uint32_t *head = &h->a[frame_bucket(h, _ak_prof_frame_pc(f))];
    f->next = *head;
    *head = id;
  }
}

/* A dump reads the nodes it copied the count of with no lock held
 * (dump.c): a node's word changes here in its chain bits only, frame and
 * parent kept, and atomically, so the dump reads the same path. */
static void nodes_relink(_ak_prof_tables *t, _ak_prof_heads *h) {
  for (uint32_t id = 1; id < t->nodes.n; id++) {
    _ak_prof_node *n = node_at(t, id);
    uint32_t parent = _ak_prof_node_parent(*n), frame = _ak_prof_node_frame(*n);
    uint32_t *head = &h->a[node_bucket(h, parent, frame)];
    __atomic_store_n(n, _ak_prof_node_make(frame, parent, *head), __ATOMIC_RELAXED);
    *head = id;
  }
}

/* The frame id of `pc`, added when missing; 0 at the frame bound. */
static uint32_t frame_intern(_ak_prof_tables *t, uint64_t pc) {
  uint32_t b = frame_bucket(&t->frame_heads, pc);
  for (uint32_t id = t->frame_heads.a[b]; id != 0; id = frame_at(t, id)->next)
    if (_ak_prof_frame_pc(frame_at(t, id)) == pc) return id;
  uint32_t id;
  _ak_prof_frame *f = (_ak_prof_frame *)_ak_prof_vec_push(&t->frames, &id);
  if (!f) return 0;
  f->pc_lo = (uint32_t)pc;
  f->pc_hi = (uint32_t)(pc >> 32);
  f->next = t->frame_heads.a[b];
  t->frame_heads.a[b] = id;
  _ak_prof_heads_fit(t, &t->frame_heads, t->frames.n - 1, AK_PROF_CHAIN_STACK, frames_relink);
  return id;
}

/* The child of `parent` for `frame`, added when missing; 0 at the node
 * bound. */
static uint32_t node_child(_ak_prof_tables *t, uint32_t parent, uint32_t frame) {
  uint32_t b = node_bucket(&t->node_heads, parent, frame);
  for (uint32_t id = t->node_heads.a[b]; id != 0;) {
    _ak_prof_node n = *node_at(t, id);
    if (_ak_prof_node_frame(n) == frame && _ak_prof_node_parent(n) == parent) return id;
    id = _ak_prof_node_next(n);
  }
  uint32_t id;
  _ak_prof_node *n = (_ak_prof_node *)_ak_prof_vec_push(&t->nodes, &id);
  if (!n) return 0;
  *n = _ak_prof_node_make(frame, parent, t->node_heads.a[b]);
  t->node_heads.a[b] = id;
  _ak_prof_heads_fit(t, &t->node_heads, t->nodes.n - 1, AK_PROF_CHAIN_STACK, nodes_relink);
  return id;
}

uint32_t _ak_prof_stack_intern(_ak_prof_tables *t, const uintptr_t *pcs, unsigned depth) {
  if (depth == 0) return 0;
  uint32_t node = 0;
  for (unsigned i = depth; i-- > 0;) {
    AK_ASSERT(pcs[i] != 0);
    uint32_t frame = frame_intern(t, pcs[i]);
    node = frame ? node_child(t, node, frame) : 0;
    if (node == 0) {
      t->dropped_stacks++;
      return 0;
    }
  }
  uint8_t bit = (uint8_t)(1u << (node & 7));
  if (!(t->stack_end[node >> 3] & bit)) {
    if (t->stacks >= t->max_stacks) {
      t->dropped_stacks++;
      return 0;
    }
    t->stack_end[node >> 3] |= bit;
    t->stacks++;
  }
  return node;
}

/* ---- labels ----------------------------------------------------------------------- */

/* Copies `s` (NULL: "") into `out` (cap bytes), cut to fit. */
static void copy_cut(char *out, size_t cap, const char *s) {
  size_t n = s ? strnlen(s, cap - 1) : 0;
  if (n) memcpy(out, s, n);
  out[n] = '\0';
}

uint32_t _ak_prof_label_intern(_ak_prof_tables *t, const char *key, const char *value) {
  if (!key && !value) return 0;
  _ak_prof_label want;
  copy_cut(want.key, sizeof want.key, key);
  copy_cut(want.value, sizeof want.value, value);
  for (uint32_t id = 1; id <= t->nlabels; id++)
    if (strcmp(t->labels[id].key, want.key) == 0 && strcmp(t->labels[id].value, want.value) == 0) return id;
  if (t->nlabels + 1 >= AK_PROF_MAX_LABELS) {
    t->dropped_labels++;
    return 0;
  }
  t->labels[t->nlabels + 1] = want;
  return ++t->nlabels;
}

/* ---- sites ------------------------------------------------------------------------- */

static _ak_prof_site *site_at(const _ak_prof_tables *t, uint32_t id) {
  return (_ak_prof_site *)_ak_prof_vec_at(&t->sites, id);
}

static uint32_t site_bucket(const _ak_prof_heads *h, uint32_t key) { return (uint32_t)mix(key) & h->mask; }

static void sites_relink(_ak_prof_tables *t, _ak_prof_heads *h) {
  for (uint32_t id = 1; id < t->sites.n; id++) {
    _ak_prof_site *s = site_at(t, id);
    uint32_t *head = &h->a[site_bucket(h, s->key)];
    s->next = *head;
    *head = id;
  }
}

uint32_t _ak_prof_site_intern(_ak_prof_tables *t, uint32_t node, uint32_t label) {
  AK_ASSERT(node < (1u << AK_PROF_NODE_BITS) && label < AK_PROF_MAX_LABELS);
  uint32_t key = node | label << AK_PROF_NODE_BITS, b = site_bucket(&t->site_heads, key);
  for (uint32_t id = t->site_heads.a[b]; id != 0; id = site_at(t, id)->next)
    if (site_at(t, id)->key == key) return id;
  uint32_t id;
  _ak_prof_site *s = (_ak_prof_site *)_ak_prof_vec_push(&t->sites, &id);
  if (!s) return 0;
  s->key = key;
  s->next = t->site_heads.a[b];
  t->site_heads.a[b] = id;
  _ak_prof_heads_fit(t, &t->site_heads, t->sites.n - 1, AK_PROF_CHAIN_SITE, sites_relink);
  return id;
}

/* ---- the validator ---------------------------------------------------------------------- */

static void check_frames(const _ak_prof_tables *t) {
  for (uint32_t id = 1; id < t->frames.n; id++) {
    uint64_t pc = _ak_prof_frame_pc(frame_at(t, id));
    uint32_t x = t->frame_heads.a[frame_bucket(&t->frame_heads, pc)];
    while (x != 0 && x != id) x = frame_at(t, x)->next;
    if (pc == 0 || x != id)
      _ak_fatal("prof: frame %u (pc %#llx) is not on its hash chain", id, (unsigned long long)pc);
  }
}

void _ak_prof_check_stacks(const _ak_prof_tables *t) {
  check_frames(t);
  size_t ends = 0;
  for (uint32_t id = 1; id < t->nodes.n; id++) {
    _ak_prof_node n = *node_at(t, id);
    uint32_t parent = _ak_prof_node_parent(n), frame = _ak_prof_node_frame(n);
    if (parent >= id || frame == 0 || frame >= t->frames.n)
      _ak_fatal("prof: call-tree node %u: parent %u, frame %u of %u", id, parent, frame, t->frames.n);
    uint32_t x = t->node_heads.a[node_bucket(&t->node_heads, parent, frame)];
    while (x != 0 && x != id) x = _ak_prof_node_next(*node_at(t, x));
    if (x != id) _ak_fatal("prof: call-tree node %u is not on its hash chain", id);
    ends += (t->stack_end[id >> 3] >> (id & 7)) & 1u;
  }
  if (ends != t->stacks || t->stacks > t->max_stacks)
    _ak_fatal("prof: %zu stack ends marked, %zu counted (bound %zu)", ends, t->stacks, t->max_stacks);
  for (uint32_t id = 1; id < t->sites.n; id++) {
    const _ak_prof_site *s = site_at(t, id);
    uint32_t x = t->site_heads.a[site_bucket(&t->site_heads, s->key)];
    while (x != 0 && x != id) x = site_at(t, x)->next;
    if (x != id || _ak_prof_site_node(s) >= t->nodes.n || _ak_prof_site_label(s) > t->nlabels)
      _ak_fatal("prof: site %u (key %#x) is not on its chain or out of range", id, s->key);
  }
}
