#ifndef WINBACK_CPQ_SHIM_H
#define WINBACK_CPQ_SHIM_H
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <postgresql/libpq-fe.h>

// libpq is loaded with dlopen when a run first speaks to PostgreSQL
// (Sources/WinBackPostgres/PostgresLibrary.swift), not linked: a run that reads files never maps
// it nor the libraries it needs (TLS, Kerberos, LDAP). Only the header is needed to build
// (Debian: libpq-dev); the library is Debian's libpq5.

/// The entry points of libpq this program uses.
typedef struct winback_pq_api {
    PGconn *(*connectdbParams)(const char *const *keywords, const char *const *values, int expand_dbname);
    ConnStatusType (*status)(const PGconn *conn);
    char *(*errorMessage)(const PGconn *conn);
    void (*finish)(PGconn *conn);
    PGresult *(*exec)(PGconn *conn, const char *query);
    PGresult *(*execParams)(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                            const char *const *paramValues, const int *paramLengths, const int *paramFormats,
                            int resultFormat);
    ExecStatusType (*resultStatus)(const PGresult *res);
    char *(*resultErrorField)(const PGresult *res, int fieldcode);
    char *(*resultErrorMessage)(const PGresult *res);
    void (*clear)(PGresult *res);
    int (*ntuples)(const PGresult *res);
    int (*nfields)(const PGresult *res);
    char *(*getvalue)(const PGresult *res, int tup_num, int field_num);
    int (*getisnull)(const PGresult *res, int tup_num, int field_num);
    int (*getlength)(const PGresult *res, int tup_num, int field_num);
    int (*getCopyData)(PGconn *conn, char **buffer, int async);
    int (*putCopyData)(PGconn *conn, const char *buffer, int nbytes);
    int (*putCopyEnd)(PGconn *conn, const char *errormsg);
    PGresult *(*getResult)(PGconn *conn);
    void (*freemem)(void *ptr);
    PQconninfoOption *(*conninfoParse)(const char *conninfo, char **errmsg);
    void (*conninfoFree)(PQconninfoOption *connOptions);
    int (*socket)(const PGconn *conn);
    int (*consumeInput)(PGconn *conn);
    int (*sendQuery)(PGconn *conn, const char *query);
    int (*sendQueryParams)(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                           const char *const *paramValues, const int *paramLengths, const int *paramFormats,
                           int resultFormat);
    int (*isBusy)(PGconn *conn);
    char *(*escapeIdentifier)(PGconn *conn, const char *str, size_t len);
    char *(*escapeLiteral)(PGconn *conn, const char *str, size_t len);
    int (*serverVersion)(const PGconn *conn);
    int (*setnonblocking)(PGconn *conn, int arg);
    int (*flush)(PGconn *conn);
} winback_pq_api;

/// Loads libpq (libpq.so.5, else libpq.so) and finds every entry point: 1 when all are there;
/// otherwise 0 with why in `why` (`size` bytes, NUL-terminated). Call once: the caller keeps
/// the answer.
static inline int winback_pq_load(winback_pq_api *api, char *why, size_t size) {
    void *lib = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, size, "%s", e ? e : "libpq.so.5 not found");
        lib = dlopen("libpq.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return 0;
    }
#define WINBACK_PQ_FIND(field, symbol)                                   \
    do {                                                                 \
        *(void **)(&api->field) = dlsym(lib, symbol);                    \
        if (!api->field) {                                               \
            snprintf(why, size, "libpq lacks %s", symbol);               \
            return 0;                                                    \
        }                                                                \
    } while (0)
    WINBACK_PQ_FIND(connectdbParams, "PQconnectdbParams");
    WINBACK_PQ_FIND(status, "PQstatus");
    WINBACK_PQ_FIND(errorMessage, "PQerrorMessage");
    WINBACK_PQ_FIND(finish, "PQfinish");
    WINBACK_PQ_FIND(exec, "PQexec");
    WINBACK_PQ_FIND(execParams, "PQexecParams");
    WINBACK_PQ_FIND(resultStatus, "PQresultStatus");
    WINBACK_PQ_FIND(resultErrorField, "PQresultErrorField");
    WINBACK_PQ_FIND(resultErrorMessage, "PQresultErrorMessage");
    WINBACK_PQ_FIND(clear, "PQclear");
    WINBACK_PQ_FIND(ntuples, "PQntuples");
    WINBACK_PQ_FIND(nfields, "PQnfields");
    WINBACK_PQ_FIND(getvalue, "PQgetvalue");
    WINBACK_PQ_FIND(getisnull, "PQgetisnull");
    WINBACK_PQ_FIND(getlength, "PQgetlength");
    WINBACK_PQ_FIND(getCopyData, "PQgetCopyData");
    WINBACK_PQ_FIND(putCopyData, "PQputCopyData");
    WINBACK_PQ_FIND(putCopyEnd, "PQputCopyEnd");
    WINBACK_PQ_FIND(getResult, "PQgetResult");
    WINBACK_PQ_FIND(freemem, "PQfreemem");
    WINBACK_PQ_FIND(conninfoParse, "PQconninfoParse");
    WINBACK_PQ_FIND(conninfoFree, "PQconninfoFree");
    WINBACK_PQ_FIND(socket, "PQsocket");
    WINBACK_PQ_FIND(consumeInput, "PQconsumeInput");
    WINBACK_PQ_FIND(sendQuery, "PQsendQuery");
    WINBACK_PQ_FIND(sendQueryParams, "PQsendQueryParams");
    WINBACK_PQ_FIND(isBusy, "PQisBusy");
    WINBACK_PQ_FIND(escapeIdentifier, "PQescapeIdentifier");
    WINBACK_PQ_FIND(escapeLiteral, "PQescapeLiteral");
    WINBACK_PQ_FIND(serverVersion, "PQserverVersion");
    WINBACK_PQ_FIND(setnonblocking, "PQsetnonblocking");
    WINBACK_PQ_FIND(flush, "PQflush");
#undef WINBACK_PQ_FIND
    return 1;
}

/// The SQLSTATE field code of PQresultErrorField.
static const int winback_pq_diag_sqlstate = PG_DIAG_SQLSTATE;

#endif
