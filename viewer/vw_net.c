/*
 * vw_net.c — the viewer's connection: non-blocking connect, HELLO/WELCOME/SNAPSHOT, frames into
 * the client_replica, PING/PONG, reconnects with backoff, and EDIT frames (see vw_net.h).
 *
 * Everything happens inside vw_net_poll and the edit calls, on the render thread; the socket
 * is only ever waited on by poll() for at most the caller's `wait_ms`. Reads go through
 * client_read_frame with a zero timeout (it polls before every recv); writes go through an
 * outgoing queue sent without waiting (client_send_nowait), so a server that stops reading us
 * cannot stall a frame. With TLS (vw_net_set_tls) the handshake runs one step per poll too
 * (client_tls_continue with no wait) between the TCP connect and HELLO.
 *
 * DOES NOT touch GL, and DOES NOT interpret the replica beyond telling what changed.
 */
#include "vw_net.h"
#include "proto_caps.h"
#include "proto_presence.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

enum {
  PHASE_IDLE = 0,    /* no socket: waiting for retry_at_ms */
  PHASE_TCP = 1,     /* non-blocking connect in progress */
  PHASE_TLS = 2,     /* TLS handshake in progress */
  PHASE_WELCOME = 3, /* HELLO queued, waiting for WELCOME */
  PHASE_SNAPSHOT = 4,/* WELCOME read, waiting for SNAPSHOT */
  PHASE_LIVE = 5
};

#define VW_NET_BACKOFF_FIRST_MS 250u
#define VW_NET_BACKOFF_MAX_MS 8000u
#define VW_NET_CONNECT_TIMEOUT_MS 5000u  /* TCP handshake, and then the TLS one */
#define VW_NET_SILENCE_MS 10000u         /* nothing heard while waiting for WELCOME/SNAPSHOT/PONG */
#define VW_NET_PING_MS 1000u
#define VW_NET_MAX_FRAMES 1024u          /* frames applied per poll... */
#define VW_NET_MAX_FRAMES_MORE 131072u   /* ...unless an update (MORE) is still incomplete */
#define VW_NET_MAX_QUEUED (16u << 20)    /* unsent bytes over which edits are refused */

uint64_t vw_net_now_ms(void) { return client_now_ns() / 1000000ull; }

const char *vw_net_state_name(vw_net_state s) {
  switch (s) {
    case VW_NET_CONNECTING: return "connecting";
    case VW_NET_LIVE: return "live";
    case VW_NET_DOWN: return "down";
  }
  return "?";
}

static const char *error_name(uint16_t code) {
  switch (code) {
    case PROTO_ERR_MALFORMED: return "MALFORMED";
    case PROTO_ERR_UNKNOWN_SESSION: return "UNKNOWN_SESSION";
    case PROTO_ERR_FORBIDDEN: return "FORBIDDEN";
    case PROTO_ERR_INVALID: return "INVALID";
    case PROTO_ERR_TOO_SLOW: return "TOO_SLOW";
    case PROTO_ERR_SHUTDOWN: return "SHUTDOWN";
    case PROTO_ERR_SESSION_CLOSED: return "SESSION_CLOSED";
    case PROTO_ERR_OVERLOADED: return "OVERLOADED";
    case PROTO_ERR_PRIMARY_LOST: return "PRIMARY_LOST";
    case PROTO_ERR_PRIMARY_BACK: return "PRIMARY_BACK";
    case PROTO_ERR_RESYNC: return "RESYNC";
    default: return "ERROR";
  }
}

static void set_error(vw_net *n, uint16_t code, uint32_t request, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_error(vw_net *n, uint16_t code, uint32_t request, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n->last_error, sizeof(n->last_error), fmt, ap);
  va_end(ap);
  n->last_error_code = code;
  n->last_error_request = request;
}

void vw_net_init(vw_net *n, const char *host, int port, const char *session, const char *token,
                 proto_role role) {
  memset(n, 0, sizeof(*n));
  snprintf(n->host, sizeof(n->host), "%s", host);
  n->port = port;
  snprintf(n->session, sizeof(n->session), "%s", session);
  snprintf(n->token, sizeof(n->token), "%s", token ? token : "");
  n->want_role = role;
  n->ask_role = role;
  n->protocol = PROTO_VERSION;
  n->state = VW_NET_CONNECTING;
  n->conn.fd = -1;
  client_replica_init(&n->replica);
  n->next_request = 1;
  n->latency_ms = -1.0;
  proto_buf_init(&n->out);
}

