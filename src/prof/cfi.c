/* SPDX-License-Identifier: MIT */
/* cfi.c - the unwinder's fast walk (x86-64, glibc 2.35 and later): the
 * call frame information of .eh_frame read directly, one rule per return
 * address, kept in a process-wide cache.
 *
 * libgcc's _Unwind_Backtrace decodes the CIE and runs the FDE's CFA
 * program again for every frame of every sample. Here the rule a return
 * address needs - where the canonical frame address (CFA) is (rsp or rbp
 * plus an offset), where the return address and the caller's rbp were
 * saved - is computed once per address and cached, so a sample's walk
 * costs a cache probe and two loads per frame.
 *
 * A frame is found with _dl_find_object (no lock, no allocation), its FDE
 * by binary search in the object's .eh_frame_hdr table, and the CFA
 * program is run up to the return address minus 1 (inside the call).
 * What the walk does not model gives up (the caller then uses libgcc's
 * unwinder for the whole stack): a CFA that is not rsp or rbp plus an
 * offset (DW_CFA_def_cfa_expression: signal frames, realigned stacks), a
 * return address or rbp saved other than at an offset from the CFA, an
 * object without .eh_frame_hdr (gcc links static executables without
 * one) or with an encoding of it other than the linkers', an address with
 * no FDE, a CFA or a saved slot outside the thread's stack mapping, a CFA
 * not above the last. A return address whose rule is "undefined" ends the
 * stack (_start, clone: glibc marks them so), as it ends libgcc's walk.
 *
 * Cache: open addressing on the return address, at most 8 probes, no
 * eviction; a slot is claimed with a CAS, its rule written, then its
 * address stored with release, so a reader that sees the address sees
 * the rule. An object unloaded and another loaded at the same addresses
 * would find the first one's rules: the walk's bounds checks keep that
 * from faulting, and its stacks may be wrong. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "prof/prof_internal.h"

#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define AK_CFI_WALK 1
/* Weak: a program linked against an older glibc at run time falls back. */
#pragma weak _dl_find_object
#endif

#ifdef AK_CFI_WALK

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };
enum { SAVED_SAME = 0, SAVED_AT = 1, SAVED_UNDEF = 2, SAVED_OTHER = 3 };

/* The rule of one return address: CFA = (rsp or rbp) + cfa_off; the
 * return address and rbp SAVED_AT cfa + their offsets. */
typedef struct cfi_rule {
  int32_t cfa_off;
  int16_t ra_off, bp_off;
  uint8_t cfa_reg, ra_kind, bp_kind;
  uint8_t usable; /* 0: the walk gives up at this address */
} cfi_rule;

/* The CFA program's state while it runs. */
typedef struct cfi_state {
  int64_t cfa_off, ra_off, bp_off;
  unsigned cfa_reg;
  uint8_t ra_kind, bp_kind;
  bool bad; /* an operation the walk does not model */
} cfi_state;

/* ---- the cache ---------------------------------------------------------------- */

enum { CACHE_SLOTS = 4096, CACHE_PROBES = 8 };
#define SLOT_CLAIMED ((uintptr_t)1) /* being written: readers pass it by */

typedef struct cache_slot {
  _Atomic uintptr_t pc; /* 0: free; SLOT_CLAIMED; else the address of `rule` */
  cfi_rule rule;
} cache_slot;

static cache_slot cache[CACHE_SLOTS];
static atomic_bool cache_used; /* a rule was put: its pages count in ak_prof_stats.memory */

static unsigned slot_of(uintptr_t pc) {
  return (unsigned)((pc * 0x9E3779B97F4A7C15ull) >> 52) & (CACHE_SLOTS - 1);
}

static bool cache_get(uintptr_t pc, cfi_rule *out) {
  unsigned i = slot_of(pc);
  for (unsigned k = 0; k < CACHE_PROBES; k++, i = (i + 1) & (CACHE_SLOTS - 1)) {
    uintptr_t at = atomic_load_explicit(&cache[i].pc, memory_order_acquire);
    if (at == pc) {
      *out = cache[i].rule;
      return true;
    }
    if (at == 0) return false;
  }
  return false;
}

