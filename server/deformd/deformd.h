/*
 * deformd.h — the service as a whole: start a server on a loop, stop it, free it (srv_server.c).
 */
#ifndef DEFORMD_DEFORMD_H
#define DEFORMD_DEFORMD_H

#include <stddef.h>
#include <uv.h>
#include <stdint.h>

#include "srv_config.h"
#include "srv_server.h"

int srv_server_start(srv_server *s, uv_loop_t *loop, const srv_config *cfg);
/* Stops accepting, says BYE to every client, closes everything; the loop then ends. */
void srv_server_stop(srv_server *s, const char *why);
void srv_server_fini(srv_server *s);

#endif
