/*
 * srv_config.c — deformd's settings: defaults, the JSON config file, sessions to open at start.
 *
 * The config file is one JSON object; every key is optional:
 *   {"listen": "127.0.0.1", "stream_port": 7450, "rpc_port": 7451, "http_port": 7452 (or "off"),
 *    "log_level": "info",
 *    "token": "the administrator's token", "reserve_mb": -1,
 *    "tls_cert": "cert.pem", "tls_key": "key.pem", "mesh_dirs": ["/usr/share/assimp/models"],
 *    "limits": {"max_frame": 67108864, "max_request": 67108864, "max_json_depth": 64,
 *               "soft_limit": 1048576, "hard_limit": 268435456, "slow_timeout_ms": 10000,
 *               "hello_timeout_ms": 10000, "gesture_idle_ms": 600000, "idle_timeout_ms": 600000,
 *               "max_unauth_input": 65536, "max_input_mb": 256,
 *               "max_connections": 4096, "max_vertices": 5000000, "max_sessions": 64,
 *               "session_memory_mb": 2048, "client_memory_mb": 1024, "max_brush_work": 50000000,
 *               "max_file_mb": 1024, "import_memory_mb": 4096, "import_seconds": 60,
 *               "import_workers": 4, "max_upload_mb": 512},
 *    "import_worker_path": "/usr/bin/deformd",
 *    "sessions": [{"session": "demo", "mesh": "demo"}],
 *    "data": "/var/lib/deformd", "durability": "normal", "history_days": 0,
 *    "redis": "redis://127.0.0.1:6379/0", "relay": false, "node_id": "a", "advertise": "10.0.0.5",
 *    "snapshot_every": 100, "stream_maxlen": 1000, "lease_ms": 3000, "redis_timeout_ms": 5000,
 *    "replica_idle_ms": 60000}
 * (deploy/deformd.json is an example with every key.)
 * Command-line options given after --config override it. A token is never a command-line
 * option (every user of the machine can read /proc/PID/cmdline): the administrator's comes
 * from DEFORMD_ADMIN_TOKEN, --admin-token-file FILE or this file's "token".
 *
 * DOES NOT read the file on the loop thread: it is read once before the loop starts.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "proto.h"
#include "mesh.h"
#include "srv_config.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_json_text.h"

void srv_config_init(srv_config *c) {
  memset(c, 0, sizeof(*c));
  snprintf(c->listen, sizeof(c->listen), "127.0.0.1");
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

int srv_config_is_loopback(const char *addr) {
  if (strcmp(addr, "localhost") == 0 || strcmp(addr, "::1") == 0) return 1;
  unsigned a, b, cc, d;
  char tail;
  return sscanf(addr, "%u.%u.%u.%u%c", &a, &b, &cc, &d, &tail) == 4 && a == 127 && b < 256 && cc < 256 && d < 256;
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

int srv_config_add_session(srv_config *c, const char *name, const char *mesh_path) {
  srv_session_spec *g = realloc(c->sessions, sizeof(*g) * (c->session_count + 1));
  if (!g) return SRV_EINTERNAL;
  c->sessions = g;
  g[c->session_count].name = strdup(name);
  g[c->session_count].mesh = strdup(mesh_path);
  if (!g[c->session_count].name || !g[c->session_count].mesh) {
    free(g[c->session_count].name);
    free(g[c->session_count].mesh);
    return SRV_EINTERNAL;
  }
  c->session_count++;
  return 0;
}

/* Reads a non-negative integer member; 0 if absent, SRV_EPARAMS with err set if malformed. */
static int get_uint(const cJSON *o, const char *key, double max, double *out, char *err, size_t errlen) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > max ||
      v->valuedouble != (double)(long long)v->valuedouble) {
    snprintf(err, errlen, "\"%s\" must be an integer between 0 and %.0f", key, max);
    return SRV_EPARAMS;
  }
  *out = v->valuedouble;
  return 1;
}

