/*
 * fuzz_config.c — libFuzzer target: the config file loader (srv_config_load_text), over the
 * defaults, as deformd reads a --config file.
 *
 * What it checks besides memory safety: a load either fails with a reason or leaves settings a
 * server can start with (sessions with names of 1 to 255 bytes and no NUL, a token no longer
 * than 255 bytes, ports within 0-65535).
 *
 * DOES NOT start a server or read files (the text is the input).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "srv_config.h"
#include "srv_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly the input: no terminator to lean on. */
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  srv_config c;
  srv_config_init(&c);
  char err[256] = "";
  int rc = srv_config_load_text(&c, text, size, err, sizeof(err));
  if (rc != 0 && err[0] == '\0') abort(); /* a refusal always says why */
  if (rc == 0) {
    if (c.stream_port < 0 || c.stream_port > 65535 || c.rpc_port < 0 || c.rpc_port > 65535) abort();
    if (c.admin_token && strlen(c.admin_token) > PROTO_MAX_NAME) abort();
    for (uint32_t i = 0; i < c.session_count; i++) {
      size_t n = strlen(c.sessions[i].name);
      if (n == 0 || n > PROTO_MAX_NAME) abort();
    }
  }
  srv_config_fini(&c);
  free(text);
  return 0;
}
