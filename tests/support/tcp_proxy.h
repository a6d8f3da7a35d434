/*
 * tcp_proxy.h — a TCP relay on a loopback port for the tests: every connection it accepts is
 * joined to a new connection to the target port, and the bytes pass both ways on a thread of
 * its own, until the test resets them: the accepted side is closed with SO_LINGER 0, so its
 * peer sees a connection reset (RST), which a killed server does not always produce.
 *
 * DOES NOT look at the bytes.
 */
#ifndef DEFORMD_TEST_TCP_PROXY_H
#define DEFORMD_TEST_TCP_PROXY_H

#include <pthread.h>

#define TCP_PROXY_PAIRS 32

typedef struct tcp_proxy {
  int listen_fd, port, target_port;
  int wake[2];                       /* a byte on wake[1]: look at `resets_asked` or `stop` */
  pthread_t thread;
  pthread_mutex_t lock;
  int stop, resets_asked, resets_done; /* under lock */
  int accepted;                        /* under lock: connections accepted so far */
  int pairs[TCP_PROXY_PAIRS][2];       /* the thread's: accepted side, target side; -1 free */
} tcp_proxy;

/* Listens on a free loopback port (p->port) relaying to 127.0.0.1:target_port. Fails the test
 * when it cannot. */
void tcp_proxy_start(tcp_proxy *p, int target_port);
/* Resets every connection open now (RST to the accepted side, the target side closed) and
 * returns once done; new connections are accepted and relayed as before. */
void tcp_proxy_reset(tcp_proxy *p);
/* Connections accepted so far. */
int tcp_proxy_accepted(tcp_proxy *p);
void tcp_proxy_stop(tcp_proxy *p);

#endif