static void cache_put(uintptr_t pc, const cfi_rule *r) {
  unsigned i = slot_of(pc);
  for (unsigned k = 0; k < CACHE_PROBES; k++, i = (i + 1) & (CACHE_SLOTS - 1)) {
    uintptr_t want = 0;
    if (atomic_compare_exchange_strong_explicit(&cache[i].pc, &want, SLOT_CLAIMED, memory_order_relaxed,
                                                memory_order_relaxed)) {
      cache[i].rule = *r;
      atomic_store_explicit(&cache[i].pc, pc, memory_order_release);
      if (!atomic_load_explicit(&cache_used, memory_order_relaxed))
        atomic_store_explicit(&cache_used, true, memory_order_relaxed);
      return;
    }
    if (want == pc) return; /* another thread put it */
  }
}

/* ---- DWARF encodings ------------------------------------------------------------ */

typedef struct cursor {
  const uint8_t *p, *end;
  bool bad;
} cursor;

static uint64_t uleb(cursor *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; c->p < c->end && shift < 64; shift += 7) {
    uint8_t b = *c->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  c->bad = true;
  return 0;
}

static int64_t sleb(cursor *c) {
  int64_t v = 0;
  unsigned shift = 0;
  while (c->p < c->end && shift < 64) {
    uint8_t b = *c->p++;
    v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
    shift += 7;
    if (!(b & 0x80)) {
      if (shift < 64 && (b & 0x40)) v |= (int64_t)(~(uint64_t)0 << shift);
      return v;
    }
  }
  c->bad = true;
  return 0;
}

static uint64_t fixed(cursor *c, unsigned size) {
  if ((size_t)(c->end - c->p) < size) {
    c->bad = true;
    return 0;
  }
  uint64_t v = 0;
  memcpy(&v, c->p, size); /* little-endian */
  c->p += size;
  return v;
}

enum {
  PE_ABSPTR = 0x00,
  PE_ULEB = 0x01,
  PE_UDATA2 = 0x02,
  PE_UDATA4 = 0x03,
  PE_UDATA8 = 0x04,
  PE_SLEB = 0x09,
  PE_SDATA2 = 0x0a,
  PE_SDATA4 = 0x0b,
  PE_SDATA8 = 0x0c,
  PE_PCREL = 0x10,
  PE_DATAREL = 0x30,
  PE_INDIRECT = 0x80,
  PE_OMIT = 0xff
};

/* Reads a pointer in encoding `enc`; `data` is the base of DW_EH_PE_datarel. */
static uintptr_t encoded(cursor *c, uint8_t enc, uintptr_t data) {
  if (enc == PE_OMIT || (enc & PE_INDIRECT)) {
    c->bad = true;
    return 0;
  }
  uintptr_t at = (uintptr_t)c->p;
  uint64_t v;
  switch (enc & 0x0f) {
    case PE_ABSPTR: v = fixed(c, 8); break;
    case PE_ULEB: v = uleb(c); break;
    case PE_UDATA2: v = fixed(c, 2); break;
    case PE_UDATA4: v = fixed(c, 4); break;
    case PE_UDATA8: v = fixed(c, 8); break;
    case PE_SLEB: v = (uint64_t)sleb(c); break;
    case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
    case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
    case PE_SDATA8: v = fixed(c, 8); break;
    default: c->bad = true; return 0;
  }
  switch (enc & 0x70) {
    case 0: return (uintptr_t)v;
    case PE_PCREL: return at + (uintptr_t)v;
    case PE_DATAREL: return data + (uintptr_t)v;
    default: c->bad = true; return 0;
  }
}

/* ---- the CIE, the FDE and the CFA program --------------------------------------- */

typedef struct cie {
  const uint8_t *insns, *end; /* initial instructions */
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_enc;
  bool has_z;
} cie;

static bool parse_cie(const uint8_t *at, cie *out) {
  uint32_t len;
  memcpy(&len, at, 4);
  if (len == 0 || len == 0xffffffffu) return false;
  cursor c = {at + 4, at + 4 + len, false};
  if (fixed(&c, 4) != 0) return false; /* CIE id */
  uint8_t version = (uint8_t)fixed(&c, 1);
  if (version != 1 && version != 3) return false;
  const char *aug = (const char *)c.p;
  size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
  if (aug_len == (size_t)(c.end - c.p)) return false;
  c.p += aug_len + 1;
  out->code_align = uleb(&c);
  out->data_align = sleb(&c);
  if (version == 1)
    (void)fixed(&c, 1);
  else
    (void)uleb(&c); /* return address register */
  out->fde_enc = PE_ABSPTR;
  out->has_z = aug[0] == 'z';
  if (out->has_z) {
    uint64_t n = uleb(&c);
    const uint8_t *data_end = c.p + n;
    for (const char *a = aug + 1; *a && !c.bad; a++) {
      if (*a == 'R') {
        out->fde_enc = (uint8_t)fixed(&c, 1);
      } else if (*a == 'P') {
        uint8_t enc = (uint8_t)fixed(&c, 1);
        (void)encoded(&c, (uint8_t)(enc & ~PE_INDIRECT), 0); /* the personality: not followed */
      } else if (*a == 'L') {
        (void)fixed(&c, 1);
      } else if (*a != 'S' && *a != 'B') {
        break; /* unknown: the augmentation length skips the rest */
      }
    }
    c.p = data_end;
  } else if (aug[0] != '\0') {
    return false;
  }
  if (c.bad || c.p > c.end) return false;
  out->insns = c.p;
  out->end = c.end;
  return true;
}

