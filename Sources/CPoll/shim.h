#ifndef IAPGW_CPOLL_SHIM_H
#define IAPGW_CPOLL_SHIM_H
#include <poll.h>
#include <signal.h>
#include <time.h>
// ppoll (a nanosecond timeout; poll's is milliseconds, too coarse to pace thousands of requests a
// second) is a GNU extension the Glibc module does not declare without _GNU_SOURCE.
int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *sigmask);
#endif
