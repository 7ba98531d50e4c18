/* SPDX-License-Identifier: MIT */
/* prof_internal.h - what the heap profiler's files share (internal),
 * grouped by the file that defines it.
 *
 * The tables (one set per process, in memory from the OS layer):
 *   frames  each distinct return address once (ids 1..; 0: none).
 *   nodes   the call tree of every stack kept: node 0 is the root (no
 *           frame); a node is a frame id under its caller's node, packed
 *           in 8 bytes, so stacks that share outer frames share nodes and
 *           a frame met along many paths (an interpreter's loop) costs 8
 *           bytes a time; a stack is named by its innermost node.
 *   sites   one per (stack, label) pair: what was allocated there, scaled
 *           (what is still live there the dump sums from the live set).
 *   labels  the (kind, name) pairs, ids 1..AK_PROF_MAX_LABELS-1; 0: none.
 *   recs    the live set: one record per sampled block not yet freed,
 *           hashed by address.
 * Each table is a chunked array (_ak_prof_vec) with a bound. Chunks never
 * move and published frames and nodes never change, so the dump reads
 * those below its snapshot's counts after it drops the lock.
 *
 * Locks, in the order they are taken: `ctl_mu` (start, stop, options,
 * the dump path), `dump_mu` (one dump at a time), `mu` (the tables and
 * counters). None is held while any other lock of the library is waited
 * for, and the components call in with none of theirs held (prof.h). */
#ifndef AK_PROF_INTERNAL_H
#define AK_PROF_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/prof.h"
#include "prof/prof.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The constructor that registers the fork handlers and reads AK_PROF*:
 * after the library's others (src/common/lifecycle.h). Its place is free:
 * the profiler's locks are leaves, taken with no lock of a component held
 * (prof.h), so its prepare step may run before or after theirs. */
#define AK_CTOR_PROF 104

#define AK_PROF_DEFAULT_SAMPLE 524288
#define AK_PROF_MAX_SAMPLE ((long)1 << 40)
#define AK_PROF_MAX_LABELS 256 /* label ids 1..255; 0 = none */
#define AK_PROF_LABEL_KEY 16   /* bytes kept of a label's key, NUL included */
#define AK_PROF_LABEL_VALUE 64 /* ... and of its value */
#define AK_PROF_PATH_MAX 4096  /* a dump path, expanded, NUL included */

/* ---- stack_table.c: memory, chunked arrays, frames, call tree, labels, sites ---- */

/** Maps `size` bytes for the profiler (zeroed), counted in its memory. */
void *_ak_prof_map(size_t size);
/** Unmaps what _ak_prof_map returned. */
void _ak_prof_unmap(void *p, size_t size);
/** Bytes the profiler has mapped now. */
size_t _ak_prof_mapped(void);

/** A chunked array of fixed-size items; ids 0 .. n-1. Chunks never move. */
typedef struct _ak_prof_vec {
  char **chunks;   /* directory: cap >> shift (rounded up) pointers */
  uint32_t n;      /* items in use; n <= cap */
  uint32_t cap;    /* most items */
  uint32_t item;   /* bytes per item */
  uint32_t shift;  /* log2 of the items per chunk */
  uint32_t nchunk; /* chunks mapped; (n + per chunk - 1) >> shift <= nchunk */
} _ak_prof_vec;

/** Item `i` (< n) of `v`. */
static inline void *_ak_prof_vec_at(const _ak_prof_vec *v, uint32_t i) {
  return v->chunks[i >> v->shift] + (size_t)(i & ((1u << v->shift) - 1)) * v->item;
}

/** A new zeroed item of `v`, its id in *id; NULL when `v` is at its bound
 *  or no chunk can be mapped. */
void *_ak_prof_vec_push(_ak_prof_vec *v, uint32_t *id);

/** A distinct return address (minus 1); `next` chains a hash bucket. */
typedef struct _ak_prof_frame {
  uint32_t pc_lo, pc_hi; /* the address, split: 4-byte alignment, 12 bytes */
  uint32_t next;         /* next frame in the bucket; 0: none */
} _ak_prof_frame;

static inline uint64_t _ak_prof_frame_pc(const _ak_prof_frame *f) {
  return (uint64_t)f->pc_hi << 32 | f->pc_lo;
}

/** A call-tree node: frame id (20 bits) | parent node (22) | next node in
 *  its hash bucket (22; 0: none, the root is never chained). */
typedef uint64_t _ak_prof_node;
#define AK_PROF_FRAME_BITS 20
#define AK_PROF_NODE_BITS 22

