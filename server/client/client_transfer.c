/*
 * client_transfer.c — files over a JSON-RPC connection: a local mesh file uploaded in chunks
 * (mesh.upload), a session's shape downloaded in chunks (session.export without a path) into
 * a local file. deformctl upload/download and deform-view --open use them.
 *
 * Chunks are base64 through OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock (whose padding bytes
 * come back as zeros and are taken off here). A download asks for the version its first
 * answer named, so every chunk is of one file even while the session changes, and is written
 * to a temporary name renamed into place at the end.
 *
 * DOES NOT know what a mesh file holds.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

#define CHUNK (8u << 20) /* raw bytes per request or answer: ~11 MB of base64 per line */

static int rpc_failed(int rc, cJSON *error, cJSON **error_out, char *err, size_t errlen) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(error, "message");
  snprintf(err, errlen, "%s", rc == CLIENT_ERPC && cJSON_IsString(m) ? m->valuestring : client_strerror(rc));
  if (error_out) *error_out = error;
  else cJSON_Delete(error);
  return rc;
}

int client_upload_file(client_conn *c, const char *path, const char *name, cJSON **last, cJSON **error, char *err,
                       size_t errlen) {
  *last = NULL;
  if (error) *error = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return CLIENT_EINVAL;
  }
  uint8_t *raw = malloc(CHUNK);
  char *b64 = malloc(4 * (CHUNK / 3 + 1) + 1);
  int rc = raw && b64 ? 0 : CLIENT_ENOMEM;
  uint64_t offset = 0;
  for (int final = 0; rc == 0 && !final;) {
    size_t n = fread(raw, 1, CHUNK, f);
    if (ferror(f)) {
      snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
      rc = CLIENT_EINVAL;
      break;
    }
    /* The last chunk is the one that leaves the file at its end (a next read gives nothing). */
    int ch = fgetc(f);
    final = ch == EOF;
    if (!final) ungetc(ch, f);
    EVP_EncodeBlock((unsigned char *)b64, raw, (int)n);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "name", name);
    cJSON_AddStringToObject(p, "data", b64);
    cJSON_AddNumberToObject(p, "offset", (double)offset);
    cJSON_AddBoolToObject(p, "final", final);
    cJSON *result = NULL, *e = NULL;
    rc = client_rpc(c, "mesh.upload", p, 600000, &result, &e);
    cJSON_Delete(p);
    if (rc) {
      rpc_failed(rc, e, error, err, errlen);
      break;
    }
    offset += n;
    cJSON_Delete(*last);
    *last = result;
  }
  free(raw);
  free(b64);
  fclose(f);
  return rc;
}

int client_download_file(client_conn *c, const char *session, const char *path, int64_t version, cJSON **info,
                         cJSON **error, char *err, size_t errlen) {
  *info = NULL;
  if (error) *error = NULL;
  size_t k = strlen(path);
  const char *format = k > 4 && strcmp(path + k - 4, ".obj") == 0 ? "obj" : k > 4 && strcmp(path + k - 4, ".glb") == 0
                                                                                 ? "glb"
                                                                                 : NULL;
  if (!format) {
    snprintf(err, errlen, "%s: the file name must end in .obj or .glb", path);
    return CLIENT_EINVAL;
  }
  char tmp[4200];
  snprintf(tmp, sizeof(tmp), "%s.part%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    return CLIENT_EINVAL;
  }
  uint8_t *raw = NULL;
  uint64_t offset = 0, total = 0;
  int rc = 0;
  do {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "session", session);
    cJSON_AddStringToObject(p, "format", format);
    cJSON_AddNumberToObject(p, "offset", (double)offset);
    cJSON_AddNumberToObject(p, "max_bytes", CHUNK);
    if (version >= 0) cJSON_AddNumberToObject(p, "version", (double)version);
    cJSON *r = NULL, *e = NULL;
    rc = client_rpc(c, "session.export", p, 600000, &r, &e);
    cJSON_Delete(p);
    if (rc) {
      rpc_failed(rc, e, error, err, errlen);
      break;
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(r, "data"), *t = cJSON_GetObjectItemCaseSensitive(r, "total");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "version");
    size_t n64 = cJSON_IsString(data) ? strlen(data->valuestring) : 1;
    if (!cJSON_IsNumber(t) || !cJSON_IsNumber(v) || n64 % 4) {
      snprintf(err, errlen, "the server's answer is not a download chunk");
      cJSON_Delete(r);
      rc = CLIENT_EMALFORMED;
      break;
    }
    total = (uint64_t)t->valuedouble;
    version = (int64_t)v->valuedouble; /* every later chunk of this very file */
    free(raw);
    raw = malloc(n64 / 4 * 3 + 1);
    int got = raw ? EVP_DecodeBlock(raw, (const unsigned char *)data->valuestring, (int)n64) : -1;
    if (got >= 0) got -= n64 >= 1 && data->valuestring[n64 - 1] == '=' ? (n64 >= 2 && data->valuestring[n64 - 2] == '=' ? 2 : 1) : 0;
    cJSON_Delete(r);
    if (got < 0 || (got == 0 && offset < total) || offset + (uint64_t)got > total) {
      snprintf(err, errlen, "the server sent a chunk that does not decode or does not fit");
      rc = CLIENT_EMALFORMED;
      break;
    }
    if (fwrite(raw, 1, (size_t)got, f) != (size_t)got) {
      snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
      rc = CLIENT_EINVAL;
      break;
    }
    offset += (uint64_t)got;
  } while (offset < total);
  free(raw);
  if (fclose(f) != 0 && rc == 0) {
    snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    rc = CLIENT_EINVAL;
  }
  if (rc == 0 && rename(tmp, path) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    rc = CLIENT_EINVAL;
  }
  if (rc) {
    unlink(tmp);
    return rc;
  }
  *info = cJSON_CreateObject();
  cJSON_AddStringToObject(*info, "session", session);
  cJSON_AddStringToObject(*info, "file", path);
  cJSON_AddNumberToObject(*info, "bytes", (double)total);
  cJSON_AddNumberToObject(*info, "version", (double)version);
  cJSON_AddStringToObject(*info, "format", format);
  return 0;
}