static void set_saved(cfi_state *s, uint64_t reg, uint8_t kind, int64_t off) {
  if (reg == REG_RA) {
    s->ra_kind = kind;
    s->ra_off = off;
  } else if (reg == REG_RBP) {
    s->bp_kind = kind;
    s->bp_off = off;
  } else if (reg == REG_RSP && kind != SAVED_SAME) {
    s->bad = true; /* rsp restored from somewhere: not modelled */
  }
}

/* Depth of the DW_CFA_remember_state stack a CFA program may use. */
enum { CFI_DEPTH = 8 };

/* The remembered states of one CFA program run: saved[0 .. depth). */
typedef struct cfi_stack {
  cfi_state saved[CFI_DEPTH];
  unsigned depth;
} cfi_stack;

/* Restores register `reg` to its state after the CIE's program `init`
 * (DW_CFA_restore, DW_CFA_restore_extended): only the two registers the
 * unwinder follows. */
static void restore_reg(cfi_state *s, uint64_t reg, const cfi_state *init) {
  if (reg == REG_RA) set_saved(s, reg, init->ra_kind, init->ra_off);
  if (reg == REG_RBP) set_saved(s, reg, init->bp_kind, init->bp_off);
}

/* Applies one CFA instruction whose two high bits are 0 (the extended
 * opcodes) to `s`, reading its operands from `c`; returns the location
 * advance it encodes (DW_CFA_advance_loc1/2/4), 0 for every other. An
 * instruction the unwinder does not model marks `s` bad. */
static uintptr_t run_extended(uint8_t op, cursor *c, const cie *ci, cfi_state *s, const cfi_state *init,
                              cfi_stack *st) {
  uint64_t reg;
  switch (op) {
    case 0x00: return 0;                                       /* nop */
    case 0x01: s->bad = true; return 0;                        /* set_loc: linkers do not emit it */
    case 0x02: return (uintptr_t)fixed(c, 1) * ci->code_align; /* advance_loc1 */
    case 0x03: return (uintptr_t)fixed(c, 2) * ci->code_align; /* advance_loc2 */
    case 0x04: return (uintptr_t)fixed(c, 4) * ci->code_align; /* advance_loc4 */
    case 0x05:                                                 /* offset_extended */
      reg = uleb(c);
      set_saved(s, reg, SAVED_AT, (int64_t)uleb(c) * ci->data_align);
      return 0;
    case 0x06: restore_reg(s, uleb(c), init); return 0;         /* restore_extended */
    case 0x07: set_saved(s, uleb(c), SAVED_UNDEF, 0); return 0; /* undefined */
    case 0x08: set_saved(s, uleb(c), SAVED_SAME, 0); return 0;  /* same_value */
    case 0x09:                                                  /* register: a saved register in another */
      reg = uleb(c);
      (void)uleb(c);
      set_saved(s, reg, SAVED_OTHER, 0);
      return 0;
    case 0x0a: /* remember_state */
      if (st->depth == CFI_DEPTH)
        s->bad = true;
      else
        st->saved[st->depth++] = *s;
      return 0;
    case 0x0b: /* restore_state: the CFA too, as GCC's unwinder does */
      if (st->depth == 0)
        s->bad = true;
      else
        *s = st->saved[--st->depth];
      return 0;
    case 0x0c: /* def_cfa */
      s->cfa_reg = (unsigned)uleb(c);
      s->cfa_off = (int64_t)uleb(c);
      return 0;
    case 0x0d: s->cfa_reg = (unsigned)uleb(c); return 0; /* def_cfa_register */
    case 0x0e: s->cfa_off = (int64_t)uleb(c); return 0;  /* def_cfa_offset */
    case 0x0f: s->bad = true; return 0;                  /* def_cfa_expression */
    case 0x10:                                           /* expression */
    case 0x16: {                                         /* val_expression */
      reg = uleb(c);
      uint64_t n = uleb(c);
      if (n > (uint64_t)(c->end - c->p))
        c->bad = true;
      else
        c->p += n;
      set_saved(s, reg, SAVED_OTHER, 0);
      return 0;
    }
    case 0x11: /* offset_extended_sf */
      reg = uleb(c);
      set_saved(s, reg, SAVED_AT, sleb(c) * ci->data_align);
      return 0;
    case 0x12: /* def_cfa_sf */
      s->cfa_reg = (unsigned)uleb(c);
      s->cfa_off = sleb(c) * ci->data_align;
      return 0;
    case 0x13: s->cfa_off = sleb(c) * ci->data_align; return 0; /* def_cfa_offset_sf */
    case 0x14:                                                  /* val_offset */
    case 0x15:                                                  /* val_offset_sf */
      reg = uleb(c);
      if (op == 0x14)
        (void)uleb(c);
      else
        (void)sleb(c);
      set_saved(s, reg, SAVED_OTHER, 0);
      return 0;
    case 0x2e: (void)uleb(c); return 0; /* GNU_args_size */
    case 0x2f:                          /* GNU_negative_offset_extended */
      reg = uleb(c);
      set_saved(s, reg, SAVED_AT, -(int64_t)uleb(c) * ci->data_align);
      return 0;
    default: s->bad = true; return 0;
  }
}

