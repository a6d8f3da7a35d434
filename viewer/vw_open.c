/*
 * vw_open.c — deform-view --open FILE: a local mesh file uploaded to the server (mesh.upload,
 * into its meshes/) and a session opened on it (session.create), over the JSON-RPC port, before
 * the window opens. The session is named after the file (its name without the extension,
 * "-2", "-3", … when that session exists already).
 *
 * It needs a token that may create sessions (admin) on a server with tokens, and a server with
 * a data directory (uploads are files).
 *
 * DOES NOT draw or keep a connection: it returns the session's name for vw_net to join.
 */
#include "vw_open.h"

#include <stdio.h>
#include <string.h>

#include "client.h"

/* "a/b/head.glb" -> "head": the session's name (characters a session name may hold). */
static void session_name(const char *file, char *out, size_t len) {
  const char *slash = strrchr(file, '/');
  const char *base = slash ? slash + 1 : file;
  const char *dot = strrchr(base, '.');
  size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  if (n >= len) n = len - 1;
  for (size_t i = 0; i < n; i++) out[i] = (unsigned char)base[i] < 0x20 ? '_' : base[i];
  out[n] = '\0';
}

static int call(client_conn *c, const char *method, cJSON *params, cJSON **result, char *err, size_t errlen,
                int *code) {
  cJSON *error = NULL;
  int rc = client_rpc(c, method, params, 600000, result, &error);
  cJSON_Delete(params);
  *code = 0;
  if (rc == CLIENT_ERPC) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(error, "message");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(error, "code");
    *code = cJSON_IsNumber(k) ? k->valueint : 0;
    snprintf(err, errlen, "%s: %s", method, cJSON_IsString(m) ? m->valuestring : "refused");
  } else if (rc) {
    snprintf(err, errlen, "%s: %s", method, client_strerror(rc));
  }
  cJSON_Delete(error);
  return rc;
}

int vw_open_file(const vw_open_opts *o, char *session, size_t session_len, char *err, size_t errlen) {
  client_conn c;
  int rc = client_connect(&c, o->host, o->port, err, errlen);
  if (rc) return rc;
  if (o->tls && (rc = client_tls_start(&c, o->host, o->tls_ca, 30000, err, errlen)) != 0) goto out;
  cJSON *r = NULL;
  int code;
  if (o->token) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "token", o->token);
    if ((rc = call(&c, "auth", p, &r, err, errlen, &code)) != 0) goto out;
    cJSON_Delete(r);
  }
  const char *slash = strrchr(o->file, '/');
  const char *name = slash ? slash + 1 : o->file;
  cJSON *last = NULL, *error = NULL;
  if ((rc = client_upload_file(&c, o->file, name, &last, &error, err, errlen)) != 0) {
    char why[512];
    snprintf(why, sizeof(why), "%s", err);
    snprintf(err, errlen, "upload of %s: %s", o->file, why);
    cJSON_Delete(error);
    goto out;
  }
  cJSON_Delete(last);
  char base[200];
  session_name(o->file, base, sizeof(base));
  for (int k = 1; k <= 100; k++) {
    if (k == 1) snprintf(session, session_len, "%s", base);
    else snprintf(session, session_len, "%s-%d", base, k);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "session", session);
    cJSON_AddStringToObject(p, "mesh", name);
    rc = call(&c, "session.create", p, &r, err, errlen, &code);
    cJSON_Delete(r);
    if (rc != CLIENT_ERPC || code != -32005) break; /* -32005: that name is taken, try the next */
  }
out:
  client_close(&c);
  return rc;
}