void vw_net_set_tls(vw_net *n, int on, const char *ca_file) {
  n->tls = on;
  snprintf(n->tls_ca, sizeof(n->tls_ca), "%s", ca_file ? ca_file : "");
}

int vw_net_add_address(vw_net *n, const char *host, int port) {
  int cap = (int)(sizeof(n->addresses) / sizeof(n->addresses[0]));
  if (n->address_count == 0) { /* the first: vw_net_init's */
    snprintf(n->addresses[0].host, sizeof(n->addresses[0].host), "%s", n->host);
    n->addresses[0].port = n->port;
    n->address_count = 1;
  }
  if (n->address_count >= cap) return -1;
  snprintf(n->addresses[n->address_count].host, sizeof(n->addresses[0].host), "%s", host);
  n->addresses[n->address_count++].port = port;
  return 0;
}

void vw_net_set_protocol(vw_net *n, int protocol, const proto_hello_opts *opts) {
  n->protocol = protocol == PROTO_VERSION_2 ? PROTO_VERSION_2 : PROTO_VERSION;
  memset(&n->hello, 0, sizeof(n->hello));
  if (opts) n->hello = *opts;
}

/* Writes what the queue holds without waiting. 0 (all or part written), or a CLIENT_E* code. */
static int flush_out(vw_net *n) {
  while (n->out_off < n->out.len) {
    size_t w = 0;
    int rc = client_send_nowait(&n->conn, n->out.data + n->out_off, n->out.len - n->out_off, &w);
    if (rc) return rc;
    if (w == 0) break;
    n->out_off += w;
  }
  if (n->out_off == n->out.len) {
    n->out.len = 0;
    n->out_off = 0;
  } else if (n->out_off > (1u << 20) && n->out_off > n->out.len / 2) { /* drop the written head */
    memmove(n->out.data, n->out.data + n->out_off, n->out.len - n->out_off);
    n->out.len -= n->out_off;
    n->out_off = 0;
  }
  return 0;
}

static void reset_out(vw_net *n) {
  proto_buf_fini(&n->out);
  proto_buf_init(&n->out);
  n->out_off = 0;
}

/* The connection is gone (or never came): close it, keep the replica, and schedule the next
 * attempt. `immediate` retries at once without growing the backoff (a HELLO downgraded to
 * viewer after FORBIDDEN). */
static void lose(vw_net *n, int immediate) {
  uint64_t now = vw_net_now_ms();
  if (n->phase == PHASE_LIVE) n->ask_role = n->want_role; /* a new server may accept the token */
  client_close(&n->conn);
  reset_out(n);
  n->phase = PHASE_IDLE;
  n->state = VW_NET_DOWN;
  n->ping_sent_ns = 0;
  n->in_update = 0;
  n->primary_lost = 0; /* a relay's status is the connection's: the next one says it again */
  if (immediate) {
    n->retry_at_ms = now;
    return;
  }
  if (n->address_count > 1) { /* another node may serve the session: the next one */
    n->address_at = (n->address_at + 1) % n->address_count;
    memcpy(n->host, n->addresses[n->address_at].host, sizeof(n->host)); /* same size, NUL-terminated */
    n->port = n->addresses[n->address_at].port;
  }
  n->backoff_ms = n->backoff_ms == 0 ? VW_NET_BACKOFF_FIRST_MS : n->backoff_ms * 2;
  if (n->backoff_ms > VW_NET_BACKOFF_MAX_MS) n->backoff_ms = VW_NET_BACKOFF_MAX_MS;
  n->retry_at_ms = now + n->backoff_ms;
}

static void enter_phase(vw_net *n, int phase, uint64_t now) {
  n->phase = phase;
  n->phase_ms = now;
  n->heard_ms = now;
  n->heard_buffered = 0;
}

