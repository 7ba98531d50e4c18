/* SPDX-License-Identifier: MIT */
// stats_print_test.cpp - the statistics printers a program calls itself
// (ak_malloc_stats_print, ak_pool_stats_print) write human units, and
// ak_option_set refuses a value outside the option's range. The exit report
// and environment options: tests/preload/stats_output_test.cpp.
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "text_match.h"

// The library's internal formatter (src/common/error.h, a C header that C++
// cannot include: _Noreturn): declared here with the same signature.
extern "C" const char *_ak_format_bytes(char *buf, size_t bytes);

TEST(OptionValues, ApiRejectsOutOfRangeValuesAndKeepsTheOption) {
  long old = ak_option_get(AK_OPTION_PURGE_DELAY);
  errno = 0;
  ak_option_set(AK_OPTION_PURGE_DELAY, -5);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(std::string(ak_last_error()).find("ak_option_set: AK_PURGE_DELAY = -5 is out of range"),
            std::string::npos)
      << ak_last_error();
  EXPECT_EQ(ak_option_get(AK_OPTION_PURGE_DELAY), old);
  errno = 0;
  ak_option_set(AK_OPTION_SHOW_STATS, 7);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ak_option_get(AK_OPTION_SHOW_STATS), 0);
}

// The printers a program calls itself use the same human units.
TEST(StatsPrint, MallocAndPoolPrintersUseHumanUnits) {
  void *big = ak_malloc(16u << 20);
  ASSERT_NE(big, nullptr);
  FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(ak_malloc_stats_print(f), 0);
  ak_pool_options po{};
  po.object_size = 48;
  ak_pool *p = ak_pool_create(&po);
  ASSERT_NE(p, nullptr);
  void *o = ak_pool_alloc(p);
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(ak_pool_stats_print(p, f), 0);
  ak_pool_free(p, o);
  ak_pool_destroy(p);
  ak_free(big);
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  EXPECT_EQ(text.rfind("arenakit malloc:\n", 0), 0u) << text;
  EXPECT_TRUE(ere_search(text, R"(large blocks [1-9][0-9]* \([0-9.]+ MiB\))")) << text;
  EXPECT_TRUE(ere_search(text, R"(\n  process RSS +[0-9.]+ (KiB|MiB|GiB))")) << text;
  EXPECT_TRUE(ere_search(text, R"(pool '[^']*' \(sync threads\): objects of 48 B in slots of [0-9]+ B\n)"))
      << text;
  EXPECT_TRUE(ere_search(text, R"(reserved [0-9.]+ (KiB|MiB), resident [0-9.]+ (B|KiB|MiB))")) << text;
  EXPECT_FALSE(ere_search(text, R"([0-9]{4,} B([^a-zA-Z]|$))")) << text;
}

// The units every printer uses: three significant digits, binary prefixes,
// never "1024 KiB".
TEST(StatsPrint, BytesInHumanUnits) {
  struct Case {
    size_t bytes;
    const char *text;
  } cases[] = {{0, "0 B"},
               {1023, "1023 B"},
               {1024, "1.00 KiB"},
               {1536, "1.50 KiB"},
               {10 * 1024 + 512, "10.5 KiB"},
               {1048575, "1.00 MiB"},
               {1048576 - 600, "1023 KiB"},
               {10u << 20, "10.0 MiB"},
               {size_t(5) << 30, "5.00 GiB"},
               {SIZE_MAX, "16.0 EiB"}};
  for (const Case &c : cases) {
    char buf[64];  // AK_BYTES_TEXT (16) is enough
    EXPECT_STREQ(_ak_format_bytes(buf, c.bytes), c.text) << c.bytes;
  }
}
