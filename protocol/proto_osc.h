/*
 * proto_osc.h — OSC 1.0 packets as VMC senders write them (VSeeFace, iFacialMocap bridges, Warudo):
 * messages and bundles, walked message by message, every size and count checked against the
 * bytes present. The face input (server/deformd/ports/srv_face_udp.c) reads VMC's
 * /VMC/Ext/Blend/Val (a name and a float) and /VMC/Ext/Blend/Apply from it.
 *
 * OSC 1.0 (opensoundcontrol.org, spec 1.0): a packet is a message or a bundle; a message is an
 * address (an OSC string: bytes, NUL, padded with NULs to a multiple of 4), a type tag string
 * (',' then one character per argument, an OSC string too) and the arguments, each big-endian
 * and 4-byte aligned; a bundle is "#bundle", an 8-byte time tag and elements, each a big-endian
 * int32 size and that many bytes of a message or a bundle.
 *
 * DOES NOT do I/O, allocate, or know what VMC's addresses mean beyond the two helpers at the end.
 */
#ifndef DEFORMD_PROTO_OSC_H
#define DEFORMD_PROTO_OSC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_OSC_MAX_ARGS 16   /* arguments of one message (VMC's longest, a bone, has 8) */
#define PROTO_OSC_MAX_DEPTH 8   /* bundles inside bundles */

typedef struct proto_osc_arg {
  char type;         /* 'i' 'f' 's' 'b' 'h' 'd' 't' 'T' 'F' 'N' 'I' */
  int32_t i;         /* 'i' */
  float f;           /* 'f' (NaN and Inf are passed on: the reader decides) */
  double d;          /* 'd' */
  int64_t h;         /* 'h', 't' */
  const char *s;     /* 's' (NUL-terminated inside the packet), 'b' (the blob's bytes) */
  uint32_t len;      /* 's': strlen; 'b': bytes */
} proto_osc_arg;

typedef struct proto_osc_msg {
  const char *address; /* NUL-terminated inside the packet */
  const char *types;   /* the type tags after ',' (NUL-terminated inside the packet) */
  uint32_t argc;
  proto_osc_arg args[PROTO_OSC_MAX_ARGS];
} proto_osc_msg;

/* Called once per message, in packet order; nonzero stops the walk (its value is returned). */
typedef int (*proto_osc_cb)(void *arg, const proto_osc_msg *m);

/* Walks the packet p[0..n): calls cb for each message of a message or a bundle (nested up to
 * PROTO_OSC_MAX_DEPTH). Returns 0; the callback's nonzero value; or PROTO_ETRUNCATED (a string,
 * an argument or an element runs past its bytes), PROTO_EINVAL (an address not starting with
 * '/', a type tag string without ',', a string without its NUL or padding, an element size not
 * a multiple of 4), PROTO_ETYPE (a type tag OSC 1.0 does not define), PROTO_ETOOBIG (more than
 * PROTO_OSC_MAX_ARGS arguments, bundles nested deeper than PROTO_OSC_MAX_DEPTH) or
 * PROTO_ETRAILING (bytes after a message's last argument). Messages before the fault were
 * already passed to cb: a caller that needs all or nothing walks twice (once with a counting
 * callback). */
int proto_osc_walk(const uint8_t *p, size_t n, proto_osc_cb cb, void *arg);

/* VMC (protocol.vmc.info, "VMC Protocol specification", Ext/Blend): */
#define PROTO_VMC_BLEND_VAL "/VMC/Ext/Blend/Val"     /* ,sf  name value */
#define PROTO_VMC_BLEND_APPLY "/VMC/Ext/Blend/Apply" /* no arguments: the values so far are one frame */

#ifdef __cplusplus
}
#endif
#endif
