/*
 * srv_config.c — deformd's settings: defaults, the helpers that set the settings with more to them
 * than a value (sessions to open at start, mesh folders, the administrator's token, the data
 * directory), and where the data directory is when none is given.
 *
 * The defaults here are the ones srv_options.c's table prints in --help (tests/deformd/
 * test_options.c checks that they agree).
 *
 * DOES NOT read the command line or the config file: srv_options.c does, from its table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "mesh.h"
#include "srv_config.h"
#include "srv_error.h"
#include "srv_log.h"

void srv_config_init(srv_config *c) {
  memset(c, 0, sizeof(*c));
  snprintf(c->listen, sizeof(c->listen), "localhost");
  c->stream_port = 7450;
  c->rpc_port = 7451;
  c->http_port = 7452;
  c->log_level = SRV_LOG_INFO;
  c->max_frame = PROTO_DEFAULT_MAX_FRAME;
  c->max_request = 64u << 20;
  c->max_json_depth = 64;
  c->soft_limit = 1u << 20;
  c->hard_limit = 256u << 20;
  c->slow_timeout_ms = 10000;
  c->hello_timeout_ms = 10000;
  c->idle_timeout_ms = 600000;
  c->max_unauth_input = 65536;
  c->max_input_total = 256u << 20;
  c->gesture_idle_ms = 600000;
  c->max_connections = 4096;
  c->max_vertices = MESH_DEFAULT_MAX_VERTICES;
  c->undo_depth = 100;
  c->max_sessions = 64;
  c->session_memory_mb = 2048;
  c->client_memory_mb = 1024;
  c->max_brush_work = 50000000;
  c->reserve_mb = -1;
  c->max_upload_mb = 512;
  c->import_memory_mb = 4096;
  c->import_seconds = 60;
  c->import_workers = 4;
  c->max_file_mb = 1024;
  c->snapshot_every = 100;
  c->lease_ms = 3000;
  c->replica_idle_ms = 60000;
  c->redis_timeout_ms = 5000;
  c->vmc_port = c->livelink_port = -1;
  snprintf(c->vmc_listen, sizeof(c->vmc_listen), "127.0.0.1");
  snprintf(c->livelink_listen, sizeof(c->livelink_listen), "127.0.0.1");
  c->face_rate = 60;
  c->face_idle_ms = 1000;
  c->face_flush_ms = 5000;
}

int srv_config_add_face_allow(srv_config *c, const char *addr) {
  char **g = realloc(c->face_allow, sizeof(char *) * (c->face_allow_count + 1));
  if (!g) return SRV_EINTERNAL;
  c->face_allow = g;
  if (!(g[c->face_allow_count] = strdup(addr))) return SRV_EINTERNAL;
  c->face_allow_count++;
  return 0;
}

int srv_config_set_string(char **field, const char *value) {
  char *copy = strdup(value);
  if (!copy) return SRV_EINTERNAL;
  free(*field);
  *field = copy;
  return 0;
}

void srv_config_fini(srv_config *c) {
  for (uint32_t i = 0; i < c->session_count; i++) {
    free(c->sessions[i].name);
    free(c->sessions[i].mesh);
  }
  free(c->sessions);
  if (c->admin_token) explicit_bzero(c->admin_token, strlen(c->admin_token));
  free(c->admin_token);
  free(c->data_dir);
  free(c->tls_cert);
  free(c->tls_key);
  for (uint32_t i = 0; i < c->mesh_dir_count; i++) free(c->mesh_dirs[i]);
  free(c->mesh_dirs);
  c->mesh_dirs = NULL;
  c->mesh_dir_count = 0;
  c->tls_cert = c->tls_key = NULL;
  free(c->redis);
  free(c->node_id);
  c->redis = c->node_id = NULL;
  free(c->vmc_session);
  free(c->livelink_session);
  free(c->face_map);
  c->vmc_session = c->livelink_session = c->face_map = NULL;
  for (uint32_t i = 0; i < c->face_allow_count; i++) free(c->face_allow[i]);
  free(c->face_allow);
  c->face_allow = NULL;
  c->face_allow_count = 0;
  c->data_dir = NULL;
  free(c->import_worker_path);
  c->import_worker_path = NULL;
  c->sessions = NULL;
  c->session_count = 0;
  c->admin_token = NULL;
}

int srv_config_add_mesh_dir(srv_config *c, const char *path) {
  char **g = realloc(c->mesh_dirs, sizeof(char *) * (c->mesh_dir_count + 1));
  if (!g) return SRV_EINTERNAL;
  c->mesh_dirs = g;
  if (!(g[c->mesh_dir_count] = strdup(path))) return SRV_EINTERNAL;
  c->mesh_dir_count++;
  return 0;
}

int srv_config_set_admin_token(srv_config *c, const char *token, char *err, size_t errlen) {
  size_t n = token ? strlen(token) : 0;
  if (n == 0 || n > PROTO_MAX_NAME) {
    snprintf(err, errlen, "the administrator's token must be 1 to %d bytes", PROTO_MAX_NAME);
    return SRV_EPARAMS;
  }
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)token[i] < 0x20 || token[i] == 0x7f) {
      snprintf(err, errlen, "the administrator's token may not hold control characters");
      return SRV_EPARAMS;
    }
  char *copy = strdup(token);
  if (!copy) {
    snprintf(err, errlen, "out of memory");
    return SRV_EPARAMS;
  }
  if (c->admin_token) explicit_bzero(c->admin_token, strlen(c->admin_token));
  free(c->admin_token);
  c->admin_token = copy;
  return 0;
}

int srv_config_read_admin_token(srv_config *c, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "--admin-token-file %s: %s", path, strerror(errno));
    return SRV_EPARAMS;
  }
  char line[PROTO_MAX_NAME + 3];
  size_t n = fread(line, 1, sizeof(line) - 1, f);
  fclose(f);
  line[n] = '\0';
  char *nl = strpbrk(line, "\r\n");
  if (nl) *nl = '\0';
  else if (n > PROTO_MAX_NAME) line[PROTO_MAX_NAME + 1] = '\0'; /* too long: refused below */
  int rc = srv_config_set_admin_token(c, line, err, errlen);
  explicit_bzero(line, sizeof(line));
  if (rc) {
    char why[160];
    snprintf(why, sizeof(why), "%s", err);
    snprintf(err, errlen, "--admin-token-file %s: %s (its first line is the token)", path, why);
  }
  return rc;
}

