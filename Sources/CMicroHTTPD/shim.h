#ifndef IAPGW_CMICROHTTPD_SHIM_H
#define IAPGW_CMICROHTTPD_SHIM_H
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdarg.h>
#include <microhttpd.h>

/* MHD_get_connection_info and MHD_get_daemon_info are variadic, which Swift cannot call. */
static inline const union MHD_ConnectionInfo *
iapgw_mhd_connection_info(struct MHD_Connection *connection, enum MHD_ConnectionInfoType kind) {
    return MHD_get_connection_info(connection, kind);
}
static inline const union MHD_DaemonInfo *
iapgw_mhd_daemon_info(struct MHD_Daemon *daemon, enum MHD_DaemonInfoType kind) {
    return MHD_get_daemon_info(daemon, kind);
}
#endif
