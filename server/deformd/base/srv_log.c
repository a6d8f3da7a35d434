/*
 * srv_log.c — log lines on stderr: "2026-11-30T10:00:00.123Z deformd[pid] LEVEL message".
 *
 * A message is one line whatever it quotes: control characters and bytes that are not UTF-8
 * are written as \xNN (newlines as \n).
 *
 * DOES NOT buffer or rotate: one fprintf per line, so lines from different threads never mix
 * within a line. The level is set once at start-up.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "srv_log.h"
#include "srv_error.h"
#include "srv_json_text.h"

static srv_log_level current = SRV_LOG_INFO;
static const char *names[] = {"error", "warn", "info", "debug"};

void srv_log_set_level(srv_log_level level) { current = level; }

int srv_log_parse_level(const char *name, srv_log_level *out) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(name, names[i]) == 0) {
      *out = (srv_log_level)i;
      return 0;
    }
  }
  return SRV_EPARAMS;
}

/* Copies `in` into `out` (outlen bytes) with every control character and every byte that is
 * not part of a UTF-8 character written as \xNN (\n as \n), so that nothing a client sent —
 * a session name with a newline, invalid UTF-8 — can forge or break a log line. */
static void escape(const char *in, char *out, size_t outlen) {
  const uint8_t *p = (const uint8_t *)in;
  size_t n = strlen(in), o = 0;
  for (size_t i = 0; i < n && o + 5 < outlen;) {
    uint8_t c = p[i];
    size_t k = c >= 0x80 ? srv_utf8_char(p + i, n - i) : 1;
    if (c >= 0x20 && c != 0x7F && k > 0) {
      if (o + k >= outlen) break;
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
      continue;
    }
    if (c == '\n') o += (size_t)snprintf(out + o, outlen - o, "\\n");
    else o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
    i++;
  }
  out[o] = '\0';
}

void srv_log(srv_log_level level, const char *fmt, ...) {
  if (level > current) return;
  char raw[1024], msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof(raw), fmt, ap);
  va_end(ap);
  escape(raw, msg, sizeof(msg));
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
  fprintf(stderr, "%s.%03dZ deformd[%d] %-5s %s\n", when, (int)(tv.tv_usec / 1000), (int)getpid(),
          names[level], msg);
}