/* Runs the CFA program [p, end) from location `loc` up to and including
 * `target`. `init` is the state after the CIE's program (DW_CFA_restore).
 * Invariant at the top of each step: loc <= target (an advance past it
 * ends the run), so only the advancing instructions need the test. */
static void run_program(const uint8_t *p, const uint8_t *end, uintptr_t loc, uintptr_t target, const cie *ci,
                        cfi_state *s, const cfi_state *init) {
  cfi_stack st = {.depth = 0};
  cursor c = {p, end, false};
  while (c.p < c.end && !c.bad && !s->bad) {
    uint8_t op = *c.p++;
    uintptr_t delta = 0;
    switch (op >> 6) {
      case 1: delta = (uintptr_t)(op & 0x3f) * ci->code_align; break;                       /* advance_loc */
      case 2: set_saved(s, op & 0x3f, SAVED_AT, (int64_t)uleb(&c) * ci->data_align); break; /* offset */
      case 3: restore_reg(s, op & 0x3f, init); break;                                       /* restore */
      default: delta = run_extended(op, &c, ci, s, init, &st); break;
    }
    loc += delta;
    if (loc > target) return;
  }
  if (c.bad) s->bad = true;
}

/* Finds the FDE of `pc` through the object's .eh_frame_hdr. */
static const uint8_t *find_fde(uintptr_t pc, const uint8_t *hdr) {
  if (hdr[0] != 1) return NULL;
  uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  cursor c = {hdr + 4, hdr + 4 + 16, false};
  (void)encoded(&c, ptr_enc, (uintptr_t)hdr);
  uint64_t count = encoded(&c, count_enc, (uintptr_t)hdr);
  if (c.bad || table_enc != (PE_DATAREL | PE_SDATA4) || count == 0) return NULL;
  const int32_t *table = (const int32_t *)(const void *)c.p; /* pairs (start, fde), relative to hdr */
  uint64_t lo = 0, hi = count;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)hdr + (uintptr_t)(intptr_t)table[2 * mid] <= pc)
      lo = mid;
    else
      hi = mid;
  }
  if ((uintptr_t)hdr + (uintptr_t)(intptr_t)table[2 * lo] > pc) return NULL;
  return hdr + table[2 * lo + 1];
}

