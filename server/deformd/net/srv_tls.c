/*
 * srv_tls.c — TLS as a transport layer: OpenSSL 3 through memory BIOs, so that the loop
 * thread only ever moves bytes between the socket and SSL's buffers and never waits on a
 * handshake (invariant 4 of docs/architecture.md; a libuv stream delivers what arrived; SSL
 * consumes it and says what to send).
 *
 * A connection (srv_conn.c) with a srv_tls feeds every ciphertext byte it reads to
 * srv_tls_feed, reads plaintext out with srv_tls_read for its transport, hands plaintext to
 * srv_tls_write and sends what srv_tls_take_output gives. The plaintext of a frame encoded once
 * for every viewer is still encoded once; only its encryption is per connection. What is
 * written before the handshake finishes (a refusal sent at accept) waits here and is encrypted
 * once it has.
 *
 * Costs on the loop: one handshake (a signature with the server's key: ~0.1 ms with an EC
 * P-256 key, ~1 ms with RSA-2048 on this kind of machine) and AES-GCM over every byte sent.
 *
 * DOES NOT touch sockets or know what the bytes mean: srv_conn.c moves them, the transports
 * parse them.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_tls.h"
#include "srv_error.h"

struct srv_tls_ctx {
  SSL_CTX *ctx;
};

struct srv_tls {
  SSL *ssl;
  BIO *in, *out;   /* ciphertext from the peer / for the peer (owned by ssl) */
  uint8_t *pending; /* plaintext written before the handshake finished */
  size_t pending_len;
  int failed;
  char why[160];
};

/* The newest OpenSSL error as text, or `fallback`. Clears the thread's error queue. */
static void ssl_reason(char *out, size_t len, const char *fallback) {
  unsigned long e = ERR_get_error();
  if (e) ERR_error_string_n(e, out, len);
  else snprintf(out, len, "%s", fallback);
  ERR_clear_error();
}

int srv_tls_ctx_create(const char *cert_file, const char *key_file, srv_tls_ctx **out, char *err, size_t errlen) {
  *out = NULL;
  srv_tls_ctx *t = calloc(1, sizeof(*t));
  if (!t) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  char why[256];
  t->ctx = SSL_CTX_new(TLS_server_method());
  if (!t->ctx) {
    ssl_reason(why, sizeof(why), "cannot make a TLS context");
    snprintf(err, errlen, "TLS: %s", why);
    free(t);
    return SRV_EINTERNAL;
  }
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  /* A peer asking to renegotiate again and again would cost a handshake each time. */
  SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
    ssl_reason(why, sizeof(why), "unreadable");
    snprintf(err, errlen, "--tls-cert %s: %s", cert_file, why);
    goto fail;
  }
  if (SSL_CTX_use_PrivateKey_file(t->ctx, key_file, SSL_FILETYPE_PEM) != 1) {
    ssl_reason(why, sizeof(why), "unreadable");
    snprintf(err, errlen, "--tls-key %s: %s", key_file, why);
    goto fail;
  }
  if (SSL_CTX_check_private_key(t->ctx) != 1) {
    snprintf(err, errlen, "--tls-key %s does not belong to the certificate in --tls-cert %s", key_file, cert_file);
    ERR_clear_error();
    goto fail;
  }
  *out = t;
  return 0;
fail:
  SSL_CTX_free(t->ctx);
  free(t);
  return SRV_EPARAMS;
}

void srv_tls_ctx_destroy(srv_tls_ctx *t) {
  if (!t) return;
  SSL_CTX_free(t->ctx);
  free(t);
}

