/*
 * srv_base64.c — base64 decoding (see srv_base64.h), through OpenSSL's EVP_DecodeBlock.
 *
 * DOES NOT encode.
 */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>

#include "srv_base64.h"

int srv_base64_decode(const char *in, size_t n, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  if (n % 4 || n > (size_t)INT32_MAX) return -1;
  uint8_t *b = malloc(n / 4 * 3 + 1);
  if (!b) return -2;
  /* EVP_DecodeBlock counts the padding as zero bytes and accepts some whitespace: the input
   * is checked here, the padding subtracted. */
  for (size_t i = 0; i < n; i++) {
    char ch = in[i];
    int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' ||
             ch == '/' || (ch == '=' && i >= n - 2 && (i == n - 1 || in[n - 1] == '='));
    if (!ok) {
      free(b);
      return -1;
    }
  }
  int r = n ? EVP_DecodeBlock(b, (const unsigned char *)in, (int)n) : 0;
  if (r < 0) {
    free(b);
    return -1;
  }
  size_t pad = n >= 1 && in[n - 1] == '=' ? (n >= 2 && in[n - 2] == '=' ? 2 : 1) : 0;
  *out = b;
  *len = (size_t)r - pad;
  return 0;
}
