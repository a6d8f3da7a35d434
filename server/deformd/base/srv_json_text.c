/*
 * srv_json_text.c — JSON text exactly as RFC 8259 and UTF-8 define it, in and out.
 *
 * cJSON is lenient where a service must not be: it takes invalid UTF-8 and echoes it raw (a
 * session named "x\xff" made every session.list reply invalid JSON), cuts strings at an escaped
 * NUL ("session.list\u0000x" ran session.list), ignores what follows the first value on a line,
 * and reads 01, 1. and other numbers RFC 8259 does not allow. So every request line (and the
 * config file) is checked here first, in one pass, before cJSON parses it:
 *
 *   - exactly one value, with only blank space (space, tab, CR, LF) around it;
 *   - the grammar of RFC 8259: numbers -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, literals
 *     true/false/null, strings without raw control characters, escapes from the RFC's list,
 *     \u escapes with surrogates in pairs;
 *   - the bytes are UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF;
 *   - nesting at most `max_depth` deep.
 *
 * For a top-level object it also reports where the "id" member's text lies (replies echo it
 * byte for byte, so 1e400 and 2^64 come back as sent) and whether an escaped NUL appears in
 * "method" or anywhere under "params" (names with NUL are refused, never cut).
 *
 * Going out: srv_json_quote() cuts a user's string to at most 64 bytes on a character boundary
 * before an error message echoes it, and srv_json_utf8_fix() repairs any text that is not
 * UTF-8 (bytes that cannot start or continue a character become U+FFFD), the last guard before
 * a reply or a name from a file reaches a client.
 *
 * DOES NOT build cJSON trees (cJSON does, after this check), or decide what an error code is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_json_text.h"

/* ---- UTF-8 -------------------------------------------------------------------------------------- */

