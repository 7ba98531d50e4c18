/* SPDX-License-Identifier: MIT */
/* proto.h - a protocol-buffers encoder, enough for pprof's profile.proto
 * (internal): varints, tagged scalar and length-delimited fields, packed
 * repeated fields, nested messages.
 *
 * An encoder writes into a caller's buffer. With a file descriptor, a
 * full buffer is written out (write(2)) and reused, so a profile of any
 * size goes through a fixed buffer; without one, an overflow sets
 * ENOBUFS. A nested message is encoded into an encoder of its own (a
 * buffer on the stack) and then added as a length-delimited field, so no
 * length has to be known in advance. The first error sticks (`err`) and
 * later calls do nothing. No allocation. */
#ifndef AK_PROF_PROTO_H
#define AK_PROF_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Wire types. */
enum { AK_PB_VARINT = 0, AK_PB_LEN = 2 };

typedef struct _ak_pb {
  uint8_t *buf;   /* the caller's buffer */
  size_t len;     /* bytes in it not yet written out */
  size_t cap;     /* its size */
  int fd;         /* where full buffers go; -1: memory only */
  int err;        /* first error (errno value); 0: none */
  uint64_t total; /* bytes encoded so far */
} _ak_pb;

/** Starts an encoder over buf[0..cap) writing to `fd` (-1: memory only). */
void _ak_pb_init(_ak_pb *b, void *buf, size_t cap, int fd);
/** Bytes the varint encoding of `v` takes (1..10). */
size_t _ak_pb_varint_len(uint64_t v);
/** Raw bytes. */
void _ak_pb_raw(_ak_pb *b, const void *p, size_t n);
/** A varint: 7 bits a byte, low bits first, high bit = more. */
void _ak_pb_varint(_ak_pb *b, uint64_t v);
/** A field key: (field << 3) | wire type. */
void _ak_pb_key(_ak_pb *b, uint32_t field, unsigned wire);
/** An unsigned (uint64) or signed (int64, two's complement) varint field;
 *  left out when 0, proto3's default. */
void _ak_pb_uint(_ak_pb *b, uint32_t field, uint64_t v);
void _ak_pb_int(_ak_pb *b, uint32_t field, int64_t v);
/** A length-delimited field (bytes, string), written even when empty. */
void _ak_pb_bytes(_ak_pb *b, uint32_t field, const void *p, size_t n);
void _ak_pb_str(_ak_pb *b, uint32_t field, const char *s);
/** A packed repeated varint field (nothing when n == 0). */
void _ak_pb_packed(_ak_pb *b, uint32_t field, const uint64_t *v, size_t n);
/** `sub`'s bytes (an encoder without fd) as a nested-message field; a
 *  failed `sub` makes `b` fail. */
void _ak_pb_message(_ak_pb *b, uint32_t field, const _ak_pb *sub);
/** Writes out what is buffered (with an fd). 0, or -1 with errno = err. */
int _ak_pb_flush(_ak_pb *b);

#ifdef __cplusplus
}
#endif

#endif /* AK_PROF_PROTO_H */
