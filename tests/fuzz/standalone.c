/*
 * standalone.c — runs a fuzz target's LLVMFuzzerTestOneInput over files and folders without
 * libFuzzer: how `make test` replays each target's seed corpus and every finding kept in
 * tests/fuzz/regress/ (built with the suite's compiler and sanitizers, no clang needed).
 *
 * Usage: fuzz-replay-NAME PATH...   (a folder's files in name order). Prints one line per
 * folder; exits 0 when every input ran (a crash is the target's own abort or a sanitizer).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) return -1;
  /* Exactly the file's bytes, so that a read past the input is a read past the allocation. */
  uint8_t *exact = malloc(len ? len : 1);
  memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  int failed = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) continue; /* a target with no findings has no folder */
    if (!S_ISDIR(st.st_mode)) {
      failed |= run_file(argv[i]) != 0;
      continue;
    }
    DIR *d = opendir(argv[i]);
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      names = realloc(names, sizeof(char *) * (n + 1));
      names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, n, sizeof(char *), cmp);
    for (size_t k = 0; k < n; k++) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]);
      failed |= run_file(path) != 0;
      free(names[k]);
    }
    free(names);
    printf("%s: %zu inputs\n", argv[i], n);
  }
  return failed;
}
