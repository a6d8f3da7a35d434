/*
 * store_rows.h — reading a stopped (or running) deformd's SQLite store from a test: the oracle
 * for what the store kept, independent of the server's own answers.
 */
#ifndef DEFORMD_TEST_STORE_ROWS_H
#define DEFORMD_TEST_STORE_ROWS_H

#include <stdint.h>

/* The first column of the first row `sql` gives on DIR/deformd.sqlite3 (read-only), or -1 when
 * the file or the query cannot be read. */
int64_t count_rows(const char *dir, const char *sql);

#endif
