/*
 * fuzz_face.c — libFuzzer target: the face inputs' decoders (proto_osc_walk, proto_livelink_decode)
 * on one datagram, as deformd's UDP inputs read it.
 *
 * What it checks besides memory safety: a walk returns 0 or one of the codes proto_osc.h names,
 * every message it passes has an address starting with '/' and at most PROTO_OSC_MAX_ARGS
 * arguments with the types their tags say; a Live Link datagram decodes only at exactly the size
 * its name length gives.
 *
 * DOES NOT start a server.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_livelink.h"
#include "proto_osc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check(void *arg, const proto_osc_msg *m) {
  (void)arg;
  if (m->address[0] != '/' || m->argc > PROTO_OSC_MAX_ARGS || strlen(m->types) != m->argc) abort();
  for (uint32_t i = 0; i < m->argc; i++)
    if (m->args[i].type != m->types[i] || (m->args[i].type == 's' && strlen(m->args[i].s) != m->args[i].len)) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1); /* exactly the input: a read past it is a finding */
  if (!copy) return 0;
  memcpy(copy, data, size);
  int rc = proto_osc_walk(copy, size, check, NULL);
  if (rc != 0 && rc != PROTO_ETRUNCATED && rc != PROTO_EINVAL && rc != PROTO_ETYPE && rc != PROTO_ETOOBIG &&
      rc != PROTO_ETRAILING)
    abort();
  proto_livelink_frame f;
  if (proto_livelink_decode(copy, size, &f) == 0 && size != PROTO_LIVELINK_SIZE(f.subject_len)) abort();
  free(copy);
  return 0;
}
