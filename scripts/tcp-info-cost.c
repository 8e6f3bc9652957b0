/* The cost of the idle timeout's per-connection check (docs/INTERNALS.md, "Idle timeout"): one
 * getsockopt(TCP_INFO) on a loopback TCP socket, and one ioctl(FIONREAD) on a Unix socket.
 * gcc -O2 scripts/tcp-info-cost.c -o /tmp/tcp-info-cost && /tmp/tcp-info-cost */
#include <stdio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
int main(void) {
  int l = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(0x7f000001);
  bind(l, (void*)&a, sizeof a); listen(l, 16); socklen_t al = sizeof a; getsockname(l, (void*)&a, &al);
  int c = socket(AF_INET, SOCK_STREAM, 0); connect(c, (void*)&a, sizeof a); int s = accept(l, 0, 0);
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  unsigned long long sum = 0; int n = 1000000;
  for (int i = 0; i < n; i++) { struct tcp_info info; socklen_t len = sizeof info; getsockopt(s, IPPROTO_TCP, TCP_INFO, &info, &len); sum += info.tcpi_last_data_recv; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
  printf("getsockopt(TCP_INFO): %.0f ns per call (%llu)\n", ns, sum % 2);
  int pair[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, pair); write(pair[0], "x", 1);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) { int unread = 0; ioctl(pair[1], FIONREAD, &unread); sum += unread; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
  printf("ioctl(FIONREAD) on a Unix socket: %.0f ns per call (%llu)\n", ns, sum % 2);
  return 0;
}
