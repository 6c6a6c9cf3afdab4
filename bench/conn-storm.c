/* Connection storm: opens N TCP connections to 127.0.0.1:PORT at once (non-blocking
 * connects, then epoll) and reports when all are connected; then sends each the HTTP/2
 * client preface and reports when every connection got the server's first frame (the
 * server accepted it and its HTTP/2 layer answered). SYNs that the server's accept
 * backlog dropped show up as the kernel's 1 s, 3 s, 7 s ... retransmits.
 *
 * Build: gcc -O2 -o conn-storm bench/conn-storm.c
 * Run:   ./conn-storm 2379 10000     (the open-file limit must exceed N: ulimit -n) */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* Waits until `n` registered sockets reported an event; returns how many did. */
static int wait_all(int ep, int n, int check_error) {
  struct epoll_event ev[1024];
  int done = 0;
  while (done < n) {
    int k = epoll_wait(ep, ev, 1024, 30000);
    if (k <= 0) {
      fprintf(stderr, "no progress for 30 s with %d of %d done\n", done, n);
      break;
    }
    for (int i = 0; i < k; i++) {
      int s = ev[i].data.fd;
      if (check_error) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
          fprintf(stderr, "connect: %s\n", strerror(err));
          exit(1);
        }
      } else {
        char buf[256];
        if (read(s, buf, sizeof buf) < 0) perror("read");
      }
      epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL);
      done++;
    }
  }
  return done;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PORT N\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]), n = atoi(argv[2]);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  int ep = epoll_create1(0);
  int *fds = calloc(n, sizeof(int));
  double start = now();
  for (int i = 0; i < n; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fds[i] < 0) {
      perror("socket");
      return 1;
    }
    if (connect(fds[i], (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) {
      perror("connect");
      return 1;
    }
    struct epoll_event e = {.events = EPOLLOUT, .data.fd = fds[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
  }
  int connected = wait_all(ep, n, 1);
  printf("%d connections at once to :%d: connected in %.3f s\n", connected, port, now() - start);
  /* The HTTP/2 preface and an empty SETTINGS frame. */
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
  for (int i = 0; i < n; i++) {
    if (write(fds[i], preface, sizeof preface - 1) < 0) perror("write");
    struct epoll_event e = {.events = EPOLLIN, .data.fd = fds[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
  }
  int answered = wait_all(ep, n, 0);
  printf("  %d answered by the server %.3f s after the first connect\n", answered, now() - start);
  for (int i = 0; i < n; i++) close(fds[i]);
  return answered == n ? 0 : 1;
}