static inline uint32_t _ak_prof_node_frame(_ak_prof_node n) {
  return (uint32_t)(n & ((1u << AK_PROF_FRAME_BITS) - 1));
}
static inline uint32_t _ak_prof_node_parent(_ak_prof_node n) {
  return (uint32_t)(n >> AK_PROF_FRAME_BITS) & ((1u << AK_PROF_NODE_BITS) - 1);
}
static inline uint32_t _ak_prof_node_next(_ak_prof_node n) {
  return (uint32_t)(n >> (AK_PROF_FRAME_BITS + AK_PROF_NODE_BITS));
}
static inline _ak_prof_node _ak_prof_node_make(uint32_t frame, uint32_t parent, uint32_t next) {
  return (uint64_t)frame | (uint64_t)parent << AK_PROF_FRAME_BITS |
         (uint64_t)next << (AK_PROF_FRAME_BITS + AK_PROF_NODE_BITS);
}

/** What was allocated at one (stack, label) pair, scaled: objects in
 *  1/65536ths (AK_PROF_OBJ_ONE), bytes rounded per sample. */
typedef struct _ak_prof_site {
  uint32_t key;  /* the stack's innermost node (0: none or dropped) | label << AK_PROF_NODE_BITS */
  uint32_t next; /* next site in the bucket; 0: none (site 0 is unused) */
  uint64_t alloc_obj, alloc_bytes;
} _ak_prof_site;

static inline uint32_t _ak_prof_site_node(const _ak_prof_site *s) {
  return s->key & ((1u << AK_PROF_NODE_BITS) - 1);
}
static inline uint32_t _ak_prof_site_label(const _ak_prof_site *s) { return s->key >> AK_PROF_NODE_BITS; }

#define AK_PROF_OBJ_ONE ((uint64_t)1 << 16)

/** A label: NUL-terminated key and value, cut to fit. */
typedef struct _ak_prof_label {
  char key[AK_PROF_LABEL_KEY];
  char value[AK_PROF_LABEL_VALUE];
} _ak_prof_label;

/** A sampled block in the live set. */
typedef struct _ak_prof_rec {
  uint64_t block; /* its address; 0 while on the free list */
  uint64_t size;  /* bytes recorded */
  uint64_t obj;   /* objects it stands for, in AK_PROF_OBJ_ONE units */
  uint32_t site;  /* its site */
  uint32_t next;  /* next record in the bucket or the free list; 0: none */
} _ak_prof_rec;

/** Entries a bucket of the heads may hold on average before they double:
 *  frames and call-tree nodes (looked up a frame at a time), sites and
 *  live records (one lookup a sample or a forget). */
#define AK_PROF_CHAIN_STACK 8
#define AK_PROF_CHAIN_SITE 4

/** The hash heads of one table: `a` holds `mask` + 1 buckets (entry ids,
 *  0: empty), one system page of them at first, doubled by
 *  _ak_prof_heads_fit up to `max_mask` + 1 as the table fills, so a
 *  profile with few stacks touches few pages. */
typedef struct _ak_prof_heads {
  uint32_t *a;
  uint32_t mask, max_mask;
} _ak_prof_heads;

/** The tables and counters, guarded by `mu` (the one instance is
 *  _ak_prof_g.t). Invariants (_ak_prof_check):
 *  - every frame is on the bucket of its pc; every node but the root has
 *    a parent below its id and a frame in use, and is on the bucket of
 *    (parent, frame); `stacks` counts the bits set in `stack_end`;
 *  - every site but 0 is on the bucket of its key, its node in use;
 *  - every record in use is on the bucket of its block and names a site
 *    in use; `live` counts them, the others are on the free list;
 *    `inuse_bytes` is the sum of their scaled bytes. */
typedef struct _ak_prof_tables {
  bool ready; /* the tables below are mapped */
  _ak_prof_vec frames;
  _ak_prof_heads frame_heads;
  _ak_prof_vec nodes;
  _ak_prof_heads node_heads;
  uint8_t *stack_end; /* a bit per node: some stack ends there */
  size_t stacks, max_stacks;
  _ak_prof_vec sites;
  _ak_prof_heads site_heads;
  _ak_prof_label *labels; /* AK_PROF_MAX_LABELS entries */
  uint32_t nlabels;       /* ids in use: 1 .. nlabels */
  _ak_prof_vec recs;
  _ak_prof_heads rec_heads;
  uint32_t rec_free; /* free list of records; 0: empty */
  size_t live;
  uint64_t inuse_bytes, alloc_bytes; /* scaled sums */
  size_t samples, dropped_stacks, dropped_live, dropped_labels, unknown_frees;
} _ak_prof_tables;

/** The bounds of the tables; a 0 field takes its default (below). */
typedef struct _ak_prof_limits {
  size_t stacks, nodes, frames, live;
} _ak_prof_limits;

/** Default bounds: distinct stacks, call-tree nodes, distinct frames,
 *  live records (nodes stay under 2^22 and frames under 2^20: the
 *  packing). */
