/*
 * store_rows.c — see store_rows.h.
 */
#include <sqlite3.h>
#include <stdio.h>

#include "store_rows.h"

int64_t count_rows(const char *dir, const char *sql) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/deformd.sqlite3", dir);
  sqlite3 *db = NULL;
  int64_t n = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return n;
}