int srv_config_load(srv_config *c, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open config file '%s'", path);
    return SRV_EPARAMS;
  }
  char *text = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 4096) {
      if (cap > (1u << 20)) {
        fclose(f);
        free(text);
        snprintf(err, errlen, "config file '%s' is larger than 1 MiB", path);
        return SRV_EPARAMS;
      }
      cap = cap ? 2 * cap : 8192;
      char *g = realloc(text, cap + 1);
      if (!g) {
        fclose(f);
        free(text);
        snprintf(err, errlen, "out of memory");
        return SRV_EPARAMS;
      }
      text = g;
    }
    size_t n = fread(text + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  text[len] = '\0';
  char why[256];
  int rc = srv_config_load_text(c, text, len, why, sizeof(why));
  free(text);
  if (rc) snprintf(err, errlen, "config file '%s': %s", path, why);
  return rc;
}

int srv_config_load_text(srv_config *c, const char *text, size_t len, char *err, size_t errlen) {
  /* Exact JSON, like every request: one value, UTF-8, RFC 8259 numbers, no NUL in a string. */
  srv_json_scan scan;
  char why[160];
  if (srv_json_check(text, len, 64, &scan, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "not valid JSON: %s", why);
    return SRV_EPARAMS;
  }
  if (scan.nul_anywhere) {
    snprintf(err, errlen, "a string contains a NUL character (\\u0000)");
    return SRV_EPARAMS;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "%s", root ? "not a JSON object" : "out of memory");
    cJSON_Delete(root);
    return SRV_EPARAMS;
  }
  int rc = SRV_EPARAMS;
  double v;
  const cJSON *item;
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "listen"))) {
    if (!cJSON_IsString(item) || strlen(item->valuestring) >= sizeof(c->listen)) {
      snprintf(err, errlen, "\"listen\" must be an address string");
      goto out;
    }
    snprintf(c->listen, sizeof(c->listen), "%s", item->valuestring);
  }
  int r;
  if ((r = get_uint(root, "stream_port", 65535, &v, err, errlen)) < 0) goto out;
  if (r) c->stream_port = (int)v;
  if ((r = get_uint(root, "rpc_port", 65535, &v, err, errlen)) < 0) goto out;
  if (r) c->rpc_port = (int)v;
  item = cJSON_GetObjectItemCaseSensitive(root, "http_port");
  if (cJSON_IsString(item) && strcmp(item->valuestring, "off") == 0) {
    c->http_port = -1;
  } else if (item) {
    if ((r = get_uint(root, "http_port", 65535, &v, err, errlen)) < 0) goto out;
    c->http_port = (int)v;
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "reserve_mb"))) {
    if (!cJSON_IsNumber(item) || item->valuedouble != floor(item->valuedouble) || item->valuedouble < -1 ||
        item->valuedouble > 1048576) {
      snprintf(err, errlen, "\"reserve_mb\" must be -1 (automatic), 0 (none) or a size in MiB up to 1048576");
      goto out;
    }
    c->reserve_mb = (int64_t)item->valuedouble;
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "log_level"))) {
    if (!cJSON_IsString(item) || srv_log_parse_level(item->valuestring, &c->log_level)) {
      snprintf(err, errlen, "\"log_level\" must be error, warn, info or debug");
      goto out;
    }
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "token"))) {
    if (!cJSON_IsString(item) || srv_config_set_admin_token(c, item->valuestring, err, errlen) != 0) {
      snprintf(err, errlen, "\"token\" (the administrator's) must be a string of 1 to %d bytes without control "
               "characters", PROTO_MAX_NAME);
      goto out;
    }
  }
  const char *files[2] = {"tls_cert", "tls_key"};
  char **slots[2] = {&c->tls_cert, &c->tls_key};
  for (int k = 0; k < 2; k++) {
    if (!(item = cJSON_GetObjectItemCaseSensitive(root, files[k]))) continue;
    if (!cJSON_IsString(item) || !item->valuestring[0]) {
      snprintf(err, errlen, "\"%s\" must be a file path", files[k]);
      goto out;
    }
    free(*slots[k]);
    *slots[k] = strdup(item->valuestring);
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "mesh_dirs"))) {
    const cJSON *d;
    int ok = cJSON_IsArray(item);
    cJSON_ArrayForEach(d, item) ok = ok && cJSON_IsString(d) && srv_config_add_mesh_dir(c, d->valuestring) == 0;
    if (!ok) {
      snprintf(err, errlen, "\"mesh_dirs\" must be an array of folder paths");
      goto out;
    }
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "data"))) {
    if (!cJSON_IsString(item) || !item->valuestring[0] || strlen(item->valuestring) > 900) {
      snprintf(err, errlen, "\"data\" must be a directory path, or \"none\" (memory only)");
      goto out;
    }
    if (srv_config_set_data(c, item->valuestring)) goto out;
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "durability"))) {
    if (!cJSON_IsString(item) || srv_config_set_durability(c, item->valuestring)) {
      snprintf(err, errlen, "\"durability\" must be \"normal\" or \"full\"");
      goto out;
    }
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "history_days"))) {
    if (!cJSON_IsNumber(item) || !(item->valuedouble >= 0) || item->valuedouble > 1e6) {
      snprintf(err, errlen, "\"history_days\" must be a number of days >= 0 (0 keeps everything)");
      goto out;
    }
    c->history_days = item->valuedouble;
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "undo_depth"))) {
    if (!cJSON_IsNumber(item) || !(item->valuedouble >= 1) || item->valuedouble > 100000 ||
        item->valuedouble != (double)(uint32_t)item->valuedouble) {
      snprintf(err, errlen, "\"undo_depth\" must be a whole number of steps from 1 to 100000");
      goto out;
    }
    c->undo_depth = (uint32_t)item->valuedouble;
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "redis"))) {
    if (!cJSON_IsString(item) || strncmp(item->valuestring, "redis://", 8) != 0 || strlen(item->valuestring) > 512) {
      snprintf(err, errlen, "\"redis\" must be an address redis://HOST:PORT[/DB]");
      goto out;
    }
    if (srv_config_set_string(&c->redis, item->valuestring)) goto out;
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "relay"))) {
    if (!cJSON_IsBool(item)) {
      snprintf(err, errlen, "\"relay\" must be true or false");
      goto out;
    }
    c->relay = cJSON_IsTrue(item);
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "node_id"))) {
    if (!cJSON_IsString(item) || !item->valuestring[0] || strlen(item->valuestring) > 80) {
      snprintf(err, errlen, "\"node_id\" must be a name of 1 to 80 bytes");
      goto out;
    }
    if (srv_config_set_string(&c->node_id, item->valuestring)) goto out;
  }
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "advertise"))) {
    if (!cJSON_IsString(item) || strlen(item->valuestring) >= sizeof(c->advertise)) {
      snprintf(err, errlen, "\"advertise\" must be a numeric address");
      goto out;
    }
    snprintf(c->advertise, sizeof(c->advertise), "%s", item->valuestring);
  }
  if ((r = get_uint(root, "snapshot_every", 1e6, &v, err, errlen)) < 0) goto out;
  if (r) c->snapshot_every = v < 1 ? 1 : (uint32_t)v;
  if ((r = get_uint(root, "stream_maxlen", 1e9, &v, err, errlen)) < 0) goto out;
  if (r) c->stream_maxlen = (uint32_t)v;
  if ((r = get_uint(root, "lease_ms", 3600000, &v, err, errlen)) < 0) goto out;
  if (r) c->lease_ms = v < 300 ? 300 : (uint32_t)v;
  if ((r = get_uint(root, "redis_timeout_ms", 3600000, &v, err, errlen)) < 0) goto out;
  if (r) c->redis_timeout_ms = v < 100 ? 100 : (uint32_t)v;
  if ((r = get_uint(root, "replica_idle_ms", 86400000, &v, err, errlen)) < 0) goto out;
  if (r) c->replica_idle_ms = (uint32_t)v;
  if ((item = cJSON_GetObjectItemCaseSensitive(root, "import_worker_path"))) {
    if (!cJSON_IsString(item) || !item->valuestring[0]) {
      snprintf(err, errlen, "\"import_worker_path\" must be the path of a program");
      goto out;
    }
    free(c->import_worker_path);
    c->import_worker_path = strdup(item->valuestring);
  }
  const cJSON *lim = cJSON_GetObjectItemCaseSensitive(root, "limits");
  if (lim) {
    if (!cJSON_IsObject(lim)) {
      snprintf(err, errlen, "\"limits\" must be an object");
      goto out;
    }
    if ((r = get_uint(lim, "max_frame", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->max_frame = (uint32_t)v;
    if ((r = get_uint(lim, "max_request", 1e12, &v, err, errlen)) < 0) goto out;
    if (r) c->max_request = (size_t)v;
    if ((r = get_uint(lim, "max_json_depth", 1000, &v, err, errlen)) < 0) goto out;
    if (r) c->max_json_depth = (int)v;
    if ((r = get_uint(lim, "soft_limit", 1e12, &v, err, errlen)) < 0) goto out;
    if (r) c->soft_limit = (size_t)v;
    if ((r = get_uint(lim, "hard_limit", 1e12, &v, err, errlen)) < 0) goto out;
    if (r) c->hard_limit = (size_t)v;
    if ((r = get_uint(lim, "slow_timeout_ms", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->slow_timeout_ms = (uint32_t)v;
    if ((r = get_uint(lim, "gesture_idle_ms", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->gesture_idle_ms = (uint32_t)v;
    if ((r = get_uint(lim, "hello_timeout_ms", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->hello_timeout_ms = (uint32_t)v;
    if ((r = get_uint(lim, "idle_timeout_ms", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->idle_timeout_ms = (uint32_t)v;
    if ((r = get_uint(lim, "max_unauth_input", 1e12, &v, err, errlen)) < 0) goto out;
    if (r) c->max_unauth_input = (size_t)v;
    if ((r = get_uint(lim, "max_input_mb", 1048576, &v, err, errlen)) < 0) goto out;
    if (r) c->max_input_total = (size_t)v << 20;
    if ((r = get_uint(lim, "max_connections", 1e6, &v, err, errlen)) < 0) goto out;
    if (r) c->max_connections = (uint32_t)v;
    if ((r = get_uint(lim, "max_vertices", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->max_vertices = (uint32_t)v;
    if ((r = get_uint(lim, "max_sessions", 1e6, &v, err, errlen)) < 0) goto out;
    if (r) c->max_sessions = (uint32_t)v;
    if ((r = get_uint(lim, "max_upload_mb", 1048576, &v, err, errlen)) < 0) goto out;
    if (r) c->max_upload_mb = (uint32_t)v;
    if ((r = get_uint(lim, "session_memory_mb", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->session_memory_mb = (uint32_t)v;
    if ((r = get_uint(lim, "client_memory_mb", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->client_memory_mb = (uint32_t)v;
    if ((r = get_uint(lim, "max_brush_work", 1e15, &v, err, errlen)) < 0) goto out;
    if (r) c->max_brush_work = (uint64_t)v;
    if ((r = get_uint(lim, "max_file_mb", 4294967295.0, &v, err, errlen)) < 0) goto out;
    if (r) c->max_file_mb = (uint32_t)v;
    if ((r = get_uint(lim, "import_memory_mb", 1048576, &v, err, errlen)) < 0) goto out;
    if (r) c->import_memory_mb = v > 0 ? (uint32_t)v : c->import_memory_mb;
    if ((r = get_uint(lim, "import_seconds", 86400, &v, err, errlen)) < 0) goto out;
    if (r) c->import_seconds = v > 0 ? (uint32_t)v : c->import_seconds;
    if ((r = get_uint(lim, "import_workers", 1024, &v, err, errlen)) < 0) goto out;
    if (r) c->import_workers = v > 0 ? (uint32_t)v : c->import_workers;
  }
  const cJSON *sessions = cJSON_GetObjectItemCaseSensitive(root, "sessions");
  if (sessions) {
    if (!cJSON_IsArray(sessions)) {
      snprintf(err, errlen, "\"sessions\" must be an array");
      goto out;
    }
    const cJSON *s;
    cJSON_ArrayForEach(s, sessions) {
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "session");
      const cJSON *mesh_path = cJSON_GetObjectItemCaseSensitive(s, "mesh");
      if (!cJSON_IsString(name) || !cJSON_IsString(mesh_path) || !name->valuestring[0] ||
          strlen(name->valuestring) > PROTO_MAX_NAME) {
        snprintf(err, errlen, "each entry of \"sessions\" needs \"session\" (a name of 1 to %d bytes) and "
                 "\"mesh\" strings", PROTO_MAX_NAME);
        goto out;
      }
      if (srv_config_add_session(c, name->valuestring, mesh_path->valuestring)) {
        snprintf(err, errlen, "out of memory");
        goto out;
      }
    }
  }
  rc = 0;
out:
  cJSON_Delete(root);
  return rc;
}
