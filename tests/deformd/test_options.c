/*
 * test_options.c — deformd's option table (core/srv_options.c) walked row by row: every setting
 * through each path the table gives it (a flag, a config-file key), the defaults --help prints,
 * and --help itself (every option it names is accepted; nothing refused is named).
 *
 * The oracles: the values given (read back from the srv_config field the row names, and for the
 * rows with setters of their own from the field by name, written here); srv_config_init for the
 * defaults; the text of the built deformd's --help; deploy/deformd.json for the keys.
 *
 * DOES NOT start a server: the readers are called in-process, the binary only prints --help.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "srv_config.h"
#include "srv_error.h"
#include "srv_options.h"
#include "test.h"

/* ---- reading a command line or a config text into a fresh srv_config ---------------------------- */

typedef struct parsed {
  srv_config cfg;
  srv_cli cli;
  int rc, usage;
  char err[1024];
} parsed;

/* Parses "deformd ARGS..." (NULL-terminated) over the defaults. Caller calls done(). */
static void parse_args(parsed *p, const char *const *args) {
  char *argv[16] = {"deformd"};
  int argc = 1;
  while (args[argc - 1]) {
    ASSERT(argc < 15);
    argv[argc] = (char *)args[argc - 1];
    argc++;
  }
  memset(p, 0, sizeof(*p));
  srv_config_init(&p->cfg);
  p->cli.cfg = &p->cfg;
  p->rc = srv_options_parse_argv(&p->cli, argc, argv, &p->usage, p->err, sizeof(p->err));
}

static void parse_json(parsed *p, const char *text) {
  memset(p, 0, sizeof(*p));
  srv_config_init(&p->cfg);
  p->cli.cfg = &p->cfg;
  p->rc = srv_config_load_text(&p->cfg, text, strlen(text), p->err, sizeof(p->err));
}

static void done(parsed *p) { srv_config_fini(&p->cfg); }

/* {"KEY": VALUE}, or {"limits": {"NAME": VALUE}} for "limits.NAME". Static buffer. */
static const char *json_of(const char *key, const char *value) {
  static char buf[10000];
  if (strncmp(key, "limits.", 7) == 0) snprintf(buf, sizeof(buf), "{\"limits\": {\"%s\": %s}}", key + 7, value);
  else snprintf(buf, sizeof(buf), "{\"%s\": %s}", key, value);
  return buf;
}

/* The name a refusal must carry: the flag, or the key's last part (as the file's reader says it). */
static const char *key_word(const srv_option *o) {
  const char *dot = strrchr(o->key, '.');
  return dot ? dot + 1 : o->key;
}

static void *field_of(srv_config *c, const srv_option *o) { return (char *)c + o->offset; }

static double int_field(srv_config *c, const srv_option *o) {
  uint64_t x = 0;
  if (o->size == 4) x = *(uint32_t *)field_of(c, o);
  else if (o->size == 8) x = *(uint64_t *)field_of(c, o);
  else test__fail(__FILE__, __LINE__, "%s: an integer field of %zu bytes", o->flag ? o->flag : o->key, o->size);
  return (double)(x >> o->shift);
}

/* A flag with one value must land (or be refused with the flag's name). */
static void flag_lands(const srv_option *o, const char *value, int expect_ok, double want) {
  parsed p;
  const char *args[] = {o->flag, value, NULL};
  parse_args(&p, args);
  if (!expect_ok) {
    if (p.rc != SRV_EPARAMS) test__fail(__FILE__, __LINE__, "%s %s was accepted", o->flag, value);
    ASSERT_STR_CONTAINS(p.err, o->flag);
  } else {
    if (p.rc != 0) test__fail(__FILE__, __LINE__, "%s %s refused: %s", o->flag, value, p.err);
    if (o->type == SRV_OPT_INT && int_field(&p.cfg, o) != want)
      test__fail(__FILE__, __LINE__, "%s %s: the field holds %.0f", o->flag, value, int_field(&p.cfg, o));
    if (o->type == SRV_OPT_NUMBER) ASSERT(*(double *)field_of(&p.cfg, o) == want);
  }
  done(&p);
}

/* A key with one JSON value must land as `want` (or be refused with the key's name). `keep`:
 * the field must hold its default. */
static void key_lands(const srv_option *o, const char *value, int expect_ok, double want, int keep) {
  parsed p, d;
  parse_json(&p, json_of(o->key, value));
  parse_json(&d, "{}");
  if (!expect_ok) {
    if (p.rc != SRV_EPARAMS) test__fail(__FILE__, __LINE__, "\"%s\": %s was accepted", o->key, value);
    ASSERT_STR_CONTAINS(p.err, key_word(o));
  } else {
    if (p.rc != 0) test__fail(__FILE__, __LINE__, "\"%s\": %s refused: %s", o->key, value, p.err);
    if (keep) want = int_field(&d.cfg, o);
    if (o->type == SRV_OPT_INT && int_field(&p.cfg, o) != want)
      test__fail(__FILE__, __LINE__, "\"%s\": %s: the field holds %.0f", o->key, value, int_field(&p.cfg, o));
    if (o->type == SRV_OPT_NUMBER) ASSERT(*(double *)field_of(&p.cfg, o) == want);
  }
  done(&p);
  done(&d);
}