/* TCP is up: queue HELLO and wait for WELCOME. */
static void send_hello(vw_net *n, uint64_t now) {
  proto_hello h = {PROTO_VERSION, (uint8_t)n->ask_role, {n->session, (uint16_t)strlen(n->session)},
                   {n->token, (uint16_t)strlen(n->token)}};
  /* Version 2 names the author in HELLO; version 1 sends an EDIT AUTHOR after WELCOME. */
  n->hello.author = (proto_str){n->author, (uint16_t)strlen(n->author)};
  int rc = n->protocol == PROTO_VERSION_2 ? proto_encode_hello2(&n->out, &h, &n->hello) : proto_encode_hello(&n->out, &h);
  if (rc != 0) {
    set_error(n, 0, 0, "cannot encode HELLO for session '%s'", n->session);
    lose(n, 0);
    return;
  }
  enter_phase(n, PHASE_WELCOME, now);
  rc = flush_out(n);
  if (rc) {
    set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, client_strerror(rc));
    lose(n, 0);
  }
}

/* TCP is up: TLS first when asked, then HELLO. */
static void connected(vw_net *n, uint64_t now) {
  if (!n->tls) {
    send_hello(n, now);
    return;
  }
  char err[256];
  if (client_tls_begin(&n->conn, n->host, n->tls_ca[0] ? n->tls_ca : NULL, err, sizeof(err)) != 0) {
    set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, err);
    lose(n, 0);
    return;
  }
  enter_phase(n, PHASE_TLS, now);
}

static void drop_resolved(vw_net *n) {
  if (n->resolved) freeaddrinfo(n->resolved);
  n->resolved = NULL;
  n->have_resolved = 0;
}

int vw_net_wants_address(const vw_net *n, char *host, size_t hostlen, int *port) {
  if (n->phase != PHASE_IDLE) return 0;
  if (n->have_resolved && n->resolved_port == n->port && strcmp(n->resolved_host, n->host) == 0) return 0;
  snprintf(host, hostlen, "%s", n->host);
  *port = n->port;
  return 1;
}

void vw_net_give_address(vw_net *n, const char *host, int port, int rc, struct addrinfo *res, const char *err) {
  drop_resolved(n);
  if (port != n->port || strcmp(host, n->host) != 0) { /* the address in use changed meanwhile */
    if (res) freeaddrinfo(res);
    return;
  }
  snprintf(n->resolved_host, sizeof(n->resolved_host), "%s", host);
  n->resolved_port = port;
  n->resolve_rc = rc;
  n->resolved = rc == 0 ? res : NULL;
  if (rc != 0 && res) freeaddrinfo(res);
  snprintf(n->resolve_err, sizeof(n->resolve_err), "%s", err ? err : "");
  n->have_resolved = 1;
}

static void start_connect(vw_net *n, uint64_t now) {
  if (n->state == VW_NET_DOWN) n->reconnects++; /* only the very first attempt starts elsewhere */
  n->state = VW_NET_CONNECTING;
  char err[256];
  int rc;
  if (n->have_resolved && n->resolved_port == n->port && strcmp(n->resolved_host, n->host) == 0) {
    /* Looked up ahead, off any lock: used once, so the next attempt looks the name up again. */
    if (n->resolve_rc == 0) {
      rc = client_connect_start_at(&n->conn, n->resolved, n->host, n->port, err, sizeof(err));
    } else {
      rc = n->resolve_rc;
      snprintf(err, sizeof(err), "%s", n->resolve_err);
    }
    drop_resolved(n);
  } else {
    rc = client_connect_start(&n->conn, n->host, n->port, err, sizeof(err));
  }
  if (rc != 0 && rc != CLIENT_EINPROGRESS) {
    set_error(n, 0, 0, "%s", err);
    lose(n, 0);
    return;
  }
  enter_phase(n, PHASE_TCP, now);
  if (rc == 0) connected(n, now);
}

static void add_span(vw_net_changes *ch, uint32_t first, uint32_t end) {
  if (ch->offsets_first == ch->offsets_end) {
    ch->offsets_first = first;
    ch->offsets_end = end;
    return;
  }
  if (first < ch->offsets_first) ch->offsets_first = first;
  if (end > ch->offsets_end) ch->offsets_end = end;
}

/* Applies a state frame to the replica and records what it changed. 0, or -1 when the replica
 * no longer follows the server (the connection must be dropped; reason in last_error). */