size_t srv_utf8_char(const uint8_t *p, size_t n) {
  if (n == 0) return 0;
  uint8_t c = p[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t min, cp;
  if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000, cp = c & 0x07u;
  else return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

int srv_utf8_valid(const char *s, size_t n) {
  const uint8_t *p = (const uint8_t *)s;
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    size_t k = srv_utf8_char(p + i, n - i);
    if (k == 0) return 0;
    i += k;
  }
  return 1;
}

char *srv_json_utf8_fix(const char *s, size_t n, size_t *out_len) {
  const uint8_t *p = (const uint8_t *)s;
  /* Each bad byte becomes 3: the worst case is 3n. */
  char *out = malloc(3 * n + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t k = srv_utf8_char(p + i, n - i);
    if (k == 0) {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    } else {
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
    }
  }
  out[o] = '\0';
  if (out_len) *out_len = o;
  return out;
}

const char *srv_json_quote(const char *s, char buf[SRV_QUOTE_BUF]) {
  if (!s) return "";
  size_t n = strlen(s);
  if (n <= SRV_QUOTE_MAX && srv_utf8_valid(s, n)) return s;
  const uint8_t *p = (const uint8_t *)s;
  size_t i = 0, o = 0;
  while (i < n) {
    size_t k = srv_utf8_char(p + i, n - i);
    size_t put = k ? k : 3; /* a bad byte shows as U+FFFD */
    if (o + put > SRV_QUOTE_MAX) break;
    if (k) memcpy(buf + o, p + i, k);
    else memcpy(buf + o, "\xEF\xBF\xBD", 3);
    o += put;
    i += k ? k : 1;
  }
  if (i < n) {
    memcpy(buf + o, "\xE2\x80\xA6", 3); /* … */
    o += 3;
  }
  buf[o] = '\0';
  return buf;
}

/* ---- the request check -------------------------------------------------------------------------- */

typedef struct scan {
  const uint8_t *p;
  size_t n, at;
  int max_depth;
  srv_json_scan *out;
  char *err;
  size_t errlen;
  int failed;
  int in_method, in_params; /* inside the top-level member of that name */
} scan;

static void fail(scan *s, const char *what) {
  if (s->failed) return;
  s->failed = 1;
  if (!s->err || s->errlen == 0) return;
  if (s->at < s->n) {
    uint8_t c = s->p[s->at];
    if (c >= 0x21 && c < 0x7F)
      snprintf(s->err, s->errlen, "%s at byte %zu ('%c')", what, s->at, c);
    else
      snprintf(s->err, s->errlen, "%s at byte %zu (byte 0x%02x)", what, s->at, c);
  } else {
    snprintf(s->err, s->errlen, "%s at byte %zu (the end of the line)", what, s->at);
  }
}

static void skip_blank(scan *s) {
  while (s->at < s->n) {
    uint8_t c = s->p[s->at];
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
    s->at++;
  }
}

static int hex4(scan *s, uint32_t *out) {
  if (s->n - s->at < 4) return -1;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    uint8_t c = s->p[s->at + (size_t)i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return -1;
  }
  s->at += 4;
  *out = v;
  return 0;
}

/* A string; s->at is at its opening quote. When `key` is not NULL, the decoded text (up to
 * keylen - 1 bytes; longer keys are marked by keylen) is written there for the caller to
 * compare member names. */
static void string(scan *s, char *key, size_t keylen) {
  size_t k = 0;
  int key_too_long = 0;
  s->at++; /* the quote */
  for (;;) {
    if (s->at >= s->n) {
      fail(s, "unterminated string");
      return;
    }
    uint8_t c = s->p[s->at];
    if (c == '"') {
      s->at++;
      break;
    }
    uint32_t cp;
    if (c < 0x20) {
      fail(s, "raw control character in a string (write it as \\u00XX)");
      return;
    }
    if (c == '\\') {
      s->at++;
      if (s->at >= s->n) {
        fail(s, "unterminated escape");
        return;
      }
      c = s->p[s->at++];
      switch (c) {
        case '"': case '\\': case '/': cp = c; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
          if (hex4(s, &cp) != 0) {
            fail(s, "\\u needs four hex digits");
            return;
          }
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail(s, "a low surrogate escape without a high one before it");
            return;
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (s->n - s->at < 6 || s->p[s->at] != '\\' || s->p[s->at + 1] != 'u' ||
                (s->at += 2, hex4(s, &lo) != 0) || lo < 0xDC00 || lo > 0xDFFF) {
              fail(s, "a high surrogate escape without a low one after it");
              return;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (cp == 0) {
            s->out->nul_anywhere = 1;
            if (s->in_method) s->out->nul_in_method = 1;
            if (s->in_params) s->out->nul_in_params = 1;
          }
          break;
        default:
          s->at--;
          fail(s, "unknown escape");
          return;
      }
      if (key && !key_too_long) {
        /* Member names compared here are ASCII; anything else just makes the key "other". */
        if (cp > 0 && cp < 0x80 && k + 1 < keylen) key[k++] = (char)cp;
        else key_too_long = 1;
      }
      continue;
    }
    size_t len = c < 0x80 ? 1 : srv_utf8_char(s->p + s->at, s->n - s->at);
    if (len == 0) {
      fail(s, "invalid UTF-8");
      return;
    }
    if (key && !key_too_long) {
      if (len == 1 && k + 1 < keylen) key[k++] = (char)c;
      else key_too_long = 1;
    }
    s->at += len;
  }
  if (key) {
    if (key_too_long) k = 0, key[0] = '\x01', key[1] = '\0';
    else key[k] = '\0';
  }
}

static void number(scan *s) {
  if (s->p[s->at] == '-') s->at++;
  if (s->at >= s->n || s->p[s->at] < '0' || s->p[s->at] > '9') {
    fail(s, "a number needs a digit");
    return;
  }
  if (s->p[s->at] == '0') {
    s->at++;
    if (s->at < s->n && s->p[s->at] >= '0' && s->p[s->at] <= '9') {
      fail(s, "a number may not have a leading zero");
      return;
    }
  } else {
    while (s->at < s->n && s->p[s->at] >= '0' && s->p[s->at] <= '9') s->at++;
  }
  if (s->at < s->n && s->p[s->at] == '.') {
    s->at++;
    if (s->at >= s->n || s->p[s->at] < '0' || s->p[s->at] > '9') {
      fail(s, "a digit must follow the decimal point");
      return;
    }
    while (s->at < s->n && s->p[s->at] >= '0' && s->p[s->at] <= '9') s->at++;
  }
  if (s->at < s->n && (s->p[s->at] == 'e' || s->p[s->at] == 'E')) {
    s->at++;
    if (s->at < s->n && (s->p[s->at] == '+' || s->p[s->at] == '-')) s->at++;
    if (s->at >= s->n || s->p[s->at] < '0' || s->p[s->at] > '9') {
      fail(s, "an exponent needs a digit");
      return;
    }
    while (s->at < s->n && s->p[s->at] >= '0' && s->p[s->at] <= '9') s->at++;
  }
}

static void literal(scan *s, const char *word) {
  size_t len = strlen(word);
  if (s->n - s->at < len || memcmp(s->p + s->at, word, len) != 0) {
    fail(s, "unexpected character");
    return;
  }
  s->at += len;
}

static void value(scan *s, int depth);

/* An object or an array; s->at is at its opening bracket. Depth 1 is the request itself. */
static void container(scan *s, int depth) {
  int is_object = s->p[s->at] == '{';
  char close = is_object ? '}' : ']';
  if (depth > s->max_depth) {
    s->out->too_deep = 1;
    fail(s, "nested too deep");
    return;
  }
  if (depth > s->out->depth) s->out->depth = depth;
  s->at++;
  skip_blank(s);
  if (s->at < s->n && s->p[s->at] == (uint8_t)close) {
    s->at++;
    return;
  }
  for (;;) {
    skip_blank(s);
    int member = 0; /* 1: "id", 2: "method", 3: "params" of the request */
    if (is_object) {
      if (s->at >= s->n || s->p[s->at] != '"') {
        fail(s, "expected a member name in quotes");
        return;
      }
      char key[8];
      string(s, depth == 1 ? key : NULL, sizeof(key));
      if (s->failed) return;
      if (depth == 1) member = strcmp(key, "id") == 0 ? 1 : strcmp(key, "method") == 0 ? 2 : strcmp(key, "params") == 0 ? 3 : 0;
      skip_blank(s);
      if (s->at >= s->n || s->p[s->at] != ':') {
        fail(s, "expected ':' after a member name");
        return;
      }
      s->at++;
      skip_blank(s);
    }
    size_t start = s->at;
    if (member == 2) s->in_method = 1;
    if (member == 3) s->in_params = 1;
    value(s, depth);
    if (member == 2) s->in_method = 0;
    if (member == 3) s->in_params = 0;
    if (s->failed) return;
    /* The first "id" is the one cJSON finds, so it is the one echoed. */
    if (member == 1 && !s->out->id) {
      s->out->id = (const char *)s->p + start;
      s->out->id_len = s->at - start;
    }
    skip_blank(s);
    if (s->at < s->n && s->p[s->at] == ',') {
      s->at++;
      continue;
    }
    if (s->at < s->n && s->p[s->at] == (uint8_t)close) {
      s->at++;
      return;
    }
    fail(s, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    return;
  }
}

static void value(scan *s, int depth) {
  if (s->at >= s->n) {
    fail(s, "expected a value");
    return;
  }
  uint8_t c = s->p[s->at];
  if (c == '{' || c == '[') container(s, depth + 1);
  else if (c == '"') string(s, NULL, 0);
  else if (c == '-' || (c >= '0' && c <= '9')) number(s);
  else if (c == 't') literal(s, "true");
  else if (c == 'f') literal(s, "false");
  else if (c == 'n') literal(s, "null");
  else fail(s, "unexpected character");
}

int srv_json_check(const char *text, size_t n, int max_depth, srv_json_scan *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  scan s = {(const uint8_t *)text, n, 0, max_depth, out, err, errlen, 0, 0, 0};
  skip_blank(&s);
  out->is_object = s.at < n && text[s.at] == '{';
  value(&s, 0);
  if (!s.failed) {
    skip_blank(&s);
    if (s.at < n) fail(&s, "text after the JSON value (one value per line)");
  }
  if (!s.failed) return 0;
  out->id = NULL;
  out->id_len = 0;
  return out->too_deep ? SRV_JSON_EDEPTH : SRV_JSON_ESYNTAX;
}
