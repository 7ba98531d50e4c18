/* SPDX-License-Identifier: MIT */
// text_match.h - POSIX extended regular expressions over a test's captured
// text (std::regex is avoided: GCC 12 warns inside it, -Wmaybe-uninitialized,
// in the -O1 sanitizer builds, which use -Werror). In a pattern, the two
// characters \n stand for a newline.
#ifndef AK_TESTS_TEXT_MATCH_H
#define AK_TESTS_TEXT_MATCH_H

#include <regex.h>

#include <cstddef>
#include <stdexcept>
#include <string>

// How many non-overlapping matches of `pattern` `text` holds.
inline std::size_t ere_count(const std::string &text, std::string pattern) {
  for (std::size_t i; (i = pattern.find("\\n")) != std::string::npos;) pattern.replace(i, 2, "\n");
  regex_t re;
  if (regcomp(&re, pattern.c_str(), REG_EXTENDED) != 0)
    throw std::invalid_argument("bad pattern: " + pattern);
  std::size_t n = 0;
  const char *at = text.c_str();
  regmatch_t m;
  while (*at && regexec(&re, at, 1, &m, at == text.c_str() ? 0 : REG_NOTBOL) == 0) {
    n++;
    at += m.rm_eo > m.rm_so ? m.rm_eo : m.rm_so + 1;
  }
  regfree(&re);
  return n;
}

// Whether `pattern` occurs in `text`.
inline bool ere_search(const std::string &text, const std::string &pattern) {
  return ere_count(text, pattern) > 0;
}

// Whether all of `text` matches `pattern`.
inline bool ere_match(const std::string &text, const std::string &pattern) {
  return ere_search(text, "^(" + pattern + ")$");
}

#endif  // AK_TESTS_TEXT_MATCH_H