static int apply_state(vw_net *n, const proto_header *h, const uint8_t *p, vw_net_changes *ch) {
  char err[256] = "does not decode";
  if (client_replica_apply(&n->replica, h, p, err, sizeof(err)) != 0) {
    set_error(n, 0, 0, "cannot apply frame type %u: %s", h->type, err);
    return -1;
  }
  ch->frames++;
  /* The replica knows the span of the vertices a DELTA listed, in either protocol version. */
  if (h->type == PROTO_DELTA && n->replica.delta_end > n->replica.delta_first)
    add_span(ch, n->replica.delta_first, n->replica.delta_end);
  if (h->type == PROTO_WEIGHTS) ch->weights = 1;
  if (h->type == PROTO_TARGET) ch->new_targets++;
  if (h->type == PROTO_TARGET_META) ch->target_meta = 1;
  return 0;
}

/* One frame from the server. Returns 0, or -1 when the connection was dropped. */
static int on_frame(vw_net *n, const proto_header *h, const uint8_t *p, vw_net_changes *ch,
                    uint64_t now) {
  switch (h->type) {
    case PROTO_WELCOME: {
      proto_welcome w;
      if (n->phase != PHASE_WELCOME || proto_decode_welcome2(p, h->length, &w, &n->granted) != 0) {
        set_error(n, PROTO_ERR_MALFORMED, 0, "unexpected or malformed WELCOME");
        lose(n, 0);
        return -1;
      }
      n->role = (proto_role)w.role;
      n->client_id = w.client_id;
      vw_presence_reset(&n->presence, w.client_id);
      enter_phase(n, PHASE_SNAPSHOT, now);
      if (n->protocol == PROTO_VERSION && n->role == PROTO_ROLE_EDITOR && n->author[0]) {
        uint32_t id = n->next_request++;
        if (n->next_request == 0) n->next_request = 1;
        proto_encode_edit_author(&n->out, id, n->author);
      }
      return 0;
    }
    case PROTO_SNAPSHOT: {
      char err[256] = "";
      if (n->phase != PHASE_SNAPSHOT || client_replica_apply(&n->replica, h, p, err, sizeof(err)) != 0) {
        set_error(n, PROTO_ERR_MALFORMED, 0, "SNAPSHOT refused: %s", err[0] ? err : "not after WELCOME");
        if (!n->replica.have_snapshot) ch->snapshot = 1; /* what was shown is gone */
        lose(n, 0);
        return -1;
      }
      uint32_t frames = ch->frames;
      memset(ch, 0, sizeof(*ch)); /* everything is new: whatever came before is superseded */
      ch->frames = frames + 1;
      ch->snapshot = 1;
      enter_phase(n, PHASE_LIVE, now);
      n->state = VW_NET_LIVE;
      n->in_update = 0;
      n->backoff_ms = 0;
      n->joins++;
      n->last_ping_ms = 0; /* measure the latency at once */
      return 0;
    }
    case PROTO_WEIGHTS:
    case PROTO_DELTA:
    case PROTO_TARGET:
    case PROTO_TARGET_META:
    case PROTO_MASK: /* the author's own mask (capability "mask"): the replica keeps it */
    case PROTO_TEXTURE: /* materials and images, once per join (capability "texture"): so does it */
    case PROTO_TEXCLIP: /* texture clips, once per join, and what they show (capability "texclip") */
    case PROTO_TEXWEIGHTS:
      /* Before this connection's SNAPSHOT the replica holds the previous server's state. */
      if (n->phase != PHASE_LIVE) {
        set_error(n, PROTO_ERR_MALFORMED, 0, "state frame type %u before the SNAPSHOT", h->type);
        lose(n, 0);
        return -1;
      }
      if (apply_state(n, h, p, ch) != 0) {
        lose(n, 0);
        return -1;
      }
      n->in_update = (h->flags & PROTO_FLAG_MORE) != 0;
      return 0;
    case PROTO_ERROR:
    case PROTO_BYE: {
      proto_error e;
      if (proto_decode_error(p, h->length, &e) != 0) {
        set_error(n, PROTO_ERR_MALFORMED, 0, "malformed %s frame", h->type == PROTO_BYE ? "BYE" : "ERROR");
        lose(n, 0);
        return -1;
      }
      const char *what = h->type == PROTO_BYE ? "BYE" : "ERROR";
      if (e.request_id)
        set_error(n, e.code, e.request_id, "%s %s (request %u): %.*s", what, error_name(e.code),
                  e.request_id, (int)e.message.len, e.message.ptr);
      else
        set_error(n, e.code, 0, "%s %s: %.*s", what, error_name(e.code), (int)e.message.len, e.message.ptr);
      if (h->type == PROTO_ERROR) n->errors++;
      /* A relay's status (docs/protocol.md §13): the connection stays, so does the state. */
      if (h->type == PROTO_ERROR && e.code == PROTO_ERR_PRIMARY_LOST) n->primary_lost = 1;
      if (h->type == PROTO_ERROR && e.code == PROTO_ERR_PRIMARY_BACK) n->primary_lost = 0;
      if (h->type == PROTO_BYE) {
        lose(n, 0);
        return -1;
      }
      /* Refused before WELCOME: the server closes. An editor without the right token can
       * still watch: ask again, at once, as a viewer. */
      if (n->phase < PHASE_SNAPSHOT) {
        int downgrade = e.code == PROTO_ERR_FORBIDDEN && n->ask_role == PROTO_ROLE_EDITOR;
        if (downgrade) n->ask_role = PROTO_ROLE_VIEWER;
        lose(n, downgrade);
        return -1;
      }
      return 0;
    }
    case PROTO_PRESENCE:
      /* Not the session's state: a bad one is reported and skipped, the connection stays. */
      if (n->phase == PHASE_LIVE && vw_presence_apply(&n->presence, p, h->length, now) == 0) ch->presence = 1;
      else set_error(n, 0, 0, "a PRESENCE frame was skipped (malformed, or before the SNAPSHOT)");
      return 0;
    case PROTO_PONG: {
      proto_ping pg;
      if (proto_decode_ping(p, h->length, &pg) == 0 && pg.seq == n->ping_seq && pg.t0_ns == n->ping_sent_ns) {
        uint64_t now_ns = client_now_ns();
        n->latency_ms = now_ns > pg.t0_ns ? (double)(now_ns - pg.t0_ns) / 2e6 : 0.0;
        n->ping_sent_ns = 0;
      }
      return 0;
    }
    case PROTO_PING: { /* the server does not ping today; answer like it would */
      proto_ping pg;
      if (proto_decode_ping(p, h->length, &pg) == 0) {
        pg.t1_ns = client_now_ns();
        proto_encode_ping(&n->out, PROTO_PONG, &pg);
      }
      return 0;
    }
    default:
      return 0; /* HELLO, EDIT: not for clients; ignored */
  }
}