/* ---- the generic rows ----------------------------------------------------------------------------- */

static void walk_int(const srv_option *o) {
  char lo[32], hi[32], mid[32], over[32], under[32];
  double m = o->min + (o->max > o->min + 7 ? 7 : 0);
  snprintf(lo, sizeof(lo), "%.0f", o->min);
  snprintf(hi, sizeof(hi), "%.0f", o->max);
  snprintf(mid, sizeof(mid), "%.0f", m);
  snprintf(over, sizeof(over), "%.0f", o->max + 1);
  snprintf(under, sizeof(under), "%.0f", o->min - 1);
  if (o->flag) {
    flag_lands(o, lo, 1, o->min);
    flag_lands(o, hi, 1, o->max);
    flag_lands(o, mid, 1, m);
    flag_lands(o, over, 0, 0);
    flag_lands(o, under, 0, 0);
    flag_lands(o, "12x", 0, 0);
    flag_lands(o, "1.5", 0, 0);
  }
  if (o->key) {
    key_lands(o, lo, 1, o->min, 0);
    key_lands(o, hi, 1, o->max, 0);
    key_lands(o, mid, 1, m, 0);
    key_lands(o, over, 0, 0, 0);
    key_lands(o, "-1", 0, 0, 0);
    key_lands(o, "1.5", 0, 0, 0);
    key_lands(o, "\"7\"", 0, 0, 0);
    /* Below min: what the file did before there was a table. */
    if (o->min > 0) {
      if (o->below == SRV_OPT_BELOW_REFUSED) key_lands(o, "0", 0, 0, 0);
      if (o->below == SRV_OPT_BELOW_RAISED) key_lands(o, "0", 1, o->min, 0);
      if (o->below == SRV_OPT_BELOW_KEPT) key_lands(o, "0", 1, 0, 1);
      if (o->below == SRV_OPT_BELOW_TAKEN) key_lands(o, "0", 1, 0, 0);
    }
  }
}

static void walk_number(const srv_option *o) {
  if (o->flag) {
    flag_lands(o, "2.5", 1, 2.5);
    flag_lands(o, "0", 1, 0);
    flag_lands(o, "-1", 0, 0);
    flag_lands(o, "1e9", 0, 0);
    flag_lands(o, "lots", 0, 0);
  }
  if (o->key) {
    key_lands(o, "2.5", 1, 2.5, 0);
    key_lands(o, "-0.5", 0, 0, 0);
    key_lands(o, "1e9", 0, 0, 0);
    key_lands(o, "\"2\"", 0, 0, 0);
  }
}

static void walk_switch(const srv_option *o) {
  parsed p;
  if (o->flag) {
    const char *args[] = {o->flag, NULL};
    parse_args(&p, args);
    /* --relay alone is refused by the check that it needs --redis; the value landed all the same */
    ASSERT(p.rc == 0 || strstr(p.err, "--redis"));
    ASSERT_EQ(*(int *)field_of(&p.cfg, o), 1);
    done(&p);
  }
  if (o->key) {
    parse_json(&p, json_of(o->key, "true"));
    ASSERT_OK(p.rc, p.err);
    ASSERT_EQ(*(int *)field_of(&p.cfg, o), 1);
    done(&p);
    parse_json(&p, json_of(o->key, "false"));
    ASSERT_OK(p.rc, p.err);
    ASSERT_EQ(*(int *)field_of(&p.cfg, o), 0);
    done(&p);
    key_lands(o, "1", 0, 0, 0);
  }
}

static const char *string_field(srv_config *c, const srv_option *o) {
  return o->type == SRV_OPT_TEXT ? (const char *)field_of(c, o) : *(char **)field_of(c, o);
}

static void walk_string(const srv_option *o) {
  size_t longest = o->type == SRV_OPT_TEXT ? o->size - 1 : (size_t)o->max;
  char *just = malloc(longest + 2), *too_long = malloc(longest + 2);
  memset(just, 'a', longest);
  just[longest] = '\0';
  memset(too_long, 'b', longest + 1);
  too_long[longest + 1] = '\0';
  const char *ok[] = {"10.0.0.7", just};
  parsed p;
  for (int k = 0; k < 2; k++) {
    if (o->flag) {
      const char *args[] = {o->flag, ok[k], NULL};
      parse_args(&p, args);
      ASSERT(p.rc == 0 || (o->offset == offsetof(srv_config, tls_cert) && strstr(p.err, "--tls-key")) ||
             (o->offset == offsetof(srv_config, tls_key) && strstr(p.err, "--tls-cert")));
      ASSERT(strcmp(string_field(&p.cfg, o), ok[k]) == 0);
      done(&p);
    }
    if (o->key) {
      char quoted[8192];
      snprintf(quoted, sizeof(quoted), "\"%s\"", ok[k]);
      parse_json(&p, json_of(o->key, quoted));
      ASSERT_OK(p.rc, p.err);
      ASSERT(strcmp(string_field(&p.cfg, o), ok[k]) == 0);
      done(&p);
    }
  }
  char quoted[8192];
  snprintf(quoted, sizeof(quoted), "\"%s\"", too_long);
  if (o->flag) flag_lands(o, too_long, 0, 0);
  if (o->key) key_lands(o, quoted, 0, 0, 0);
  if (o->min > 0 && o->flag) flag_lands(o, "", 0, 0);
  if (o->min > 0 && o->key) key_lands(o, "\"\"", 0, 0, 0);
  if (o->key) key_lands(o, "7", 0, 0, 0);
  free(just);
  free(too_long);
}

