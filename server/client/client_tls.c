/*
 * client_tls.c — TLS for the blocking client (deformctl, deform-bench, the viewer, the tests):
 * OpenSSL 3 on the connection's socket, the server's certificate verified against a CA file
 * (--tls-ca) or the system's, and its name or address against the host connected to.
 *
 * Once TLS starts the socket is non-blocking: reads and writes go through SSL and wait with
 * poll() as SSL asks (WANT_READ / WANT_WRITE), so timeouts keep working even when only part of
 * a record has arrived, and a poller (vw_net.c) can run the handshake one step per frame.
 *
 * DOES NOT connect or frame anything (client.c does) and keeps no state beyond the connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

typedef struct tls_state {
  SSL_CTX *ctx;
  SSL *ssl;
} tls_state;

static void reason(char *err, size_t errlen, const char *what) {
  unsigned long e = ERR_get_error();
  char buf[200] = "";
  if (e) ERR_error_string_n(e, buf, sizeof(buf));
  snprintf(err, errlen, "TLS: %s%s%s", what, buf[0] ? ": " : "", buf);
  ERR_clear_error();
}

void client__tls_free(client_conn *c) {
  tls_state *t = c->tls;
  if (!t) return;
  SSL_free(t->ssl);
  SSL_CTX_free(t->ctx);
  free(t);
  c->tls = NULL;
}

int client_tls_begin(client_conn *c, const char *host, const char *ca_file, char *err, size_t errlen) {
  tls_state *t = calloc(1, sizeof(*t));
  if (!t) return CLIENT_ENOMEM;
  c->tls = t;
  t->ctx = SSL_CTX_new(TLS_client_method());
  if (!t->ctx) {
    reason(err, errlen, "cannot make a context");
    return CLIENT_ETLS;
  }
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
  int loaded = ca_file ? SSL_CTX_load_verify_locations(t->ctx, ca_file, NULL) : SSL_CTX_set_default_verify_paths(t->ctx);
  if (loaded != 1) {
    reason(err, errlen, ca_file ? "cannot read the CA file" : "cannot load the system's CAs");
    return CLIENT_ETLS;
  }
  /* vw_net keeps unsent bytes in a buffer it may move: a retried write may come from elsewhere. */
  SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  t->ssl = SSL_new(t->ctx);
  if (!t->ssl || SSL_set_fd(t->ssl, c->fd) != 1) {
    reason(err, errlen, "cannot start");
    return CLIENT_ETLS;
  }
  /* The certificate must name what we connected to: an address as an IP SAN, a name as a DNS
   * SAN (and the name goes in SNI). */
  X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
  if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1) {
    ERR_clear_error();
    SSL_set_tlsext_host_name(t->ssl, host);
    if (SSL_set1_host(t->ssl, host) != 1) {
      reason(err, errlen, "bad host name");
      return CLIENT_ETLS;
    }
  }
  SSL_set_connect_state(t->ssl);
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  c->tls_wait = POLLOUT;
  return 0;
}

int client_tls_continue(client_conn *c, int timeout_ms, char *err, size_t errlen) {
  tls_state *t = c->tls;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
      c->tls_wait = 0;
      return 0;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      long v = SSL_get_verify_result(t->ssl);
      if (v != X509_V_OK) {
        snprintf(err, errlen, "TLS: the server's certificate is not trusted: %s", X509_verify_cert_error_string(v));
        ERR_clear_error();
      } else {
        reason(err, errlen, e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN ? "the server closed the connection "
                                                                                  "(does it speak TLS?)"
                                                                                : "handshake failed");
      }
      return CLIENT_ETLS;
    }
    c->tls_wait = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    int wait = -1;
    if (timeout_ms >= 0) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      long spent = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
      if (spent >= timeout_ms) return CLIENT_EINPROGRESS;
      wait = timeout_ms - (int)spent;
    }
    struct pollfd p = {c->fd, c->tls_wait, 0};
    if (poll(&p, 1, wait) < 0 && errno != EINTR) {
      snprintf(err, errlen, "TLS: %s", strerror(errno));
      return CLIENT_EIO;
    }
  }
}

int client_tls_start(client_conn *c, const char *host, const char *ca_file, int timeout_ms, char *err, size_t errlen) {
  int rc = client_tls_begin(c, host, ca_file, err, errlen);
  if (rc == 0) rc = client_tls_continue(c, timeout_ms, err, errlen);
  if (rc == CLIENT_EINPROGRESS) {
    snprintf(err, errlen, "TLS: no handshake within %d ms", timeout_ms);
    rc = CLIENT_ETIMEDOUT;
  }
  return rc;
}

/* What an SSL_read or SSL_write result means: r > 0 bytes, 0 when SSL must wait first (then
 * c->tls_wait says for what), or a CLIENT_E* code (the peer's goodbye is CLIENT_ECLOSED). */
static long io_result(client_conn *c, SSL *ssl, int r) {
  if (r > 0) return r;
  int e = SSL_get_error(ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    c->tls_wait = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    return 0;
  }
  ERR_clear_error();
  return e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) ? CLIENT_ECLOSED : CLIENT_EIO;
}

/* Reads what SSL has: > 0 bytes, 0 when it must wait (c->tls_wait says for what), or a
 * CLIENT_E* code. */
long client__tls_read(client_conn *c, void *buf, size_t cap) {
  tls_state *t = c->tls;
  return io_result(c, t->ssl, SSL_read(t->ssl, buf, cap > (1u << 30) ? 1 << 30 : (int)cap));
}

/* Writes what SSL takes now: >= 0 bytes (0: it must wait, see c->tls_wait), or a CLIENT_E*. */
long client__tls_write(client_conn *c, const void *data, size_t n) {
  tls_state *t = c->tls;
  if (n == 0) return 0;
  return io_result(c, t->ssl, SSL_write(t->ssl, data, n > (1u << 30) ? 1 << 30 : (int)n));
}

int client_tls_pending(const client_conn *c) {
  const tls_state *t = c->tls;
  return t && SSL_pending(t->ssl) > 0;
}
