/* SPDX-License-Identifier: MIT */
/* proto.c - the protocol-buffers encoder (proto.h). */
#include "prof/proto.h"

#include <errno.h>
#include <string.h>

#include "common/error.h"

void _ak_pb_init(_ak_pb *b, void *buf, size_t cap, int fd) {
  b->buf = (uint8_t *)buf;
  b->len = 0;
  b->cap = cap;
  b->fd = fd;
  b->err = 0;
  b->total = 0;
}

size_t _ak_pb_varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Writes the buffer out: 0, or -1 (err set) without an fd or when the write fails. */
static int drain(_ak_pb *b) {
  if (b->err) return -1;
  if (b->fd < 0) {
    b->err = ENOBUFS;
    return -1;
  }
  if (_ak_write_all(b->fd, (const char *)b->buf, b->len) != 0) {
    b->err = errno ? errno : EIO;
    return -1;
  }
  b->len = 0;
  return 0;
}

void _ak_pb_raw(_ak_pb *b, const void *p, size_t n) {
  const uint8_t *s = (const uint8_t *)p;
  while (n > 0 && !b->err) {
    if (b->len == b->cap && drain(b) != 0) return;
    size_t k = b->cap - b->len < n ? b->cap - b->len : n;
    memcpy(b->buf + b->len, s, k);
    b->len += k;
    b->total += k;
    s += k;
    n -= k;
  }
}

void _ak_pb_varint(_ak_pb *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  while (v >= 0x80) {
    tmp[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  tmp[n++] = (uint8_t)v;
  _ak_pb_raw(b, tmp, n);
}

void _ak_pb_key(_ak_pb *b, uint32_t field, unsigned wire) { _ak_pb_varint(b, ((uint64_t)field << 3) | wire); }

void _ak_pb_uint(_ak_pb *b, uint32_t field, uint64_t v) {
  if (v == 0) return;
  _ak_pb_key(b, field, AK_PB_VARINT);
  _ak_pb_varint(b, v);
}

void _ak_pb_int(_ak_pb *b, uint32_t field, int64_t v) { _ak_pb_uint(b, field, (uint64_t)v); }

void _ak_pb_bytes(_ak_pb *b, uint32_t field, const void *p, size_t n) {
  _ak_pb_key(b, field, AK_PB_LEN);
  _ak_pb_varint(b, n);
  _ak_pb_raw(b, p, n);
}

void _ak_pb_str(_ak_pb *b, uint32_t field, const char *s) { _ak_pb_bytes(b, field, s, strlen(s)); }

void _ak_pb_packed(_ak_pb *b, uint32_t field, const uint64_t *v, size_t n) {
  if (n == 0) return;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += _ak_pb_varint_len(v[i]);
  _ak_pb_key(b, field, AK_PB_LEN);
  _ak_pb_varint(b, len);
  for (size_t i = 0; i < n; i++) _ak_pb_varint(b, v[i]);
}

void _ak_pb_message(_ak_pb *b, uint32_t field, const _ak_pb *sub) {
  if (sub->err) {
    if (!b->err) b->err = sub->err;
    return;
  }
  _ak_pb_bytes(b, field, sub->buf, sub->len);
}

int _ak_pb_flush(_ak_pb *b) {
  if (!b->err && b->len > 0 && b->fd >= 0) (void)drain(b);
  if (b->err) {
    errno = b->err;
    return -1;
  }
  return 0;
}