/* ---- the rows with setters of their own: each case written here, by field name ------------------- */

static const char *tmp_file(const char *name, const char *text) { return test_write_file(name, text, strlen(text)); }

/* Every CUSTOM row's flag and key must be named here; walk_custom fails on one that is not. */
static void walk_custom(const srv_option *o) {
  const char *name = o->flag ? o->flag : o->key;
  parsed p;
#define ARGS(...)                               \
  do {                                          \
    const char *a_[] = {__VA_ARGS__, NULL};     \
    parse_args(&p, a_);                         \
  } while (0)
#define REFUSED(word)                    \
  do {                                   \
    ASSERT_EQ(p.rc, SRV_EPARAMS);        \
    ASSERT_STR_CONTAINS(p.err, word);    \
    done(&p);                            \
  } while (0)
  if (strcmp(name, "--check-mesh") == 0) {
    ARGS("--check-mesh", "a.obj");
    ASSERT(p.rc == 0 && strcmp(p.cli.check_mesh, "a.obj") == 0 && !p.cli.isolate);
    done(&p);
  } else if (strcmp(name, "--isolate") == 0) {
    ARGS("--isolate", "--check-mesh", "a.obj");
    ASSERT(p.rc == 0 && p.cli.isolate == 1);
    done(&p);
    /* A switch where FILE was expected is read as the switch, FILE after it (it was refused). */
    ARGS("--check-mesh", "--isolate", "a.obj");
    ASSERT(p.rc == 0 && p.cli.isolate == 1 && strcmp(p.cli.check_mesh, "a.obj") == 0);
    done(&p);
  } else if (strcmp(name, "--check-store") == 0) {
    ARGS("--check-store", "/var/lib/deformd");
    ASSERT(p.rc == 0 && strcmp(p.cli.check_store, "/var/lib/deformd") == 0);
    done(&p);
  } else if (strcmp(name, "--write-demo") == 0) {
    ARGS("--write-demo", "out.glb");
    ASSERT(p.rc == 0 && strcmp(p.cli.write_demo, "out.glb") == 0);
    done(&p);
  } else if (strcmp(name, "--config") == 0) {
    const char *f = tmp_file("opt.json", "{\"stream_port\": 1234, \"rpc_port\": 1235}");
    /* Read before the other flags: they override it wherever they stand. */
    ARGS("--rpc-port", "99", "--config", f);
    ASSERT_OK(p.rc, p.err);
    ASSERT_EQ(p.cfg.stream_port, 1234);
    ASSERT_EQ(p.cfg.rpc_port, 99);
    done(&p);
    ARGS("--config", test_tmp_path("none.json"));
    REFUSED("cannot open config file");
    f = tmp_file("bad.json", "{\"stream_port\": -4}");
    ARGS("--config", f);
    REFUSED("\"stream_port\" must be an integer");
  } else if (strcmp(name, "--help") == 0) {
    ARGS("--stream-port", "5", "--help", "--bogus");
    ASSERT_EQ(p.rc, 1);
    ASSERT_EQ(p.cfg.stream_port, 5);
    done(&p);
    ARGS("-h");
    ASSERT_EQ(p.rc, 1);
    done(&p);
  } else if (strcmp(name, "--http-port") == 0) {
    ARGS("--http-port", "off");
    ASSERT(p.rc == 0 && p.cfg.http_port == -1);
    done(&p);
    ARGS("--http-port", "8080");
    ASSERT(p.rc == 0 && p.cfg.http_port == 8080);
    done(&p);
    ARGS("--http-port", "65536");
    REFUSED("--http-port");
    ARGS("--http-port", "on");
    REFUSED("--http-port");
    parse_json(&p, "{\"http_port\": \"off\"}");
    ASSERT(p.rc == 0 && p.cfg.http_port == -1);
    done(&p);
    parse_json(&p, "{\"http_port\": 0}");
    ASSERT(p.rc == 0 && p.cfg.http_port == 0);
    done(&p);
    parse_json(&p, "{\"http_port\": \"on\"}");
    REFUSED("\"http_port\"");
  } else if (strcmp(name, "--demo") == 0) {
    ARGS("--demo");
    ASSERT(p.rc == 0 && p.cfg.session_count == 1);
    ASSERT(strcmp(p.cfg.sessions[0].name, "demo") == 0 && strcmp(p.cfg.sessions[0].mesh, "demo") == 0);
    done(&p);
  } else if (strcmp(name, "--mesh") == 0) {
    ARGS("--mesh", "a.obj", "--session", "a", "--mesh", "b.ply", "--session", "b");
    ASSERT(p.rc == 0 && p.cfg.session_count == 2);
    ASSERT(strcmp(p.cfg.sessions[1].name, "b") == 0 && strcmp(p.cfg.sessions[1].mesh, "b.ply") == 0);
    done(&p);
    ARGS("--mesh", "a.obj");
    REFUSED("--mesh a.obj needs --session NAME");
  } else if (strcmp(name, "--up") == 0) {
    ARGS("--mesh", "a.ply", "--up", "z", "--session", "a", "--mesh", "b.ply", "--session", "b");
    ASSERT(p.rc == 0 && p.cfg.session_count == 2);
    ASSERT(p.cfg.sessions[0].up == 'z' && p.cfg.sessions[1].up == 0); /* each --up is its own session's */
    done(&p);
    ARGS("--up", "y", "--mesh", "a.ply", "--session", "a");
    ASSERT(p.rc == 0 && p.cfg.sessions[0].up == 'y');
    done(&p);
    ARGS("--mesh", "a.ply", "--up", "x", "--session", "a");
    REFUSED("--up takes y or z");
    ARGS("--mesh", "a.ply", "--session", "a", "--up", "z");
    REFUSED("--up z needs --mesh FILE --session NAME");
    parse_json(&p, "{\"sessions\": [{\"session\": \"s\", \"mesh\": \"a.ply\", \"up\": \"z\"}, "
                   "{\"session\": \"t\", \"mesh\": \"demo\"}]}");
    ASSERT(p.rc == 0 && p.cfg.session_count == 2 && p.cfg.sessions[0].up == 'z' && p.cfg.sessions[1].up == 0);
    done(&p);
    parse_json(&p, "{\"sessions\": [{\"session\": \"s\", \"mesh\": \"a.ply\", \"up\": \"Z\"}]}");
    REFUSED("\"up\" in an entry of \"sessions\" must be");
    parse_json(&p, "{\"sessions\": [{\"session\": \"s\", \"mesh\": \"a.ply\", \"up\": 2}]}");
    REFUSED("\"up\" in an entry of \"sessions\" must be");
  } else if (strcmp(name, "--session") == 0) {
    ARGS("--mesh", "a.obj", "--session", "a");
    ASSERT(p.rc == 0 && p.cfg.session_count == 1);
    ASSERT(strcmp(p.cfg.sessions[0].name, "a") == 0 && strcmp(p.cfg.sessions[0].mesh, "a.obj") == 0);
    done(&p);
    ARGS("--session", "a");
    REFUSED("--session NAME must follow --mesh FILE");
    ARGS("--mesh", "a.obj", "--session", "");
    REFUSED("--session");
    parse_json(&p, "{\"sessions\": [{\"session\": \"s\", \"mesh\": \"demo\"}]}");
    ASSERT(p.rc == 0 && p.cfg.session_count == 1 && strcmp(p.cfg.sessions[0].name, "s") == 0);
    done(&p);
    parse_json(&p, "{\"sessions\": [{\"session\": \"\", \"mesh\": \"demo\"}]}");
    REFUSED("\"sessions\"");
    parse_json(&p, "{\"sessions\": {}}");
    REFUSED("\"sessions\"");
    ARGS("--demo", "--relay", "--redis", "redis://h:1");
    REFUSED("a relay owns no session");
  } else if (strcmp(name, "--durability") == 0) {
    ARGS("--durability", "full");
    ASSERT(p.rc == 0 && p.cfg.durability_full == 1);
    done(&p);
    ARGS("--durability", "full", "--durability", "normal");
    ASSERT(p.rc == 0 && p.cfg.durability_full == 0);
    done(&p);
    ARGS("--durability", "fast");
    REFUSED("--durability");
    parse_json(&p, "{\"durability\": \"full\"}");
    ASSERT(p.rc == 0 && p.cfg.durability_full == 1);
    done(&p);
    parse_json(&p, "{\"durability\": 1}");
    REFUSED("\"durability\"");
  } else if (strcmp(name, "--log-level") == 0) {
    ARGS("--log-level", "debug");
    ASSERT(p.rc == 0 && p.cfg.log_level == SRV_LOG_DEBUG);
    done(&p);
    ARGS("--log-level", "loud");
    REFUSED("--log-level");
    parse_json(&p, "{\"log_level\": \"warn\"}");
    ASSERT(p.rc == 0 && p.cfg.log_level == SRV_LOG_WARN);
    done(&p);
    parse_json(&p, "{\"log_level\": \"loud\"}");
    REFUSED("\"log_level\"");
  } else if (strcmp(name, "--reserve-mb") == 0) {
    ARGS("--reserve-mb", "0", "--reserve-mb", "auto");
    ASSERT(p.rc == 0 && p.cfg.reserve_mb == -1);
    done(&p);
    ARGS("--reserve-mb", "1048576");
    ASSERT(p.rc == 0 && p.cfg.reserve_mb == 1048576);
    done(&p);
    ARGS("--reserve-mb", "-1");
    REFUSED("--reserve-mb needs an integer");
    ARGS("--reserve-mb", "1048577");
    REFUSED("--reserve-mb needs an integer");
    parse_json(&p, "{\"reserve_mb\": 12}");
    ASSERT(p.rc == 0 && p.cfg.reserve_mb == 12);
    done(&p);
    parse_json(&p, "{\"reserve_mb\": -1}");
    ASSERT(p.rc == 0 && p.cfg.reserve_mb == -1);
    done(&p);
    parse_json(&p, "{\"reserve_mb\": \"auto\"}");
    REFUSED("\"reserve_mb\"");
    parse_json(&p, "{\"reserve_mb\": 2.5}");
    REFUSED("\"reserve_mb\"");
  } else if (strcmp(name, "token") == 0) {
    parse_json(&p, "{\"token\": \"s3cret-token\"}");
    ASSERT(p.rc == 0 && strcmp(p.cfg.admin_token, "s3cret-token") == 0);
    done(&p);
    parse_json(&p, "{\"token\": \"\"}");
    REFUSED("\"token\"");
    parse_json(&p, "{\"token\": \"a\\tb\"}");
    REFUSED("\"token\"");
  } else if (strcmp(name, "--admin-token-file") == 0) {
    ARGS("--admin-token-file", tmp_file("admin.token", "from-a-file\nnot this\n"));
    ASSERT(p.rc == 0 && strcmp(p.cfg.admin_token, "from-a-file") == 0);
    done(&p);
    ARGS("--admin-token-file", test_tmp_path("no.token"));
    REFUSED("--admin-token-file");
  } else if (strcmp(name, "--token") == 0) {
    ARGS("--token", "abc");
    REFUSED("--token is not accepted");
    ARGS("--token");
    REFUSED("DEFORMD_ADMIN_TOKEN");
  } else if (strcmp(name, "--mesh-dir") == 0) {
    ARGS("--mesh-dir", "/a", "--mesh-dir", "/b");
    ASSERT(p.rc == 0 && p.cfg.mesh_dir_count == 2 && strcmp(p.cfg.mesh_dirs[1], "/b") == 0);
    done(&p);
    parse_json(&p, "{\"mesh_dirs\": [\"/x\", \"/y\", \"/z\"]}");
    ASSERT(p.rc == 0 && p.cfg.mesh_dir_count == 3 && strcmp(p.cfg.mesh_dirs[2], "/z") == 0);
    done(&p);
    parse_json(&p, "{\"mesh_dirs\": [\"/x\", 1]}");
    REFUSED("\"mesh_dirs\"");
    parse_json(&p, "{\"mesh_dirs\": \"/x\"}");
    REFUSED("\"mesh_dirs\"");
  } else if (strcmp(name, "--redis") == 0) {
    ARGS("--redis", "redis://10.0.0.1:6379/2");
    ASSERT(p.rc == 0 && strcmp(p.cfg.redis, "redis://10.0.0.1:6379/2") == 0);
    done(&p);
    ARGS("--redis", "http://10.0.0.1");
    REFUSED("--redis");
    parse_json(&p, "{\"redis\": \"redis://h:1\"}");
    ASSERT(p.rc == 0 && strcmp(p.cfg.redis, "redis://h:1") == 0);
    done(&p);
    parse_json(&p, "{\"redis\": \"h:1\"}");
    REFUSED("\"redis\"");
  } else if (strcmp(name, "--vmc-port") == 0 || strcmp(name, "--livelink-port") == 0) {
    int vmc = name[2] == 'v';
    const char *key = vmc ? "vmc_port" : "livelink_port";
#define FACE_PORT (vmc ? p.cfg.vmc_port : p.cfg.livelink_port)
    parse_json(&p, "{}");
    ASSERT(p.rc == 0 && FACE_PORT == -1); /* off unless asked */
    done(&p);
    ARGS(name, "0");
    ASSERT(p.rc == 0 && FACE_PORT == 0);
    done(&p);
    ARGS(name, "39539");
    ASSERT(p.rc == 0 && FACE_PORT == 39539);
    done(&p);
    ARGS(name, "7", name, "off");
    ASSERT(p.rc == 0 && FACE_PORT == -1);
    done(&p);
    ARGS(name, "65536");
    REFUSED(name);
    ARGS(name, "on");
    REFUSED(name);
    char j[128];
    snprintf(j, sizeof(j), "{\"%s\": 39540}", key);
    parse_json(&p, j);
    ASSERT(p.rc == 0 && FACE_PORT == 39540);
    done(&p);
    snprintf(j, sizeof(j), "{\"%s\": \"off\"}", key);
    parse_json(&p, j);
    ASSERT(p.rc == 0 && FACE_PORT == -1);
    done(&p);
    snprintf(j, sizeof(j), "{\"%s\": -1}", key);
    parse_json(&p, j);
    REFUSED(key);
    ARGS(name, "7", "--relay", "--redis", "redis://h:1");
    REFUSED("a relay owns no session");
#undef FACE_PORT
  } else if (strcmp(name, "face_allow") == 0) {
    parse_json(&p, "{\"face_allow\": [\"192.168.1.23\", \"fe80::1\"]}");
    ASSERT(p.rc == 0 && p.cfg.face_allow_count == 2 && strcmp(p.cfg.face_allow[1], "fe80::1") == 0);
    done(&p);
    parse_json(&p, "{\"face_allow\": \"192.168.1.23\"}");
    REFUSED("\"face_allow\"");
    parse_json(&p, "{\"face_allow\": [\"\"]}");
    REFUSED("\"face_allow\"");
    parse_json(&p, "{\"face_allow\": [7]}");
    REFUSED("\"face_allow\"");
  } else {
    test__fail(__FILE__, __LINE__, "the row %s has a setter of its own and no case in test_options.c", name);
  }
#undef ARGS
#undef REFUSED
}

