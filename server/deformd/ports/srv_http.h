/*
 * srv_http.h — the HTTP port: the page's files (viewer/web/, compiled in) and the upgrades to /ws/stream and
 * /ws/rpc.
 */
#ifndef DEFORMD_SRV_HTTP_H
#define DEFORMD_SRV_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "srv_conn.h"

/* The files of viewer/web/, compiled in: NULL when there is no such file. */
typedef struct srv_web_asset {
  const char *name;         /* "index.html", "main.js", ... */
  const char *content_type;
  const uint8_t *data;
  size_t len;
} srv_web_asset;
const srv_web_asset *srv_web_asset_find(const char *name, size_t len);

/* srv_http.c: the page's files, and the upgrades to /ws/stream and /ws/rpc. */
extern const srv_conn_ops srv_http_ops;

#endif
