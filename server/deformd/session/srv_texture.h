/*
 * srv_texture.h — a session's materials and images on the wire: the TEXTURE frames (capability
 * "texture", docs/protocol.md §17) encoded once per session and sent once per join.
 */
#ifndef DEFORMD_SRV_TEXTURE_H
#define DEFORMD_SRV_TEXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "srv_session.h"

/* Encodes s's TEXTURE frames (MATERIALS, then one IMAGE per image) into s->textures: MATERIALS
 * even for a mesh without colours or images. An image over the frame limit travels halved until it
 * fits. Any thread (reads only the immutable mesh). Returns 0 or MESH_ENOMEM. */
int srv_texture_encode(srv_session *s);
/* Queues s's TEXTURE frames on `c` when it was granted "texture" (after its SNAPSHOT). */
void srv_texture_send(const srv_session *s, struct srv_conn *c);
/* Their bytes, headers included (0: none). */
size_t srv_texture_bytes(const srv_session *s);
void srv_texture_fini(srv_session *s);

#endif
