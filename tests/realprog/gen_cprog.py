#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a deterministic multi-file C program for tests/realprog/run.sh.

Usage: gen_cprog.py OUTDIR [MODULES]   (default 50 modules, fixed seed)

Every module mNN.c holds generated arithmetic functions (random expression
trees over uint32_t, so no undefined behaviour), a struct sort, a
heap-allocated linked list and a growing realloc buffer; main.c calls every
module and prints one checksum line per module.  The output depends only on
the program text, so it is identical with any correct malloc.
"""
import os
import random
import sys


def expr(rng, names, depth):
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.3:
            return "%uu" % rng.randrange(1, 1 << 32)
        return rng.choice(names)
    a = expr(rng, names, depth - 1)
    b = expr(rng, names, depth - 1)
    op = rng.choice(["+", "-", "*", "^", "&", "|", "<<", ">>", "/", "%", "rot", "?"])
    if op in ("<<", ">>"):
        return "(%s %s %d)" % (a, op, rng.randrange(1, 31))
    if op in ("/", "%"):
        return "(%s %s (%s | 1u))" % (a, op, b)
    if op == "rot":
        return "rotl32(%s, %d)" % (a, rng.randrange(1, 31))
    if op == "?":
        if a == b:
            return a
        return "((%s > %s) ? %s : %s)" % (a, b, b, a)
    return "(%s %s %s)" % (a, op, b)


def module(rng, idx, nmods):
    out = ['#define _POSIX_C_SOURCE 200809L', '#include "prog.h"', "#include <stdlib.h>", "#include <string.h>", "#include <stdio.h>", ""]
    nfun = rng.randrange(8, 16)
    tbl = [rng.randrange(0, 1 << 32) for _ in range(rng.randrange(16, 64))]
    out.append("static const uint32_t tbl[%d] = {%s};" % (len(tbl), ", ".join("%uu" % t for t in tbl)))
    out.append("struct rec { uint32_t key; uint16_t tag; char name[24]; };")
    out.append("struct node { struct node *next; uint32_t v; char *text; };")
    for f in range(nfun):
        names = ["x", "y", "acc", "tbl[(x ^ i) %% %du]" % len(tbl)]
        body = expr(rng, names, rng.randrange(3, 6))
        step = expr(rng, ["x", "y", "acc"], 2)
        iters = rng.randrange(50, 400)
        case_exprs = [expr(rng, ["x", "acc"], 2) for _ in range(6)]
        out.append("static uint32_t f%d(uint32_t x, uint32_t y) {" % f)
        out.append("  uint32_t acc = %uu;" % rng.randrange(0, 1 << 32))
        out.append("  for (uint32_t i = 0; i < %du; i++) {" % iters)
        out.append("    acc += %s;" % body)
        out.append("    switch ((acc >> 3) % 6u) {")
        for c, e in enumerate(case_exprs):
            out.append("    case %d: x = %s; break;" % (c, e))
        out.append("    default: break;")
        out.append("    }")
        out.append("    y = %s;" % step)
        out.append("  }")
        out.append("  return acc ^ x ^ y;")
        out.append("}")
    out.append("static int cmp_rec(const void *pa, const void *pb) {")
    out.append("  const struct rec *a = pa, *b = pb;")
    out.append("  if (a->key != b->key) return a->key < b->key ? -1 : 1;")
    out.append("  return strcmp(a->name, b->name);")
    out.append("}")
    out.append("uint32_t m%02d_helper(uint32_t v) { return rotl32(v * %uu, %d) ^ tbl[v %% %du]; }"
               % (idx, rng.randrange(1, 1 << 32) | 1, rng.randrange(1, 31), len(tbl)))
    out.append("uint32_t m%02d_run(uint32_t seed) {" % idx)
    out.append("  uint32_t h = seed ^ %uu;" % rng.randrange(0, 1 << 32))
    for f in range(nfun):
        out.append("  h = f%d(h, %uu) + (h << 1);" % (f, rng.randrange(0, 1 << 32)))
    if idx > 0:
        out.append("  h ^= m%02d_helper(h);" % (idx - 1))
    nrec = rng.randrange(100, 3000)
    out.append("  size_t n = %d;" % nrec)
    out.append("  struct rec *r = malloc(n * sizeof *r);")
    out.append("  if (!r) abort();")
    out.append("  for (size_t i = 0; i < n; i++) {")
    out.append("    h = h * 1664525u + 1013904223u;")
    out.append("    r[i].key = h %% %du; r[i].tag = (uint16_t)(h >> 16);" % rng.randrange(10, 5000))
    out.append('    snprintf(r[i].name, sizeof r[i].name, "n%%08x-%%u", h ^ %uu, (unsigned)i);' % rng.randrange(0, 1 << 32))
    out.append("  }")
    out.append("  qsort(r, n, sizeof *r, cmp_rec);")
    out.append("  struct node *head = NULL;")
    out.append("  for (size_t i = 0; i < n; i++) {")
    out.append("    h = mix32(h ^ r[i].key ^ r[i].tag);")
    out.append("    h ^= (uint32_t)strlen(r[i].name) << (i % 7);")
    out.append("    if ((r[i].key & 3u) == 0) {")
    out.append("      struct node *nd = malloc(sizeof *nd);")
    out.append("      if (!nd) abort();")
    out.append("      nd->v = h; nd->next = head; nd->text = strdup(r[i].name); head = nd;")
    out.append("    }")
    out.append("  }")
    out.append("  size_t cap = 16, len = 0;")
    out.append("  char *buf = malloc(cap);")
    out.append("  if (!buf) abort();")
    out.append("  while (head) {")
    out.append("    struct node *nd = head; head = nd->next;")
    out.append("    size_t tl = strlen(nd->text);")
    out.append("    while (len + tl + 1 > cap) { cap = cap * 3 / 2 + 1; buf = realloc(buf, cap); if (!buf) abort(); }")
    out.append("    memcpy(buf + len, nd->text, tl + 1); len += tl;")
    out.append("    h = mix32(h + nd->v);")
    out.append("    free(nd->text); free(nd);")
    out.append("  }")
    out.append("  for (size_t i = 0; i < len; i++) h = h * 31u + (unsigned char)buf[i];")
    out.append("  free(buf); free(r);")
    out.append("  return h;")
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    outdir = sys.argv[1]
    nmods = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    rng = random.Random(20240601)
    os.makedirs(outdir, exist_ok=True)
    hdr = ["#ifndef PROG_H", "#define PROG_H", "#include <stdint.h>",
           "static inline uint32_t rotl32(uint32_t v, int s) { return (v << s) | (v >> (32 - s)); }",
           "static inline uint32_t mix32(uint32_t v) { v ^= v >> 16; v *= 0x7feb352du; v ^= v >> 15;"
           " v *= 0x846ca68bu; v ^= v >> 16; return v; }"]
    for i in range(nmods):
        hdr.append("uint32_t m%02d_run(uint32_t seed);" % i)
        hdr.append("uint32_t m%02d_helper(uint32_t v);" % i)
    hdr.append("#endif")
    with open(os.path.join(outdir, "prog.h"), "w") as f:
        f.write("\n".join(hdr) + "\n")
    for i in range(nmods):
        with open(os.path.join(outdir, "m%02d.c" % i), "w") as f:
            f.write(module(rng, i, nmods))
    m = ['#include "prog.h"', "#include <stdio.h>", "int main(void) {", "  uint32_t total = 0;"]
    for i in range(nmods):
        m.append('  { uint32_t v = m%02d_run(%du); total = mix32(total ^ v); printf("m%02d %%08x\\n", v); }'
                 % (i, i * 7919 + 1, i))
    m.append('  printf("total %08x\\n", total);')
    m.append("  return 0;")
    m.append("}")
    with open(os.path.join(outdir, "main.c"), "w") as f:
        f.write("\n".join(m) + "\n")


if __name__ == "__main__":
    main()
