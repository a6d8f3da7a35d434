/*
 * srv_json_text.h — exact JSON in, valid UTF-8 out: the request checker and the quoting of user strings.
 */
#ifndef DEFORMD_SRV_JSON_TEXT_H
#define DEFORMD_SRV_JSON_TEXT_H

#include <stddef.h>
#include <stdint.h>

enum { SRV_JSON_ESYNTAX = -1, SRV_JSON_EDEPTH = -2 };

/* What srv_json_check() learned about a request line. */
typedef struct srv_json_scan {
  int is_object;        /* the value is an object */
  const char *id;       /* the raw text of its first "id" member's value (into the checked
                         * text), or NULL when it has none */
  size_t id_len;
  int nul_in_method;    /* an escaped NUL in the "method" member's string */
  int nul_in_params;    /* an escaped NUL in any string (name or value) under "params" */
  int nul_anywhere;     /* an escaped NUL in any string at all */
  int depth;            /* deepest nesting ([ and {, the outer object is 1) */
  int too_deep;
} srv_json_scan;

/* Checks that text[0..n) is exactly one JSON value as RFC 8259 defines it, in UTF-8, nested at
 * most max_depth deep, with blank space around it and nothing else. Returns 0, SRV_JSON_ESYNTAX
 * or SRV_JSON_EDEPTH with a reason naming the byte in err. */
int srv_json_check(const char *text, size_t n, int max_depth, srv_json_scan *out, char *err, size_t errlen);

/* Bytes of the UTF-8 character at p (1-4), or 0 when p[0..n) does not start with one. */
size_t srv_utf8_char(const uint8_t *p, size_t n);
int srv_utf8_valid(const char *s, size_t n);
/* A malloc'ed, NUL-terminated copy of s[0..n) in which every byte that is not part of a valid
 * UTF-8 character is U+FFFD; its length in *out_len (may be NULL). NULL when out of memory. */
char *srv_json_utf8_fix(const char *s, size_t n, size_t *out_len);

#define SRV_QUOTE_MAX 64                  /* bytes of a user's string an error message echoes */
#define SRV_QUOTE_BUF (SRV_QUOTE_MAX + 4) /* ... with "…" and the NUL */
/* `s` as an error message may echo it: itself when it is valid UTF-8 of at most 64 bytes, else
 * its first whole characters up to 64 bytes followed by "…" (written into buf). */
const char *srv_json_quote(const char *s, char buf[SRV_QUOTE_BUF]);

#endif
