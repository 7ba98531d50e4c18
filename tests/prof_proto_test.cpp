// SPDX-License-Identifier: MIT
// prof_proto_test.cpp - the heap profiler's protocol-buffers encoder
// (src/prof/proto.c): varints against their known encodings, scalar,
// length-delimited, packed and nested fields byte for byte against the
// examples of the protobuf encoding guide, proto3's default omission, a
// stream larger than the buffer going through a file descriptor, and the
// overflow of a memory-only encoder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "prof/proto.h"

namespace {

std::vector<uint8_t> bytes_of(const _ak_pb &b) { return std::vector<uint8_t>(b.buf, b.buf + b.len); }

std::vector<uint8_t> varint(uint64_t v) {
  uint8_t buf[16];
  _ak_pb b;
  _ak_pb_init(&b, buf, sizeof buf, -1);
  _ak_pb_varint(&b, v);
  EXPECT_EQ(b.err, 0);
  EXPECT_EQ(b.len, _ak_pb_varint_len(v));
  return bytes_of(b);
}

TEST(ProfProto, VarintsHaveTheirKnownEncodings) {
  EXPECT_EQ(varint(0), (std::vector<uint8_t>{0x00}));
  EXPECT_EQ(varint(1), (std::vector<uint8_t>{0x01}));
  EXPECT_EQ(varint(127), (std::vector<uint8_t>{0x7f}));
  EXPECT_EQ(varint(128), (std::vector<uint8_t>{0x80, 0x01}));
  EXPECT_EQ(varint(150), (std::vector<uint8_t>{0x96, 0x01}));
  EXPECT_EQ(varint(300), (std::vector<uint8_t>{0xac, 0x02}));
  EXPECT_EQ(varint(16384), (std::vector<uint8_t>{0x80, 0x80, 0x01}));
  // int64 -1 is ten bytes: two's complement, all 64 bits.
  EXPECT_EQ(varint(UINT64_MAX),
            (std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  for (int bits = 0; bits < 64; bits++)
    EXPECT_EQ(_ak_pb_varint_len(uint64_t{1} << bits), size_t(bits / 7 + 1));
}

TEST(ProfProto, FieldsMatchTheEncodingGuide) {
  uint8_t buf[64];
  _ak_pb b;
  // message Test1 { int32 a = 1; } with a = 150: 08 96 01
  _ak_pb_init(&b, buf, sizeof buf, -1);
  _ak_pb_uint(&b, 1, 150);
  EXPECT_EQ(bytes_of(b), (std::vector<uint8_t>{0x08, 0x96, 0x01}));
  // message Test2 { string b = 2; } with b = "testing": 12 07 74 65 73 74 69 6e 67
  _ak_pb_init(&b, buf, sizeof buf, -1);
  _ak_pb_str(&b, 2, "testing");
  EXPECT_EQ(bytes_of(b), (std::vector<uint8_t>{0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}));
  // message Test4 { repeated int32 d = 4 [packed]; } with 3, 270, 86942: 22 06 03 8e 02 9e a7 05
  _ak_pb_init(&b, buf, sizeof buf, -1);
  const uint64_t d[] = {3, 270, 86942};
  _ak_pb_packed(&b, 4, d, 3);
  EXPECT_EQ(bytes_of(b), (std::vector<uint8_t>{0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}));
  // message Test3 { Test1 c = 3; } with c.a = 150: 1a 03 08 96 01
  uint8_t sub_buf[16];
  _ak_pb sub;
  _ak_pb_init(&sub, sub_buf, sizeof sub_buf, -1);
  _ak_pb_uint(&sub, 1, 150);
  _ak_pb_init(&b, buf, sizeof buf, -1);
  _ak_pb_message(&b, 3, &sub);
  EXPECT_EQ(bytes_of(b), (std::vector<uint8_t>{0x1a, 0x03, 0x08, 0x96, 0x01}));
  EXPECT_EQ(b.total, 5u);
}

TEST(ProfProto, ZeroScalarsAreLeftOutEmptyStringsAreNot) {
  uint8_t buf[16];
  _ak_pb b;
  _ak_pb_init(&b, buf, sizeof buf, -1);
  _ak_pb_uint(&b, 1, 0);
  _ak_pb_int(&b, 2, 0);
  const uint64_t none[1] = {0};
  _ak_pb_packed(&b, 3, none, 0);
  EXPECT_EQ(b.len, 0u);
  _ak_pb_str(&b, 6, "");  // string_table[0] must be there
  EXPECT_EQ(bytes_of(b), (std::vector<uint8_t>{0x32, 0x00}));
  _ak_pb_init(&b, buf, sizeof buf, -1);
  _ak_pb_int(&b, 1, -2);  // int64: ten bytes
  EXPECT_EQ(b.len, 11u);
}

TEST(ProfProto, AStreamLargerThanItsBufferGoesThroughTheDescriptor) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  uint8_t buf[7];  // smaller than a field: every field straddles a flush
  _ak_pb b;
  _ak_pb_init(&b, buf, sizeof buf, fds[1]);
  std::vector<uint8_t> want;
  for (uint32_t i = 1; i <= 300; i++) {
    _ak_pb_uint(&b, i % 15 + 1, uint64_t{i} * 1000003);
    uint8_t one[32];
    _ak_pb m;
    _ak_pb_init(&m, one, sizeof one, -1);
    _ak_pb_uint(&m, i % 15 + 1, uint64_t{i} * 1000003);
    want.insert(want.end(), one, one + m.len);
  }
  ASSERT_EQ(_ak_pb_flush(&b), 0);
  close(fds[1]);
  std::vector<uint8_t> got(want.size() + 1);
  size_t n = 0;
  for (ssize_t r; (r = read(fds[0], got.data() + n, got.size() - n)) > 0;) n += size_t(r);
  close(fds[0]);
  got.resize(n);
  EXPECT_EQ(got, want);
  EXPECT_EQ(b.total, want.size());
}

TEST(ProfProto, AMemoryEncoderThatOverflowsFailsAndStaysFailed) {
  uint8_t buf[4];
  _ak_pb b;
  _ak_pb_init(&b, buf, sizeof buf, -1);
  _ak_pb_str(&b, 1, "too long");
  EXPECT_EQ(b.err, ENOBUFS);
  size_t len = b.len;
  _ak_pb_uint(&b, 2, 1);
  EXPECT_EQ(b.len, len);
  errno = 0;
  EXPECT_EQ(_ak_pb_flush(&b), -1);
  EXPECT_EQ(errno, ENOBUFS);
  // A failed nested message fails its parent.
  uint8_t outer_buf[64];
  _ak_pb outer;
  _ak_pb_init(&outer, outer_buf, sizeof outer_buf, -1);
  _ak_pb_message(&outer, 3, &b);
  EXPECT_EQ(outer.err, ENOBUFS);
  EXPECT_EQ(outer.len, 0u);
}

TEST(ProfProto, AFailedWriteIsReported) {
  uint8_t buf[4];
  _ak_pb b;
  _ak_pb_init(&b, buf, sizeof buf, 1000000);  // not an open descriptor
  _ak_pb_str(&b, 1, "more than four bytes");
  errno = 0;
  EXPECT_EQ(_ak_pb_flush(&b), -1);
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
