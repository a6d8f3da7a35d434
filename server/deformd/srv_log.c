/*
 * srv_log.c — log lines on stderr: "2026-11-30T10:00:00.123Z deformd[pid] LEVEL message".
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

#include "srv.h"

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

void srv_log(srv_log_level level, const char *fmt, ...) {
  if (level > current) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
  fprintf(stderr, "%s.%03dZ deformd[%d] %-5s %s\n", when, (int)(tv.tv_usec / 1000), (int)getpid(),
          names[level], msg);
}
