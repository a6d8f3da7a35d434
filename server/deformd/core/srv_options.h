/*
 * srv_options.h — deformd's option table: one row per setting, and the three things made from it
 * (the command line, the JSON config file, --help).
 *
 * A row names the setting's command-line flag and/or config-file key, its type and bounds, its
 * default as the flag would spell it, and one help line. Generic types (integers, numbers,
 * switches, strings) are read and stored by the table's own code through the row's offset into
 * srv_config; a setting with behaviour of its own (--data none, --reserve-mb auto, --mesh and
 * --session, the modes) has a setter callback in its row. Adding a setting is adding a row.
 *
 * DOES NOT hold the settings (srv_config.h) nor start anything: main.c runs the mode it is given.
 */
#ifndef DEFORMD_SRV_OPTIONS_H
#define DEFORMD_SRV_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "srv_config.h"

struct cJSON;

/* What main() does once the command line is read. */
typedef struct srv_cli {
  srv_config *cfg;
  const char *check_mesh;   /* --check-mesh FILE (argv's string) */
  const char *check_store;  /* --check-store DIR */
  const char *write_demo;   /* --write-demo OUT */
  int isolate;              /* --isolate */
  const char *pending_mesh; /* --mesh FILE waiting for its --session NAME */
  const char *pending_up;   /* --up AXIS waiting for the same */
} srv_cli;

typedef enum srv_opt_type {
  SRV_OPT_INT,    /* a whole number within [min, max], stored in a field of `size` bytes */
  SRV_OPT_NUMBER, /* a number within [min, max], stored as a double */
  SRV_OPT_SWITCH, /* a flag without a value (sets 1); true or false in the config file */
  SRV_OPT_TEXT,   /* a string into a char array of `size` bytes (shorter than it) */
  SRV_OPT_STRING, /* a heap string (srv_config_set_string) of min to max bytes */
  SRV_OPT_CUSTOM, /* only the row's setters know it */
} srv_opt_type;

/* Row flags. */
enum {
  SRV_OPT_REFUSED = 1 << 0, /* the flag exists only to be refused with a reason; never listed */
  SRV_OPT_EARLY = 1 << 1,   /* read before the other flags (--config: the others override it) */
  SRV_OPT_REPEAT = 1 << 2,  /* may be given more than once (listed so in --help) */
};

/* What the config file does with an integer below `min` (the file and the flag grew apart before
 * there was a table; files in use keep meaning what they meant). */
typedef enum srv_opt_below {
  SRV_OPT_BELOW_REFUSED, /* refused, as on the command line */
  SRV_OPT_BELOW_RAISED,  /* taken as min */
  SRV_OPT_BELOW_KEPT,    /* 0 keeps the value set before */
  SRV_OPT_BELOW_TAKEN,   /* taken as given, down to 0 */
} srv_opt_below;

/* Help sections, in the order --help prints them. */
typedef enum srv_opt_group {
  SRV_OPT_G_MODE,
  SRV_OPT_G_SERVER,
  SRV_OPT_G_ACCESS,
  SRV_OPT_G_FILES,
  SRV_OPT_G_CLUSTER,
  SRV_OPT_G_FACE,
  SRV_OPT_G_LIMITS,
  SRV_OPT_G_COUNT
} srv_opt_group;

typedef struct srv_option srv_option;
/* A flag's setter: `value` is the argument (NULL for a flag without one). Returns 0, 1 to stop
 * reading the command line (--help), or SRV_EPARAMS with a reason in err. */
typedef int (*srv_opt_cli_fn)(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
/* A config key's setter: `v` is the key's value. Returns 0 or SRV_EPARAMS with a reason. */
typedef int (*srv_opt_key_fn)(srv_config *c, const srv_option *o, const struct cJSON *v, char *err, size_t errlen);

struct srv_option {
  const char *flag;     /* "--stream-port", or NULL: config file only */
  const char *alias;    /* another spelling of the flag ("-h"), or NULL */
  const char *key;      /* "stream_port", "limits.max_frame", or NULL: command line only */
  const char *arg;      /* what the flag's value is called in --help ("N"); NULL: no value */
  srv_opt_type type;
  srv_opt_group group;
  unsigned flags;
  size_t offset, size;  /* the srv_config field (generic types) */
  double min, max;      /* INT, NUMBER: the value; STRING: its length in bytes */
  unsigned shift;       /* INT: the field holds value << shift (MiB into bytes) */
  srv_opt_below below;  /* INT, config file: below min */
  const char *def;      /* the default as the flag spells it; NULL: computed (the help says how) */
  const char *what;     /* the accepted values in words, for refusals ("a numeric address");
                         * NULL for INT and NUMBER: "an integer between MIN and MAX" */
  const char *help;     /* one line; '\n' continues it, indented */
  srv_opt_cli_fn cli;   /* NULL: the generic reader of `type` */
  srv_opt_key_fn set_key;
};

/* The table; *count gets its length. Static storage. */
const srv_option *srv_options_table(size_t *count);
/* The row for a flag or a config key ("limits.max_frame"); NULL if none. */
const srv_option *srv_options_find_flag(const char *flag);
const srv_option *srv_options_find_key(const char *key);

/* Reads argv[1..argc) into cli (and cli->cfg): first the SRV_OPT_EARLY flags (--config), then
 * the others in order, then the checks between options (--mesh without --session, --relay
 * without --redis, ...). Returns 0, 1 when --help was asked (nothing after it is read), or
 * SRV_EPARAMS with the reason in err (`usage` set when it is an unknown or incomplete flag, after
 * which --help's text helps). Strings in cli point into argv. */
int srv_options_parse_argv(srv_cli *cli, int argc, char **argv, int *usage, char *err, size_t errlen);
/* Prints --help, made from the table. */
void srv_options_usage(FILE *out);

/* Reads a JSON config file over the current values. Returns 0 or SRV_EPARAMS with a reason in
 * err. */
int srv_config_load(srv_config *c, const char *path, char *err, size_t errlen);
/* The same from text already in memory (text[0..len), exact JSON: srv_json_check). Settings read
 * before a mistake is found stay set. */
int srv_config_load_text(srv_config *c, const char *text, size_t len, char *err, size_t errlen);

#endif