/* Which srv_config field each setting is, written here by name (not taken from the table): a row
 * pointing at another field fails below. */
#define AT(f) offsetof(srv_config, f)
static const struct {
  const char *name; /* the flag, or the key of a row without one */
  size_t offset;
} FIELDS[] = {
    {"--listen", AT(listen)},
    {"--stream-port", AT(stream_port)},
    {"--rpc-port", AT(rpc_port)},
    {"--http-port", AT(http_port)},
    {"--data", AT(data_dir)},
    {"--durability", AT(durability_full)},
    {"--history-days", AT(history_days)},
    {"--undo-depth", AT(undo_depth)},
    {"--log-level", AT(log_level)},
    {"--reserve-mb", AT(reserve_mb)},
    {"--import-worker-path", AT(import_worker_path)},
    {"--insecure", AT(insecure)},
    {"--tls-cert", AT(tls_cert)},
    {"--tls-key", AT(tls_key)},
    {"--max-upload-mb", AT(max_upload_mb)},
    {"--redis", AT(redis)},
    {"--relay", AT(relay)},
    {"--node-id", AT(node_id)},
    {"--advertise", AT(advertise)},
    {"--snapshot-every", AT(snapshot_every)},
    {"--stream-maxlen", AT(stream_maxlen)},
    {"--lease-ms", AT(lease_ms)},
    {"--redis-timeout-ms", AT(redis_timeout_ms)},
    {"--replica-idle-ms", AT(replica_idle_ms)},
    {"--soft-limit", AT(soft_limit)},
    {"--hard-limit", AT(hard_limit)},
    {"--slow-timeout-ms", AT(slow_timeout_ms)},
    {"--hello-timeout-ms", AT(hello_timeout_ms)},
    {"--idle-timeout-ms", AT(idle_timeout_ms)},
    {"--max-unauth-input", AT(max_unauth_input)},
    {"--max-input-mb", AT(max_input_total)},
    {"--max-connections", AT(max_connections)},
    {"--max-request", AT(max_request)},
    {"--max-frame", AT(max_frame)},
    {"limits.max_json_depth", AT(max_json_depth)},
    {"--max-vertices", AT(max_vertices)},
    {"limits.max_sessions", AT(max_sessions)},
    {"limits.gesture_idle_ms", AT(gesture_idle_ms)},
    {"--session-memory-mb", AT(session_memory_mb)},
    {"--client-memory-mb", AT(client_memory_mb)},
    {"--max-brush-work", AT(max_brush_work)},
    {"--max-file-mb", AT(max_file_mb)},
    {"--import-memory-mb", AT(import_memory_mb)},
    {"--import-seconds", AT(import_seconds)},
    {"--import-workers", AT(import_workers)},
    {"--vmc-port", AT(vmc_port)},
    {"--vmc-listen", AT(vmc_listen)},
    {"--vmc-session", AT(vmc_session)},
    {"--livelink-port", AT(livelink_port)},
    {"--livelink-listen", AT(livelink_listen)},
    {"--livelink-session", AT(livelink_session)},
    {"--face-map", AT(face_map)},
    {"--face-rate", AT(face_rate)},
    {"--face-idle-ms", AT(face_idle_ms)},
    {"--face-flush-ms", AT(face_flush_ms)},
};
#undef AT