/* Computes the rule of return address `ra` (the walk looks at ra - 1). */
static void compute_rule(uintptr_t ra, cfi_rule *r) {
  memset(r, 0, sizeof *r);
  struct dl_find_object obj;
  if (_dl_find_object((void *)(ra - 1), &obj) != 0 || !obj.dlfo_eh_frame) return;
  const uint8_t *fde = find_fde(ra - 1, (const uint8_t *)obj.dlfo_eh_frame);
  if (!fde) return;
  uint32_t len, cie_ptr;
  memcpy(&len, fde, 4);
  if (len == 0 || len == 0xffffffffu) return;
  memcpy(&cie_ptr, fde + 4, 4);
  if (cie_ptr == 0) return; /* a CIE, not an FDE */
  cie ci;
  if (!parse_cie(fde + 4 - cie_ptr, &ci)) return;
  cursor c = {fde + 8, fde + 4 + len, false};
  uintptr_t start = encoded(&c, ci.fde_enc, 0);
  uintptr_t range = encoded(&c, (uint8_t)(ci.fde_enc & 0x0f), 0);
  if (ci.has_z) {
    uint64_t n = uleb(&c);
    c.p += n;
  }
  if (c.bad || c.p > c.end || ra - 1 < start || ra - 1 >= start + range) return;
  cfi_state s = {0, 0, 0, REG_RSP, SAVED_SAME, SAVED_SAME, false};
  run_program(ci.insns, ci.end, start, UINTPTR_MAX, &ci, &s, &s);
  cfi_state init = s;
  run_program(c.p, c.end, start, ra - 1, &ci, &s, &init);
  if (s.bad || (s.cfa_reg != REG_RSP && s.cfa_reg != REG_RBP)) return;
  if (s.ra_kind == SAVED_UNDEF) {
    r->ra_kind = SAVED_UNDEF; /* the end of the stack */
    r->usable = 1;
    return;
  }
  if (s.ra_kind != SAVED_AT || (s.bp_kind != SAVED_AT && s.bp_kind != SAVED_SAME)) return;
  if (s.cfa_off <= 0 || s.cfa_off > INT32_MAX || s.ra_off < INT16_MIN || s.ra_off > INT16_MAX ||
      s.bp_off < INT16_MIN || s.bp_off > INT16_MAX)
    return;
  r->cfa_off = (int32_t)s.cfa_off;
  r->ra_off = (int16_t)s.ra_off;
  r->bp_off = (int16_t)s.bp_off;
  r->cfa_reg = (uint8_t)s.cfa_reg;
  r->ra_kind = SAVED_AT;
  r->bp_kind = s.bp_kind;
  r->usable = 1;
}

static void rule_for(uintptr_t ra, cfi_rule *r) {
  if (cache_get(ra, r)) return;
  compute_rule(ra, r);
  cache_put(ra, r);
}

/* Reads a saved slot of the stack; false outside [lo, hi). */
AK_PROF_READS_STACK static bool stack_load(uintptr_t at, uintptr_t lo, uintptr_t hi, uintptr_t *out) {
  if (at < lo || at > hi - sizeof(uintptr_t) || (at & (sizeof(uintptr_t) - 1)) != 0) return false;
  *out = *(const uintptr_t *)at;
  return true;
}

int _ak_prof_cfi_walk(uintptr_t ra, uintptr_t sp, uintptr_t bp, uintptr_t lo, uintptr_t hi, uintptr_t *buf,
                      unsigned max) {
  if (!_dl_find_object) return -1;
  unsigned n = 0;
  while (n < max) {
    cfi_rule r;
    rule_for(ra, &r);
    if (!r.usable) return -1;
    if (r.ra_kind == SAVED_UNDEF) break; /* the outermost frame */
    uintptr_t cfa = (r.cfa_reg == REG_RSP ? sp : bp) + (uintptr_t)(intptr_t)r.cfa_off;
    if (cfa <= sp || cfa > hi) return -1;
    uintptr_t next;
    if (!stack_load(cfa + (uintptr_t)(intptr_t)r.ra_off, lo, hi, &next)) return -1;
    if (r.bp_kind == SAVED_AT && !stack_load(cfa + (uintptr_t)(intptr_t)r.bp_off, lo, hi, &bp)) return -1;
    sp = cfa;
    if (next == 0) break;
    buf[n++] = next;
    ra = next;
  }
  return (int)n;
}

size_t _ak_prof_cfi_memory(void) {
  return atomic_load_explicit(&cache_used, memory_order_relaxed) ? sizeof cache : 0;
}

#else

size_t _ak_prof_cfi_memory(void) { return 0; }

int _ak_prof_cfi_walk(uintptr_t ra, uintptr_t sp, uintptr_t bp, uintptr_t lo, uintptr_t hi, uintptr_t *buf,
                      unsigned max) {
  (void)ra, (void)sp, (void)bp, (void)lo, (void)hi, (void)buf, (void)max;
  return -1;
}

#endif