#define AK_PROF_MAX_STACKS 16384
#define AK_PROF_MAX_NODES 262144
#define AK_PROF_MAX_FRAMES 65536
#define AK_PROF_MAX_LIVE 65536

/** Maps the tables with the given bounds (NULL: the defaults). 0, or -1
 *  with ENOMEM (nothing left mapped). */
int _ak_prof_tables_init(_ak_prof_tables *t, const _ak_prof_limits *limits);
/** Unmaps the tables and zeroes `t`. */
void _ak_prof_tables_fini(_ak_prof_tables *t);
/** Relinks every entry of one table onto `h`, whose buckets are empty. */
typedef void (*_ak_prof_relink_fn)(_ak_prof_tables *t, _ak_prof_heads *h);
/** Doubles `h` (as often as needed, up to its bound) once its table holds
 *  more than `per` entries a bucket (`entries`), rehashing them through
 *  `relink`; left as it is if the new array cannot be mapped (the chains
 *  then grow longer, nothing is lost). */
void _ak_prof_heads_fit(_ak_prof_tables *t, _ak_prof_heads *h, size_t entries, unsigned per,
                        _ak_prof_relink_fn relink);

/** The node of the stack `pcs[0..depth)` (innermost first), added to the
 *  call tree; 0 (the root) when it does not fit (the node or frame bound,
 *  or the stack bound for a stack not seen before), counted in
 *  dropped_stacks. */
uint32_t _ak_prof_stack_intern(_ak_prof_tables *t, const uintptr_t *pcs, unsigned depth);
/** The label id of (key, value); 0 for no label (both NULL, or the table
 *  is full: counted in dropped_labels). */
uint32_t _ak_prof_label_intern(_ak_prof_tables *t, const char *key, const char *value);
/** The site of (node, label), added if new; 0 when the site bound is hit
 *  (the caller then falls back to site 1, (0, 0), which always exists). */
uint32_t _ak_prof_site_intern(_ak_prof_tables *t, uint32_t node, uint32_t label);
/** Validates the frames, the call tree, the labels and the sites (aborts
 *  with the broken invariant). */
void _ak_prof_check_stacks(const _ak_prof_tables *t);

/* ---- live.c: the live set ---- */

/** Adds a sample of `size` bytes standing for `obj` objects (AK_PROF_OBJ_ONE
 *  units) at `site` to the counters and, when there is room, `block` to the
 *  live set. A block already there is replaced (its old record counted as
 *  freed). True when the block is in the live set. */
bool _ak_prof_live_add(_ak_prof_tables *t, uintptr_t block, uint64_t size, uint64_t obj, uint32_t site);
/** Removes `block` from the live set: true if it was there. */
bool _ak_prof_live_remove(_ak_prof_tables *t, uintptr_t block);
/** Bytes a sample stands for: obj * size / AK_PROF_OBJ_ONE, rounded down. */
uint64_t _ak_prof_scaled_bytes(uint64_t obj, uint64_t size);
/** Adds each live record's scaled objects and bytes to its site's entries
 *  of obj[] and bytes[] (indexed by site id, below `nsites`). */
void _ak_prof_live_sum(const _ak_prof_tables *t, uint64_t *obj, uint64_t *bytes, uint32_t nsites);
/** Validates the live set (aborts when broken). */
void _ak_prof_check_live(const _ak_prof_tables *t);

/* ---- sample.c: countdowns, weights ---- */

/** Objects a sample of `size` bytes stands for at mean period `period`:
 *  1 / (1 - exp(-size / period)), in AK_PROF_OBJ_ONE units. */
uint64_t _ak_prof_weight(uint64_t size, uint64_t period);
/** A countdown drawn for the calling thread: exponential, mean `period`. */
int64_t _ak_prof_draw(uint64_t period);
/** Seeds the calling thread's generator (tests: a fixed sequence). */
void _ak_prof_seed(uint64_t seed);
/** ln(x) and exp(x) without libm (the library links libc only). */
double _ak_prof_ln(double x);
double _ak_prof_exp(double x);

/* ---- stack.c: stack capture ---- */

/** Captures the calling thread's stack with `method` (AK_PROF_STACK_*):
 *  return addresses minus 1, innermost first, starting at the frame whose
 *  return address is `from` (0: the caller of this function), leaving
 *  out leading frames in the library's own shared object; at most `max`.
 *  No lock, no allocation. Returns the frames stored. */
unsigned _ak_prof_capture(uintptr_t *pcs, unsigned max, int method, uintptr_t from);
/** On a function that reads other frames' stack slots (the walks): the
 *  sanitizers would report those reads, which are what a walk is for. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define AK_PROF_READS_STACK __attribute__((no_sanitize("address", "thread", "undefined")))
#else
#define AK_PROF_READS_STACK
#endif
/** Capture methods beside the public ones, for tests and measurements:
 *  the unwinder's two halves alone - libgcc's _Unwind_Backtrace, and the
 *  fast walk (no frames where it gives up). */
