#ifndef IAPGW_CPOLL_SHIM_H
#define IAPGW_CPOLL_SHIM_H
#include <sys/epoll.h>
#include <signal.h>
#include <time.h>
// epoll_pwait2 (Linux 5.11, glibc 2.35) takes a nanosecond timeout, where epoll_wait's is in
// milliseconds, too coarse to pace thousands of requests a second; glibc declares it only under
// _GNU_SOURCE, which the Glibc module is built without.
int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents, const struct timespec *timeout,
                 const sigset_t *sigmask);
#endif