/* Reads and applies the frames the socket has now. Returns the number applied, or -1 when the
 * connection was dropped. */
static int read_frames(vw_net *n, vw_net_changes *ch, uint64_t now) {
  int count = 0;
  for (;;) {
    if ((uint32_t)count >= VW_NET_MAX_FRAMES && !(n->in_update && (uint32_t)count < VW_NET_MAX_FRAMES_MORE))
      break;
    proto_header h;
    const uint8_t *p;
    char err[256];
    int rc = client_read_frame(&n->conn, 0, &h, &p, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) break;
    if (rc) {
      set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, err);
      lose(n, 0);
      return -1;
    }
    count++;
    n->bytes_total += PROTO_HEADER_SIZE + (uint64_t)h.length;
    n->rate_bytes += PROTO_HEADER_SIZE + (uint64_t)h.length;
    if (on_frame(n, &h, p, ch, now) != 0) return -1;
  }
  size_t buffered = n->conn.len - n->conn.off;
  if (count > 0 || buffered != n->heard_buffered) {
    n->heard_ms = now;
    n->heard_buffered = buffered;
  }
  return count;
}

static void update_rate(vw_net *n, uint64_t now) {
  if (n->rate_t0_ms == 0) n->rate_t0_ms = now;
  uint64_t dt = now - n->rate_t0_ms;
  if (dt < 1000) return;
  n->bytes_per_s = (double)n->rate_bytes * 1000.0 / (double)dt;
  n->rate_bytes = 0;
  n->rate_t0_ms = now;
}

static void maybe_ping(vw_net *n, uint64_t now) {
  if (n->phase != PHASE_LIVE || now - n->last_ping_ms < VW_NET_PING_MS) return;
  /* One PING in flight at a time: a PONG slower than a second delays the next PING rather
   * than piling them up behind a server that is busy or not reading us. */
  if (n->ping_sent_ns != 0) return;
  proto_ping pg = {client_now_ns(), 0, n->ping_seq + 1};
  if (proto_encode_ping(&n->out, PROTO_PING, &pg) != 0) return;
  n->ping_seq = pg.seq;
  n->ping_sent_ns = pg.t0_ns;
  n->last_ping_ms = now;
}