enum { AK_PROF_STACK_LIBGCC = 2, AK_PROF_STACK_CFI = 3 };
/** The unwinder's fast walk (cfi.c): from the frame whose return address
 *  is `ra` (its rule is that of ra - 1) with stack pointer `sp` and rbp
 *  `bp`, stores up to `max` return addresses, reading only [lo, hi).
 *  Returns the count, or -1 where the walk does not model a frame (the
 *  caller then unwinds with libgcc). No lock, no allocation. */
int _ak_prof_cfi_walk(uintptr_t ra, uintptr_t sp, uintptr_t bp, uintptr_t lo, uintptr_t hi, uintptr_t *buf,
                      unsigned max);
/** Bytes of the fast walk's rule cache (static data) once it holds a rule;
 *  0 before. */
size_t _ak_prof_cfi_memory(void);
/** Loads the unwinder when `method` needs it and finds the library's own
 *  text; may allocate (dlopen): call outside malloc. Returns the method
 *  that will be used (AK_PROF_STACK_FP when the unwinder is missing). */
int _ak_prof_stack_setup(int method);

/* ---- maps.c: the process's mappings ---- */

/** A line of /proc/self/maps. */
typedef struct _ak_prof_map_line {
  uintptr_t start, end;
  uint64_t offset;
  bool exec;        /* 'x' in the permissions */
  const char *path; /* "" for anonymous; valid during the callback only */
} _ak_prof_map_line;

/** Calls `fn` for each line of /proc/self/maps until it returns false.
 *  Reads with read(2) into a stack buffer: no allocation, no lock. A line
 *  too long for the buffer is passed over. 0, or -1 with errno. */
int _ak_prof_maps_each(bool (*fn)(void *ctx, const _ak_prof_map_line *m), void *ctx);
/** The mapping that contains `addr`: its bounds and (is_main not NULL)
 *  whether it is the main program's. False if none. */
bool _ak_prof_maps_find(uintptr_t addr, uintptr_t *start, uintptr_t *end, bool *is_main);
/** The GNU build id of the ELF file at `path`, in hex, into `hex` (cap
 *  bytes, at least 41 for SHA-1 ids). False if it has none or cannot be
 *  read. */
bool _ak_prof_build_id(const char *path, char *hex, size_t cap);
/** The path of the main program (readlink /proc/self/exe) into `buf`. */
bool _ak_prof_exe_path(char *buf, size_t cap);

/* ---- dump.c: the pprof file ---- */

/** Writes the profile to `path` (already expanded). Takes dump_mu and mu.
 *  0, or -1 with errno and the message (naming `call`). */
int _ak_prof_write(const char *call, const char *path);

/* ---- prof.c: the state, options, control ---- */

typedef struct _ak_prof_global {
  pthread_mutex_t ctl_mu, dump_mu, mu;
  _ak_prof_tables t;                /* under mu */
  uint64_t period;                  /* mean bytes between samples (atomic) */
  int stack_method;                 /* AK_PROF_STACK_* in use (atomic) */
  uint64_t interval;                /* interval dump growth; 0: none (atomic) */
  uint64_t next_dump;               /* in-use bytes that trigger the next interval dump (atomic) */
  uint32_t dump_seq;                /* interval dumps begun (atomic; their numbers) */
  size_t dumps, dump_errors;        /* atomic */
  bool ever_started;                /* the exit dump is due (ctl_mu) */
  char dump_path[AK_PROF_PATH_MAX]; /* "": none (ctl_mu) */
  _ak_prof_limits limits;           /* bounds for the next tables_init (ctl_mu) */
} _ak_prof_global;

extern _ak_prof_global _ak_prof_g;

/** Expands "%p" in `pattern` into `out`. False when it does not fit. */
bool _ak_prof_expand_path(const char *pattern, char *out, size_t cap);
/** Called after a sample raised the in-use total to `inuse`: writes the
 *  interval dump when one is due. No lock held. */
void _ak_prof_interval_check(uint64_t inuse);

/* ---- tests only (prof.c, live.c) ---- */

/** Stops the profiler and drops every table, counter and option set by
 *  the API; the next start maps the tables with the given bounds (NULL:
 *  the defaults). Only while no other thread uses the profiler. */
void _ak_prof_reset(const _ak_prof_limits *limits);
/** _ak_prof_record with a given stack (innermost first). */
bool _ak_prof_record_stack(void *block, size_t size, const uintptr_t *pcs, unsigned depth,
                           const char *label_key, const char *label_value);
/** Runs the validators of every table under the lock (any build). */
void _ak_prof_check(void);

#ifdef __cplusplus
}
#endif

#endif /* AK_PROF_INTERNAL_H */
