/*
 * utf8_oracle.h — whether bytes are UTF-8, decided here and not by the code under test: the
 * judge of every reply in tests/deformd/test_json_exact.c and tests/fuzz/fuzz_rpc.c (cJSON,
 * which the server uses, takes invalid UTF-8, so it cannot be the judge).
 */
#ifndef DEFORMD_TEST_UTF8_ORACLE_H
#define DEFORMD_TEST_UTF8_ORACLE_H

#include <stddef.h>

/* 1 when s[0..n) is UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static inline int oracle_utf8_valid(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > n) return 0;
    unsigned long cp = len == 1 ? c : len == 2 ? (c & 31u) : len == 3 ? (c & 15u) : (c & 7u);
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (s[i + k] & 63u);
    }
    static const unsigned long min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += len;
  }
  return 1;
}

#endif