TEST(each_row_names_the_field_of_its_setting) {
  size_t n, nf = sizeof(FIELDS) / sizeof(FIELDS[0]);
  const srv_option *t = srv_options_table(&n);
  for (size_t i = 0; i < n; i++) {
    if (t[i].type != SRV_OPT_CUSTOM) ASSERT(t[i].size > 0); /* the generic readers need the field */
    if (!t[i].size) continue;
    const char *name = t[i].flag ? t[i].flag : t[i].key;
    size_t k = 0;
    while (k < nf && strcmp(FIELDS[k].name, name) != 0) k++;
    if (k == nf) test__fail(__FILE__, __LINE__, "%s: add its field to FIELDS in test_options.c", name);
    if (FIELDS[k].offset != t[i].offset) test__fail(__FILE__, __LINE__, "%s: the row points at another field", name);
    for (size_t j = 0; j < i; j++)
      if (t[j].size && t[j].offset == t[i].offset) test__fail(__FILE__, __LINE__, "%s and row %zu share a field", name, j);
  }
}

TEST(every_option_lands_in_the_config_through_each_path_the_table_gives_it) {
  size_t n;
  const srv_option *t = srv_options_table(&n);
  ASSERT(n > 50);
  for (size_t i = 0; i < n; i++) {
    switch (t[i].type) {
    case SRV_OPT_INT: walk_int(&t[i]); break;
    case SRV_OPT_NUMBER: walk_number(&t[i]); break;
    case SRV_OPT_SWITCH: walk_switch(&t[i]); break;
    case SRV_OPT_TEXT:
    case SRV_OPT_STRING: walk_string(&t[i]); break;
    case SRV_OPT_CUSTOM: walk_custom(&t[i]); break;
    }
  }
  /* A few by name, not through the table's offsets: the table points at the right fields. */
  parsed p;
  const char *args[] = {"--max-input-mb", "3", "--listen", "0.0.0.0", "--max-brush-work", "1000000000000000",
                        "--history-days", "1.25", "--insecure", NULL};
  parse_args(&p, args);
  ASSERT_OK(p.rc, p.err);
  ASSERT_EQ(p.cfg.max_input_total, 3u << 20);
  ASSERT(strcmp(p.cfg.listen, "0.0.0.0") == 0);
  ASSERT_EQ(p.cfg.max_brush_work, 1000000000000000ull);
  ASSERT(p.cfg.history_days == 1.25 && p.cfg.insecure == 1);
  done(&p);
  parse_json(&p, "{\"limits\": {\"max_json_depth\": 9, \"gesture_idle_ms\": 77, \"max_sessions\": 5}, "
                 "\"node_id\": \"n1\", \"advertise\": \"10.1.2.3\", \"relay\": true}");
  ASSERT_OK(p.rc, p.err);
  ASSERT(p.cfg.max_json_depth == 9 && p.cfg.gesture_idle_ms == 77 && p.cfg.max_sessions == 5);
  ASSERT(strcmp(p.cfg.node_id, "n1") == 0 && strcmp(p.cfg.advertise, "10.1.2.3") == 0 && p.cfg.relay == 1);
  done(&p);
  /* The file's own mistakes: exact JSON, an object, "limits" an object. */
  parse_json(&p, "{\"stream_port\": 01}");
  ASSERT_EQ(p.rc, SRV_EPARAMS);
  ASSERT_STR_CONTAINS(p.err, "not valid JSON");
  done(&p);
  parse_json(&p, "[1]");
  ASSERT_STR_CONTAINS(p.err, "not a JSON object");
  done(&p);
  parse_json(&p, "{\"limits\": 4}");
  ASSERT_STR_CONTAINS(p.err, "\"limits\" must be an object");
  done(&p);
}

