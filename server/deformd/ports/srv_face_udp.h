/*
 * srv_face_udp.h — the face inputs' UDP sockets (--vmc-port, --livelink-port): bound on the loop,
 * loopback unless told otherwise, other sources only from the config's "face_allow". UDP proves
 * nothing about a sender, so these inputs are unauthenticated (docs/operations.md).
 *
 * DOES NOT map or apply anything (session/srv_face.c does).
 */
#ifndef DEFORMD_SRV_FACE_UDP_H
#define DEFORMD_SRV_FACE_UDP_H

#include <stddef.h>

#include "srv_server.h"

/* Binds the inputs the settings turn on and adds them to srv->face. Returns 0 or a negative
 * libuv code with a reason. */
int srv_face_udp_start(srv_server *srv, char *err, size_t errlen);
/* Closes the sockets (the loop frees them). */
void srv_face_udp_stop(srv_server *srv);
/* The port an input bound (kind: SRV_FACE_VMC or SRV_FACE_LIVELINK), or -1 when it is off. */
int srv_face_udp_port(const srv_server *srv, int kind);

/* One datagram of each kind, decoded into the input (the sockets' callback; tests and the fuzz
 * target call them directly). Returns 0 or the counter it was dropped under. */
struct srv_face_input;
int srv_face_udp_vmc(struct srv_face_input *in, const unsigned char *p, size_t n);
int srv_face_udp_livelink(struct srv_face_input *in, const unsigned char *p, size_t n);

#endif
