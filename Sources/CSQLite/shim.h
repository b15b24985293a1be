#ifndef IAPGW_CSQLITE_SHIM_H
#define IAPGW_CSQLITE_SHIM_H
#include <sqlite3.h>
// SQLITE_TRANSIENT is a cast macro Swift cannot import: SQLite copies the bound bytes.
static inline sqlite3_destructor_type iapgw_sqlite_transient(void) { return SQLITE_TRANSIENT; }
static const int IAPGW_SQLITE_CONSTRAINT_UNIQUE = SQLITE_CONSTRAINT_UNIQUE;
static const int IAPGW_SQLITE_CONSTRAINT_PRIMARYKEY = SQLITE_CONSTRAINT_PRIMARYKEY;
#endif