/* Each default --help prints, given to its own flag (or key), is what srv_config_init set. */
TEST(every_default_the_help_prints_is_what_the_server_starts_with) {
  size_t n;
  const srv_option *t = srv_options_table(&n);
  int checked = 0;
  for (size_t i = 0; i < n; i++) {
    const srv_option *o = &t[i];
    if (!o->def) continue;
    ASSERT(o->size > 0);
    srv_config want, got;
    srv_config_init(&want);
    srv_config_init(&got);
    memset(field_of(&got, o), 0x5a, o->size); /* so that a default that does not land shows */
    srv_cli cli = {.cfg = &got};
    char err[512] = "";
    int rc;
    if (o->flag) {
      char *argv[] = {"deformd", (char *)o->flag, (char *)o->def, NULL};
      int usage;
      rc = srv_options_parse_argv(&cli, 3, argv, &usage, err, sizeof(err));
    } else {
      const char *j = json_of(o->key, o->def);
      rc = srv_config_load_text(&got, j, strlen(j), err, sizeof(err));
    }
    if (rc) test__fail(__FILE__, __LINE__, "%s's default %s refused: %s", o->flag ? o->flag : o->key, o->def, err);
    int same = o->type == SRV_OPT_TEXT ? strcmp(field_of(&got, o), field_of(&want, o)) == 0
                                       : memcmp(field_of(&got, o), field_of(&want, o), o->size) == 0;
    if (!same)
      test__fail(__FILE__, __LINE__, "%s: --help says the default is %s, srv_config_init sets another",
                 o->flag ? o->flag : o->key, o->def);
    srv_config_fini(&want);
    srv_config_fini(&got);
    checked++;
  }
  ASSERT(checked > 30);
}