static int one_is_loopback(const char *addr) {
  if (strcmp(addr, "localhost") == 0 || strcmp(addr, "::1") == 0) return 1;
  unsigned a, b, cc, d;
  char tail;
  return sscanf(addr, "%u.%u.%u.%u%c", &a, &b, &cc, &d, &tail) == 4 && a == 127 && b < 256 && cc < 256 && d < 256;
}

int srv_config_listen_addresses(const char *list, char out[SRV_MAX_LISTEN][64], int optional[SRV_MAX_LISTEN]) {
  int n = 0;
  for (const char *p = list;;) {
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= 64) return -1;
    if (len == 9 && strncmp(p, "localhost", 9) == 0) {
      if (n + 2 > SRV_MAX_LISTEN) return -1;
      snprintf(out[n], 64, "127.0.0.1"), optional[n++] = 0;
      snprintf(out[n], 64, "::1"), optional[n++] = 1;
    } else {
      if (n + 1 > SRV_MAX_LISTEN) return -1;
      snprintf(out[n], 64, "%.*s", (int)len, p), optional[n++] = 0;
    }
    if (!p[len]) return n;
    p += len + 1;
  }
}

int srv_config_is_loopback(const char *addr) {
  char a[SRV_MAX_LISTEN][64];
  int optional[SRV_MAX_LISTEN];
  int n = srv_config_listen_addresses(addr, a, optional);
  for (int i = 0; i < n; i++)
    if (!one_is_loopback(a[i])) return 0;
  return n > 0;
}

int srv_config_set_data(srv_config *c, const char *dir) {
  char *copy = strdup(dir);
  if (!copy) return SRV_EINTERNAL;
  free(c->data_dir);
  c->data_dir = copy;
  return 0;
}

int srv_config_set_durability(srv_config *c, const char *name) {
  if (strcmp(name, "normal") == 0) c->durability_full = 0;
  else if (strcmp(name, "full") == 0) c->durability_full = 1;
  else return SRV_EPARAMS;
  return 0;
}

const char *srv_config_data_dir(const srv_config *c, char *buf, size_t len) {
  if (c->data_dir) return strcmp(c->data_dir, "none") == 0 ? NULL : c->data_dir;
  const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
  if (xdg && xdg[0] == '/') snprintf(buf, len, "%s/deformd", xdg);
  else snprintf(buf, len, "%s/.local/share/deformd", home && home[0] ? home : ".");
  return buf;
}

int srv_config_add_session(srv_config *c, const char *name, const char *mesh_path, char up) {
  srv_session_spec *g = realloc(c->sessions, sizeof(*g) * (c->session_count + 1));
  if (!g) return SRV_EINTERNAL;
  c->sessions = g;
  g[c->session_count].name = strdup(name);
  g[c->session_count].mesh = strdup(mesh_path);
  g[c->session_count].up = up;
  if (!g[c->session_count].name || !g[c->session_count].mesh) {
    free(g[c->session_count].name);
    free(g[c->session_count].mesh);
    return SRV_EINTERNAL;
  }
  c->session_count++;
  return 0;
}
