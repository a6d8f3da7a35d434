/*
 * srv_log.h — deformd's log: one line per event on stderr, at a level.
 */
#ifndef DEFORMD_SRV_LOG_H
#define DEFORMD_SRV_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum srv_log_level { SRV_LOG_ERROR, SRV_LOG_WARN, SRV_LOG_INFO, SRV_LOG_DEBUG } srv_log_level;

void srv_log_set_level(srv_log_level level);
int srv_log_parse_level(const char *name, srv_log_level *out);
void srv_log(srv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
