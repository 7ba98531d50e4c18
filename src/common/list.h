/* SPDX-License-Identifier: MIT */
/* list.h - the library's one intrusive doubly-linked list (internal).
 *
 * A structure that sits on a list embeds an _ak_dnode; the list itself is
 * an _ak_dlist (head, tail, length). _AK_DLIST_ENTRY turns a node back into
 * the structure that embeds it. No function allocates or locks: the caller
 * owns the list and serialises access to it.
 *
 * Invariants (checked by AK_ASSERT in the checked build): a node is on at
 * most one list; a node off every list has prev == next == NULL; head has
 * no prev, tail has no next; n counts the nodes. */
#ifndef AK_LIST_H
#define AK_LIST_H

#include <stddef.h>

#include "common/assert.h"

typedef struct _ak_dnode {
  struct _ak_dnode *prev, *next;
} _ak_dnode;

typedef struct _ak_dlist {
  _ak_dnode *head, *tail;
  size_t n;
} _ak_dlist;

/** The structure of type `type` whose member `member` is node `node`
 *  (NULL stays NULL). */
#define _AK_DLIST_ENTRY(node, type, member) \
  ((node) ? (type *)(void *)((char *)(node)-offsetof(type, member)) : (type *)NULL)

/** True if `x` is on a list (the list's only member has neither link, so
 *  a caller that needs the exact answer also compares with the head). */
static inline int _ak_dnode_linked(const _ak_dnode *x) { return x->prev != NULL || x->next != NULL; }

/** Puts `x` (on no list) first on `l`. */
static inline void _ak_dlist_push_front(_ak_dlist *l, _ak_dnode *x) {
  AK_ASSERT(x->prev == NULL && x->next == NULL && l->head != x);
  x->next = l->head;
  if (l->head)
    l->head->prev = x;
  else
    l->tail = x;
  l->head = x;
  l->n++;
}

/** Puts `x` (on no list) last on `l`. */
static inline void _ak_dlist_push_back(_ak_dlist *l, _ak_dnode *x) {
  AK_ASSERT(x->prev == NULL && x->next == NULL && l->head != x);
  x->prev = l->tail;
  if (l->tail)
    l->tail->next = x;
  else
    l->head = x;
  l->tail = x;
  l->n++;
}

/** Puts `x` (on no list) just before `at` (on `l`), or last when `at` is
 *  NULL. */
static inline void _ak_dlist_insert_before(_ak_dlist *l, _ak_dnode *at, _ak_dnode *x) {
  if (at == NULL) {
    _ak_dlist_push_back(l, x);
    return;
  }
  AK_ASSERT(x->prev == NULL && x->next == NULL && l->head != x);
  AK_ASSERT(at->prev != NULL || l->head == at);
  x->next = at;
  x->prev = at->prev;
  if (at->prev)
    at->prev->next = x;
  else
    l->head = x;
  at->prev = x;
  l->n++;
}

/** Takes `x` (on `l`) off `l`; `x` ends with no links. */
static inline void _ak_dlist_remove(_ak_dlist *l, _ak_dnode *x) {
  AK_ASSERT(l->n > 0);
  AK_ASSERT(x->prev != NULL ? x->prev->next == x : l->head == x);
  AK_ASSERT(x->next != NULL ? x->next->prev == x : l->tail == x);
  if (x->prev)
    x->prev->next = x->next;
  else
    l->head = x->next;
  if (x->next)
    x->next->prev = x->prev;
  else
    l->tail = x->prev;
  x->prev = x->next = NULL;
  l->n--;
}

/** Takes the first node off `l` and returns it; NULL when `l` is empty. */
static inline _ak_dnode *_ak_dlist_pop_front(_ak_dlist *l) {
  _ak_dnode *x = l->head;
  if (x) _ak_dlist_remove(l, x);
  return x;
}

#endif /* AK_LIST_H */
