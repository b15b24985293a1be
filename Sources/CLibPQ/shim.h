#ifndef IAPGW_CLIBPQ_SHIM_H
#define IAPGW_CLIBPQ_SHIM_H
// Debian's libpq-dev puts its headers under /usr/include/postgresql (pkg-config libpq adds the path).
#include <libpq-fe.h>
// PG_DIAG_SQLSTATE is a character macro: a constant Swift can use directly.
static const int IAPGW_PG_DIAG_SQLSTATE = PG_DIAG_SQLSTATE;
#endif