/* Gives up on a connection that made no progress for too long. Returns 1 when it did. */
static int check_timeouts(vw_net *n, uint64_t now) {
  if ((n->phase == PHASE_TCP || n->phase == PHASE_TLS) && now - n->phase_ms >= VW_NET_CONNECT_TIMEOUT_MS) {
    set_error(n, 0, 0, "%s:%d: no answer to %s within %u ms", n->host, n->port,
              n->phase == PHASE_TCP ? "connect" : "the TLS handshake", VW_NET_CONNECT_TIMEOUT_MS);
    lose(n, 0);
    return 1;
  }
  int waiting = n->phase == PHASE_WELCOME || n->phase == PHASE_SNAPSHOT ||
                (n->phase == PHASE_LIVE && n->ping_sent_ns != 0);
  if (waiting && now - n->heard_ms >= VW_NET_SILENCE_MS) {
    set_error(n, 0, 0, "%s:%d: nothing heard for %u ms", n->host, n->port, VW_NET_SILENCE_MS);
    lose(n, 0);
    return 1;
  }
  return 0;
}

vw_net_state vw_net_poll(vw_net *n, int wait_ms, vw_net_changes *ch) {
  vw_net_changes local;
  if (!ch) ch = &local;
  memset(ch, 0, sizeof(*ch));
  uint64_t start = vw_net_now_ms();
  uint64_t deadline = start + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
  vw_net_state entered = n->state;
  for (;;) {
    uint64_t now = vw_net_now_ms();
    int changed = 0;
    if (n->phase == PHASE_IDLE && now >= n->retry_at_ms) {
      start_connect(n, now);
      changed = 1; /* an attempt was made (it may have failed already) */
    }
    if (n->phase == PHASE_TCP) {
      char err[256];
      int rc = client_connect_finish(&n->conn, 0, err, sizeof(err));
      if (rc == 0) connected(n, now);
      if (rc != 0 && rc != CLIENT_EINPROGRESS) {
        set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, err);
        lose(n, 0);
      }
    }
    if (n->phase == PHASE_TLS) {
      char err[256];
      int rc = client_tls_continue(&n->conn, 0, err, sizeof(err));
      if (rc == 0) send_hello(n, now);
      if (rc != 0 && rc != CLIENT_EINPROGRESS) {
        set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, err);
        lose(n, 0);
      }
    }
    if (n->phase >= PHASE_WELCOME) {
      int rc = flush_out(n);
      if (rc) {
        set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, client_strerror(rc));
        lose(n, 0);
      } else if (read_frames(n, ch, now) > 0) {
        changed = 1;
      }
    }
    if (n->phase != PHASE_IDLE) check_timeouts(n, now);
    if (changed || n->state != entered || now >= deadline) break;
    /* Nothing yet: wait for the socket, or for the retry time, within what is left. */
    uint64_t until = deadline;
    if (n->phase == PHASE_IDLE && n->retry_at_ms < until) until = n->retry_at_ms;
    int t = until > now ? (int)(until - now) : 0;
    if (n->phase == PHASE_IDLE) {
      poll(NULL, 0, t);
    } else if (n->phase < PHASE_WELCOME || !client_readable_now(&n->conn)) {
      short ev = n->phase == PHASE_TCP ? POLLOUT : client_poll_events(&n->conn);
      if (n->phase >= PHASE_WELCOME && n->out.len > n->out_off) ev |= POLLOUT;
      struct pollfd pfd = {n->conn.fd, ev, 0};
      poll(&pfd, 1, t);
    }
  }
  uint64_t now = vw_net_now_ms();
  if (n->phase == PHASE_LIVE) {
    maybe_ping(n, now);
    int rc = flush_out(n);
    if (rc) {
      set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, client_strerror(rc));
      lose(n, 0);
    }
  }
  update_rate(n, now);
  ch->partial = n->phase == PHASE_LIVE && n->in_update;
  return n->state;
}

void vw_net_fini(vw_net *n) {
  if (n->phase >= PHASE_WELCOME) {
    proto_encode_bye(&n->out, PROTO_ERR_NONE, "viewer closing");
    flush_out(n);
  }
  client_close(&n->conn);
  client_replica_fini(&n->replica);
  proto_buf_fini(&n->out);
  drop_resolved(n);
  memset(n, 0, sizeof(*n));
  n->conn.fd = -1;
}