/* ---- --help, as the built binary prints it ------------------------------------------------------- */

static char *run_help(int *status) {
  const char *bin = getenv("DEFORMD_BIN");
  ASSERT(bin != NULL);
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s' --help", bin);
  FILE *f = popen(cmd, "r");
  ASSERT(f != NULL);
  static char out[65536];
  size_t len = fread(out, 1, sizeof(out) - 1, f);
  out[len] = '\0';
  int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

/* Arguments that make `flag` acceptable on its own line: what it needs beside it. */
static int accepted_alone(const srv_option *o, char *err, size_t errlen) {
  const char *cfg = tmp_file("help.json", "{}"), *tok = tmp_file("help.token", "a-token-for-help\n");
  const char *value = o->def ? o->def : o->type == SRV_OPT_INT ? "1000" : "x";
  const char *args[8] = {o->flag, o->arg ? value : NULL};
  if (strcmp(o->flag, "--config") == 0) args[1] = cfg;
  if (strcmp(o->flag, "--admin-token-file") == 0) args[1] = tok;
  if (strcmp(o->flag, "--redis") == 0) args[1] = "redis://127.0.0.1:6379";
  if (strcmp(o->flag, "--relay") == 0) args[1] = "--redis", args[2] = "redis://127.0.0.1:6379";
  if (strcmp(o->flag, "--mesh") == 0) args[2] = "--session", args[3] = "s";
  if (strcmp(o->flag, "--up") == 0) args[1] = "z", args[2] = "--mesh", args[3] = "m.obj", args[4] = "--session", args[5] = "s";
  if (strcmp(o->flag, "--session") == 0) args[0] = "--mesh", args[1] = "m.obj", args[2] = "--session", args[3] = "s";
  if (strcmp(o->flag, "--tls-cert") == 0 || strcmp(o->flag, "--tls-key") == 0)
    args[0] = "--tls-cert", args[1] = "c.pem", args[2] = "--tls-key", args[3] = "k.pem";
  parsed p;
  parse_args(&p, args);
  snprintf(err, errlen, "%s", p.err);
  int rc = p.rc;
  done(&p);
  return rc == 0 || (rc == 1 && strcmp(o->flag, "--help") == 0);
}

TEST(help_names_every_option_the_parser_accepts_and_nothing_it_refuses) {
  int status;
  char *help = run_help(&status);
  ASSERT_EQ(status, 0);
  ASSERT(strstr(help, "usage: deformd") == help);
  /* Every --flag the text names anywhere is a row, accepted, and not a refused one. */
  int named = 0;
  for (char *p = help; (p = strstr(p, "--")) != NULL;) {
    char flag[64];
    size_t k = 0;
    while (k + 1 < sizeof(flag) && (p[k] == '-' || (p[k] >= 'a' && p[k] <= 'z'))) flag[k] = p[k], k++;
    flag[k] = '\0';
    p += k;
    const srv_option *o = srv_options_find_flag(flag);
    if (!o) test__fail(__FILE__, __LINE__, "--help names %s, which the table does not have", flag);
    if (o->flags & SRV_OPT_REFUSED) test__fail(__FILE__, __LINE__, "--help names the refused %s", flag);
    char err[1024];
    if (!accepted_alone(o, err, sizeof(err)))
      test__fail(__FILE__, __LINE__, "--help names %s, which the parser refuses: %s", flag, err);
    named++;
  }
  ASSERT(named > 50);
  ASSERT(strstr(help, "--token ") == NULL && strstr(help, "--token\n") == NULL);
  /* Every row is listed: its flag at the start of a line, and each config key. */
  size_t n;
  const srv_option *t = srv_options_table(&n);
  for (size_t i = 0; i < n; i++) {
    char line[128];
    if (t[i].flags & SRV_OPT_REFUSED) continue;
    if (t[i].flag) {
      snprintf(line, sizeof(line), "\n  %s%s%s", t[i].alias ? t[i].alias : "", t[i].alias ? ", " : "", t[i].flag);
      if (!strstr(help, line)) test__fail(__FILE__, __LINE__, "--help does not list %s", t[i].flag);
    }
    if (t[i].key) {
      snprintf(line, sizeof(line), "\"%s\"", t[i].key);
      if (!strstr(help, line)) test__fail(__FILE__, __LINE__, "--help does not name the key %s", line);
    }
  }
}

/* What deformd does with the refused flag, as a user meets it. */
TEST(deformd_refuses_a_token_on_the_command_line_and_says_where_it_goes) {
  const char *bin = getenv("DEFORMD_BIN");
  ASSERT(bin != NULL);
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s' --data none --token abc 2>'%s'", bin, test_tmp_path("token.err"));
  int st = system(cmd);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  size_t len;
  char *err = (char *)test_read_file(test_tmp_path("token.err"), &len);
  ASSERT_STR_CONTAINS(err, "--token is not accepted");
  ASSERT_STR_CONTAINS(err, "DEFORMD_ADMIN_TOKEN");
  ASSERT_STR_CONTAINS(err, "--admin-token-file");
  free(err);
}

/* deploy/deformd.json is the example with every key: each key of the table is in it, and it loads. */
TEST(the_example_config_has_every_key_of_the_table_and_loads) {
  const char *src = getenv("DEFORMD_SOURCE_DIR");
  ASSERT(src != NULL);
  char path[1024];
  snprintf(path, sizeof(path), "%s/deploy/deformd.json", src);
  size_t len;
  char *text = (char *)test_read_file(path, &len);
  cJSON *root = cJSON_Parse(text);
  ASSERT(root != NULL);
  const cJSON *limits = cJSON_GetObjectItemCaseSensitive(root, "limits");
  size_t n;
  const srv_option *t = srv_options_table(&n);
  for (size_t i = 0; i < n; i++) {
    const char *k = t[i].key;
    if (!k) continue;
    const cJSON *v = strncmp(k, "limits.", 7) == 0 ? cJSON_GetObjectItemCaseSensitive(limits, k + 7)
                                                   : cJSON_GetObjectItemCaseSensitive(root, k);
    if (!v) test__fail(__FILE__, __LINE__, "deploy/deformd.json lacks \"%s\"", k);
  }
  srv_config c;
  srv_config_init(&c);
  char err[512];
  ASSERT_OK(srv_config_load_text(&c, text, len, err, sizeof(err)), err);
  srv_config_fini(&c);
  cJSON_Delete(root);
  free(text);
}
