/*
 * tcp_proxy.c — see tcp_proxy.h.
 */
#include "tcp_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"

static void close_pair(int *pair, int reset) {
  if (reset) {
    struct linger l = {1, 0};
    setsockopt(pair[0], SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  }
  close(pair[0]);
  close(pair[1]);
  pair[0] = pair[1] = -1;
}

static void *run(void *arg) {
  tcp_proxy *p = arg;
  for (;;) {
    struct pollfd fds[2 + 2 * TCP_PROXY_PAIRS];
    int who[2 + 2 * TCP_PROXY_PAIRS]; /* pair index * 2 + side, for the pair descriptors */
    int n = 0;
    fds[n++] = (struct pollfd){p->wake[0], POLLIN, 0};
    fds[n++] = (struct pollfd){p->listen_fd, POLLIN, 0};
    for (int i = 0; i < TCP_PROXY_PAIRS; i++)
      for (int s = 0; s < 2; s++)
        if (p->pairs[i][s] >= 0) {
          who[n] = 2 * i + s;
          fds[n++] = (struct pollfd){p->pairs[i][s], POLLIN, 0};
        }
    if (poll(fds, (nfds_t)n, 1000) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      char b[16];
      (void)!read(p->wake[0], b, sizeof(b));
      pthread_mutex_lock(&p->lock);
      int stop = p->stop, reset = p->resets_asked > p->resets_done;
      pthread_mutex_unlock(&p->lock);
      if (reset || stop)
        for (int i = 0; i < TCP_PROXY_PAIRS; i++)
          if (p->pairs[i][0] >= 0) close_pair(p->pairs[i], 1);
      pthread_mutex_lock(&p->lock);
      if (reset) p->resets_done = p->resets_asked;
      pthread_mutex_unlock(&p->lock);
      if (stop) break;
      continue; /* the descriptors polled may be closed */
    }
    if (fds[1].revents & POLLIN) {
      int in = accept(p->listen_fd, NULL, NULL);
      if (in >= 0) fcntl(in, F_SETFD, FD_CLOEXEC); /* a reset must not leave a child holding it */
      int out = in >= 0 ? test_dial(p->target_port) : -1;
      int slot = -1;
      for (int i = 0; i < TCP_PROXY_PAIRS && slot < 0; i++)
        if (p->pairs[i][0] < 0) slot = i;
      if (in >= 0 && out >= 0 && slot >= 0) {
        p->pairs[slot][0] = in;
        p->pairs[slot][1] = out;
        pthread_mutex_lock(&p->lock);
        p->accepted++;
        pthread_mutex_unlock(&p->lock);
      } else {
        if (in >= 0) close(in);
        if (out >= 0) close(out);
      }
    }
    for (int k = 2; k < n; k++) {
      if (!fds[k].revents) continue;
      int i = who[k] / 2, s = who[k] % 2;
      if (p->pairs[i][s] != fds[k].fd) continue; /* closed earlier in this pass */
      char buf[65536];
      ssize_t r = recv(fds[k].fd, buf, sizeof(buf), 0);
      if (r <= 0 || test_send_all(p->pairs[i][1 - s], buf, (size_t)r) != 0) close_pair(p->pairs[i], 0);
    }
  }
  for (int i = 0; i < TCP_PROXY_PAIRS; i++)
    if (p->pairs[i][0] >= 0) close_pair(p->pairs[i], 0);
  return NULL;
}

void tcp_proxy_start(tcp_proxy *p, int target_port) {
  memset(p, 0, sizeof(*p));
  p->target_port = target_port;
  for (int i = 0; i < TCP_PROXY_PAIRS; i++) p->pairs[i][0] = p->pairs[i][1] = -1;
  p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT(p->listen_fd >= 0);
  ASSERT(bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) == 0);
  ASSERT(listen(p->listen_fd, 16) == 0);
  ASSERT(getsockname(p->listen_fd, (struct sockaddr *)&a, &len) == 0);
  p->port = ntohs(a.sin_port);
  ASSERT(pipe(p->wake) == 0);
  fcntl(p->wake[0], F_SETFD, FD_CLOEXEC);
  fcntl(p->wake[1], F_SETFD, FD_CLOEXEC);
  ASSERT(pthread_mutex_init(&p->lock, NULL) == 0);
  ASSERT(pthread_create(&p->thread, NULL, run, p) == 0);
}

void tcp_proxy_reset(tcp_proxy *p) {
  pthread_mutex_lock(&p->lock);
  int want = ++p->resets_asked;
  pthread_mutex_unlock(&p->lock);
  ASSERT(write(p->wake[1], "r", 1) == 1);
  for (int done = 0; !done;) {
    usleep(1000);
    pthread_mutex_lock(&p->lock);
    done = p->resets_done >= want;
    pthread_mutex_unlock(&p->lock);
  }
}

int tcp_proxy_accepted(tcp_proxy *p) {
  pthread_mutex_lock(&p->lock);
  int n = p->accepted;
  pthread_mutex_unlock(&p->lock);
  return n;
}

void tcp_proxy_stop(tcp_proxy *p) {
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_mutex_unlock(&p->lock);
  ASSERT(write(p->wake[1], "s", 1) == 1);
  pthread_join(p->thread, NULL);
  close(p->listen_fd);
  close(p->wake[0]);
  close(p->wake[1]);
  pthread_mutex_destroy(&p->lock);
}