srv_tls *srv_tls_create(srv_tls_ctx *ctx) {
  srv_tls *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->ssl = SSL_new(ctx->ctx);
  t->in = BIO_new(BIO_s_mem());
  t->out = BIO_new(BIO_s_mem());
  if (!t->ssl || !t->in || !t->out) {
    SSL_free(t->ssl);
    BIO_free(t->in);
    BIO_free(t->out);
    free(t);
    ERR_clear_error();
    return NULL;
  }
  /* An empty memory BIO reads as "try again", not as the end of the stream. */
  BIO_set_mem_eof_return(t->in, -1);
  SSL_set_bio(t->ssl, t->in, t->out);
  SSL_set_accept_state(t->ssl);
  return t;
}

void srv_tls_destroy(srv_tls *t) {
  if (!t) return;
  SSL_free(t->ssl); /* frees both BIOs */
  free(t->pending);
  free(t);
}

const char *srv_tls_error(const srv_tls *t) { return t->why[0] ? t->why : "TLS failed"; }

static int fail(srv_tls *t, const char *what) {
  char why[128];
  ssl_reason(why, sizeof(why), what);
  snprintf(t->why, sizeof(t->why), "TLS: %s", why);
  t->failed = 1;
  return SRV_EPARAMS;
}

/* Encrypts n plaintext bytes into the output BIO (the handshake is finished). */
static int seal(srv_tls *t, const uint8_t *p, size_t n) {
  while (n > 0) {
    int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
    int w = SSL_write(t->ssl, p, chunk);
    if (w <= 0) return fail(t, "cannot encrypt");
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int srv_tls_feed(srv_tls *t, const uint8_t *in, size_t n) {
  if (t->failed) return SRV_EPARAMS;
  while (n > 0) {
    int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
    int w = BIO_write(t->in, in, chunk);
    if (w <= 0) return fail(t, "out of memory");
    in += w;
    n -= (size_t)w;
  }
  if (!SSL_is_init_finished(t->ssl)) {
    int r = SSL_do_handshake(t->ssl);
    if (r != 1) {
      int e = SSL_get_error(t->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
      return fail(t, "handshake failed");
    }
    /* What was written before the handshake goes out now, first. */
    if (t->pending_len) {
      int rc = seal(t, t->pending, t->pending_len);
      free(t->pending);
      t->pending = NULL;
      t->pending_len = 0;
      if (rc) return rc;
    }
  }
  return 0;
}

int srv_tls_read(srv_tls *t, uint8_t *out, size_t cap, size_t *got) {
  *got = 0;
  if (t->failed) return SRV_EPARAMS;
  if (!SSL_is_init_finished(t->ssl) || cap == 0) return 0;
  while (*got < cap) {
    size_t want = cap - *got;
    int r = SSL_read(t->ssl, out + *got, want > (1u << 30) ? 1 << 30 : (int)want);
    if (r > 0) {
      *got += (size_t)r;
      continue;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    if (e == SSL_ERROR_ZERO_RETURN) return SRV_ESHUTDOWN; /* the peer's close_notify */
    return fail(t, "cannot decrypt");
  }
  return 0;
}

int srv_tls_write(srv_tls *t, const void *data, size_t n) {
  if (t->failed) return SRV_EPARAMS;
  if (SSL_is_init_finished(t->ssl)) return seal(t, data, n);
  uint8_t *g = realloc(t->pending, t->pending_len + n + 1);
  if (!g) return SRV_EINTERNAL;
  t->pending = g;
  memcpy(t->pending + t->pending_len, data, n);
  t->pending_len += n;
  return 0;
}

int srv_tls_take_output(srv_tls *t, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  size_t n = BIO_ctrl_pending(t->out);
  if (n == 0) return 0;
  uint8_t *b = malloc(n);
  if (!b) return SRV_EINTERNAL;
  int r = BIO_read(t->out, b, (int)n);
  if (r <= 0) {
    free(b);
    return 0;
  }
  *out = b;
  *len = (size_t)r;
  return 0;
}

void srv_tls_close_notify(srv_tls *t) {
  if (!t->failed && SSL_is_init_finished(t->ssl)) SSL_shutdown(t->ssl);
  ERR_clear_error();
}
