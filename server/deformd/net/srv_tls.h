/*
 * srv_tls.h — TLS for one connection through OpenSSL memory BIOs, a layer below srv_conn.
 *
 * DOES NOT touch sockets: the connection feeds ciphertext in and takes ciphertext out.
 */
#ifndef DEFORMD_SRV_TLS_H
#define DEFORMD_SRV_TLS_H

#include <stddef.h>
#include <stdint.h>

typedef struct srv_tls srv_tls;
typedef struct srv_tls_ctx srv_tls_ctx;

typedef struct srv_tls_ctx srv_tls_ctx;
typedef struct srv_tls srv_tls;

/* The server's certificate (chain, PEM) and key. Returns 0 or SRV_EPARAMS / SRV_EINTERNAL with
 * a reason. */
int srv_tls_ctx_create(const char *cert_file, const char *key_file, srv_tls_ctx **out, char *err, size_t errlen);
void srv_tls_ctx_destroy(srv_tls_ctx *t);
/* One accepted connection's TLS (server side). NULL when out of memory. */
srv_tls *srv_tls_create(srv_tls_ctx *ctx);
void srv_tls_destroy(srv_tls *t);
/* Ciphertext from the peer (copied), advancing the handshake. 0, or SRV_EPARAMS (the peer
 * does not speak TLS, or failed) with srv_tls_error. */
int srv_tls_feed(srv_tls *t, const uint8_t *in, size_t n);
/* Plaintext decrypted so far, up to cap bytes into out (*got; 0 when none yet). 0,
 * SRV_ESHUTDOWN (the peer said goodbye) or SRV_EPARAMS. */
int srv_tls_read(srv_tls *t, uint8_t *out, size_t cap, size_t *got);
/* Plaintext to send (copied): encrypted now, or once the handshake is done. 0 or an SRV_E*. */
int srv_tls_write(srv_tls *t, const void *data, size_t n);
/* The ciphertext waiting to be sent: *out malloc'ed (the caller frees it), NULL when none. */
int srv_tls_take_output(srv_tls *t, uint8_t **out, size_t *len);
/* Queues TLS's close_notify (sent with the next take_output). */
void srv_tls_close_notify(srv_tls *t);
const char *srv_tls_error(const srv_tls *t);

#endif