int vw_net_can_edit(const vw_net *n) {
  return n->phase == PHASE_LIVE && n->role == PROTO_ROLE_EDITOR;
}

/* The common part of every edit: is it allowed, is there room, then the request id. 0 when it
 * must not be sent. */
static uint32_t edit_begin(vw_net *n) {
  if (!vw_net_can_edit(n)) return 0;
  if (n->out.len - n->out_off > VW_NET_MAX_QUEUED) {
    set_error(n, 0, 0, "edit not sent: %zu bytes still waiting for the server to read them",
              n->out.len - n->out_off);
    return 0;
  }
  uint32_t id = n->next_request++;
  if (n->next_request == 0) n->next_request = 1; /* 0 means "no request" in ERROR */
  return id;
}

/* Sends what an encoder appended (rc its result). Returns id, or 0 when nothing was sent. */
static uint32_t edit_end(vw_net *n, uint32_t id, int rc) {
  if (rc != 0) {
    if (n->out.failed) {
      set_error(n, 0, id, "edit %u not sent: out of memory", id);
      lose(n, 0);
    } else {
      set_error(n, 0, id, "edit %u not sent: %s", id, proto_strerror(rc));
    }
    return 0;
  }
  rc = flush_out(n);
  if (rc) {
    set_error(n, 0, 0, "%s:%d: %s", n->host, n->port, client_strerror(rc));
    lose(n, 0);
    return 0;
  }
  return id;
}

uint32_t vw_net_set_weights(vw_net *n, uint32_t count, const uint32_t *targets, const float *values) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_weights(&n->out, id, count, targets, values)) : 0;
}

uint32_t vw_net_set_offsets(vw_net *n, uint32_t count, const uint32_t *vertices, const int32_t *q) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_offsets(&n->out, id, count, vertices, q)) : 0;
}

uint32_t vw_net_gesture_begin(vw_net *n, const proto_gesture_begin *g, const uint32_t *handle,
                              const uint32_t *roi, const uint32_t *anchors) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_gesture_begin(&n->out, id, g, handle, roi, anchors)) : 0;
}

uint32_t vw_net_gesture_drag(vw_net *n, const proto_gesture_drag *d) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_gesture_drag(&n->out, id, d)) : 0;
}

uint32_t vw_net_gesture_end(vw_net *n, uint32_t gesture) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_gesture_end(&n->out, id, gesture)) : 0;
}

uint32_t vw_net_brush(vw_net *n, uint8_t brush, uint8_t falloff, uint8_t flags, uint8_t mirror, uint32_t count,
                      const proto_brush_sample *samples) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_brush_mirror(&n->out, id, brush, falloff, flags, mirror, count, samples)) : 0;
}

uint32_t vw_net_mask(vw_net *n, const proto_mask_edit *m, const float *samples) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_mask(&n->out, id, m, samples)) : 0;
}

int vw_net_has_presence(const vw_net *n) {
  return n->phase == PHASE_LIVE && (n->granted.caps & PROTO_CAP_BIT(PROTO_CAP_PRESENCE)) != 0;
}

int vw_net_send_presence(vw_net *n, const proto_presence_state *s, uint8_t about_client, int private_) {
  if (!vw_net_has_presence(n) || n->out.len - n->out_off > VW_NET_MAX_QUEUED / 16) return 0;
  size_t at = proto_presence_begin(&n->out);
  if (about_client) proto_presence_put_about(&n->out, about_client, private_ ? PROTO_PRES_PRIVATE : 0);
  if (s) proto_presence_put_state(&n->out, s);
  if (proto_presence_end(&n->out, at) != 0 || flush_out(n) != 0) return 0;
  return 1;
}

uint32_t vw_net_history(vw_net *n, int redo) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_history(&n->out, id, redo)) : 0;
}

void vw_net_set_author(vw_net *n, const char *author) {
  snprintf(n->author, sizeof(n->author), "%s", author ? author : "");
  for (char *p = n->author; *p; p++) /* the server refuses control characters in a name */
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

uint32_t vw_net_reset(vw_net *n, uint32_t count, const uint32_t *vertices) {
  uint32_t id = edit_begin(n);
  return id ? edit_end(n, id, proto_encode_edit_reset(&n->out, id, count, vertices)) : 0;
}
