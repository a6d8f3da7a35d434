/*
 * vw_open.h — deform-view --open FILE: upload a local mesh and open a session on it.
 *
 * DOES NOT draw: it runs before the window opens, over the server's JSON-RPC port.
 */
#ifndef DEFORMD_VW_OPEN_H
#define DEFORMD_VW_OPEN_H

#include <stddef.h>

typedef struct vw_open_opts {
  const char *file;     /* the local mesh file */
  char host[256];       /* the JSON-RPC port's address */
  int port;
  const char *token;    /* or NULL */
  int tls;              /* TLS, verifying the server's certificate */
  const char *tls_ca;   /* ... against these CAs (NULL: the system's) */
} vw_open_opts;

/* Uploads o->file to the server's meshes/ (mesh.upload) and creates a session on it, named
 * after the file; its name is written into `session`. Returns 0 or a CLIENT_E* code with a
 * reason in err. Blocking (the window is not open yet). */
int vw_open_file(const vw_open_opts *o, char *session, size_t session_len, char *err, size_t errlen);

#endif
