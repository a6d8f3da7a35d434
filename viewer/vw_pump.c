/*
 * vw_pump.c — the connection's own thread (see vw_pump.h).
 *
 * The loop: lock, look up the host name a coming connect needs (unlocking while the resolver
 * runs), vw_net_poll without waiting, add the changes up, unlock, then wait up to
 * 5 ms for the socket to have something (or 10 ms without a socket: connects and retries run
 * on that clock). A PONG is therefore read within microseconds of its arrival unless the
 * render thread holds the lock, which it does only to copy or apply what changed.
 *
 * DOES NOT decode frames or touch GL.
 */
#include "vw_pump.h"

#include <netdb.h>
#include <poll.h>
#include <string.h>

void vw_pump_merge(vw_net_changes *acc, const vw_net_changes *ch) {
  if (ch->snapshot) {
    /* Everything is uploaded again from the replica: what came before does not matter. */
    *acc = *ch;
    return;
  }
  acc->weights |= ch->weights;
  acc->new_targets += ch->new_targets;
  acc->target_meta |= ch->target_meta;
  acc->presence |= ch->presence;
  if (ch->offsets_end > ch->offsets_first) {
    if (acc->offsets_end > acc->offsets_first) {
      if (ch->offsets_first < acc->offsets_first) acc->offsets_first = ch->offsets_first;
      if (ch->offsets_end > acc->offsets_end) acc->offsets_end = ch->offsets_end;
    } else {
      acc->offsets_first = ch->offsets_first;
      acc->offsets_end = ch->offsets_end;
    }
  }
  acc->frames += ch->frames;
  acc->partial = ch->partial;
}

static void *run(void *arg) {
  vw_pump *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->lock);
    if (p->stop) {
      pthread_mutex_unlock(&p->lock);
      break;
    }
    /* A connect that needs a name looked up: resolve it first, without the lock. */
    char host[256];
    int port;
    while (!p->stop && vw_net_wants_address(p->net, host, sizeof(host), &port)) {
      pthread_mutex_unlock(&p->lock);
      struct addrinfo *res = NULL;
      char err[200] = "";
      int rc = p->resolve(host, port, &res, err, sizeof(err));
      pthread_mutex_lock(&p->lock);
      vw_net_give_address(p->net, host, port, rc, res, err);
    }
    if (p->stop) {
      pthread_mutex_unlock(&p->lock);
      break;
    }
    vw_net_changes ch;
    vw_net_poll(p->net, 0, &ch);
    vw_pump_merge(&p->pending, &ch);
    int fd = p->net->conn.fd, out = p->net->out.len > p->net->out_off;
    pthread_mutex_unlock(&p->lock);
    if (fd >= 0) {
      /* The socket may be closed and its number reused by then: at worst a wait ends early. */
      struct pollfd pfd = {fd, (short)(POLLIN | (out ? POLLOUT : 0)), 0};
      poll(&pfd, 1, 5);
    } else {
      poll(NULL, 0, 10);
    }
  }
  return NULL;
}

int vw_pump_start(vw_pump *p, vw_net *net) { return vw_pump_start_resolving(p, net, client_resolve); }

int vw_pump_start_resolving(vw_pump *p, vw_net *net, vw_pump_resolve_fn resolve) {
  memset(p, 0, sizeof(*p));
  p->net = net;
  p->resolve = resolve;
  if (pthread_mutex_init(&p->lock, NULL) != 0) return -1;
  if (pthread_create(&p->thread, NULL, run, p) != 0) {
    pthread_mutex_destroy(&p->lock);
    return -1;
  }
  p->running = 1;
  return 0;
}

void vw_pump_stop(vw_pump *p) {
  if (!p->running) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  pthread_mutex_destroy(&p->lock);
  p->running = 0;
}

void vw_pump_lock(vw_pump *p) {
  if (p->running) pthread_mutex_lock(&p->lock);
}

void vw_pump_unlock(vw_pump *p) {
  if (p->running) pthread_mutex_unlock(&p->lock);
}

void vw_pump_take(vw_pump *p, vw_net_changes *out) {
  *out = p->pending;
  memset(&p->pending, 0, sizeof(p->pending));
}

int vw_pump_snapshot_waiting(const vw_pump *p) { return p->pending.snapshot; }
