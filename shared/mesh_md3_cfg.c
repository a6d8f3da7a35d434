/*
 * mesh_md3_cfg.c — the clips of a Quake III player model: the animation.cfg beside its MD3
 * files, read the way the game reads it (cgame's CG_ParseAnimationFile): optional keywords
 * (sex, footsteps, headoffset, fixedlegs, fixedtorso), then four numbers per animation — first
 * frame, frame count, looping frames, frames per second — for the animations in the game's
 * order. `//` and block comments are ignored, as are numbers past the 31 animations the game
 * reads.
 *
 * One MD3 holds one part of the player: lower.md3 the legs (BOTH_ and LEGS_ animations),
 * upper.md3 the torso (BOTH_ and TORSO_). The file numbers the legs' frames as if the torso's
 * came first; the game subtracts that gap (LEGS_WALKCR's first frame minus TORSO_GESTURE's) from
 * every LEGS_ animation, and so does this file for a lower*.md3.
 *
 * DOES NOT read the MD3 itself (mesh_md3.c), play clips, or reverse the frames of an animation
 * whose count is negative (its range is kept, played forwards).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

/* The game's animation numbers (bg_public.h animNumber_t), in the order animation.cfg lists
 * them. */
static const char *const anim_names[] = {
    "BOTH_DEATH1",   "BOTH_DEAD1",      "BOTH_DEATH2",   "BOTH_DEAD2",      "BOTH_DEATH3",        "BOTH_DEAD3",
    "TORSO_GESTURE", "TORSO_ATTACK",    "TORSO_ATTACK2", "TORSO_DROP",      "TORSO_RAISE",        "TORSO_STAND",
    "TORSO_STAND2",  "LEGS_WALKCR",     "LEGS_WALK",     "LEGS_RUN",        "LEGS_BACK",          "LEGS_SWIM",
    "LEGS_JUMP",     "LEGS_LAND",       "LEGS_JUMPB",    "LEGS_LANDB",      "LEGS_IDLE",          "LEGS_IDLECR",
    "LEGS_TURN",     "TORSO_GETFLAG",   "TORSO_GUARDBASE", "TORSO_PATROL",  "TORSO_FOLLOWME",     "TORSO_AFFIRMATIVE",
    "TORSO_NEGATIVE"};
enum { ANIMS = sizeof(anim_names) / sizeof(anim_names[0]), TORSO_GESTURE = 6, LEGS_WALKCR = 13, LEGS_LAST = 24 };

#define CFG_MAX_BYTES (1 << 16) /* the game's own buffer is 20000 bytes */

typedef struct cfg_lexer {
  const char *at, *end;
  int line;
} cfg_lexer;

/* The next token (whitespace-separated, comments skipped) into tok; 0 at the end. */
static int next_token(cfg_lexer *l, char *tok, size_t cap, int *line) {
  for (;;) {
    while (l->at < l->end && isspace((unsigned char)*l->at)) {
      if (*l->at == '\n') l->line++;
      l->at++;
    }
    if (l->end - l->at >= 2 && l->at[0] == '/' && l->at[1] == '/') {
      while (l->at < l->end && *l->at != '\n') l->at++;
      continue;
    }
    if (l->end - l->at >= 2 && l->at[0] == '/' && l->at[1] == '*') {
      l->at += 2;
      while (l->end - l->at >= 2 && !(l->at[0] == '*' && l->at[1] == '/')) l->line += *l->at++ == '\n';
      l->at = l->end - l->at >= 2 ? l->at + 2 : l->end;
      continue;
    }
    break;
  }
  if (l->at >= l->end) return 0;
  size_t n = 0;
  *line = l->line;
  while (l->at < l->end && !isspace((unsigned char)*l->at)) {
    if (n + 1 < cap) tok[n++] = *l->at;
    l->at++;
  }
  tok[n] = '\0';
  return 1;
}

static int is_number(const char *t) { return (t[0] >= '0' && t[0] <= '9') || (t[0] == '-' && t[1] >= '0' && t[1] <= '9'); }

typedef struct cfg_anim {
  long first, count, loop;
  double fps;
} cfg_anim;

/* Parses the animations of `text`. Returns how many (0 .. ANIMS), or a MESH_E* code. */
static int parse(const char *text, size_t len, cfg_anim *anims, char *err, size_t errlen) {
  cfg_lexer l = {text, text + len, 1};
  char tok[64];
  int line, have = 0;
  /* Keywords first (their arguments skipped), until the first number. */
  for (;;) {
    if (!next_token(&l, tok, sizeof(tok), &line)) return 0;
    if (is_number(tok)) break;
    int args = strcmp(tok, "headoffset") == 0 ? 3 : strcmp(tok, "footsteps") == 0 || strcmp(tok, "sex") == 0 ? 1 : 0;
    for (int i = 0; i < args; i++)
      if (!next_token(&l, tok, sizeof(tok), &line)) return 0;
  }
  for (int a = 0; a < ANIMS; a++) {
    double v[4];
    for (int k = 0; k < 4; k++) {
      if (k > 0 || a > 0) {
        if (!next_token(&l, tok, sizeof(tok), &line)) {
          if (k == 0) return have; /* the animations may stop early (before Team Arena's) */
          mesh__set_err(err, errlen, "animation.cfg line %d: %s stops after %d of its 4 numbers", line,
                        anim_names[a], k);
          return MESH_EFORMAT;
        }
      }
      char *end = NULL;
      errno = 0;
      v[k] = k == 3 ? strtod(tok, &end) : (double)strtol(tok, &end, 10);
      if (!is_number(tok) || !end || *end || errno || !isfinite(v[k]) || (k < 3 && fabs(v[k]) > 1e7)) {
        mesh__set_err(err, errlen, "animation.cfg line %d: '%s' (%s) is not a %s", line, tok, anim_names[a],
                      k == 3 ? "number" : "whole number");
        return MESH_EFORMAT;
      }
    }
    if (v[0] < 0) {
      mesh__set_err(err, errlen, "animation.cfg line %d: %s starts at frame %.0f", line, anim_names[a], v[0]);
      return MESH_EFORMAT;
    }
    anims[a].first = (long)v[0];
    anims[a].count = (long)fabs(v[1]); /* negative: the game plays it backwards */
    anims[a].loop = v[2] > 0 ? (long)v[2] : 0;
    anims[a].fps = v[3] > 0 ? v[3] : 1.0; /* as the game: a rate of 0 is 1 */
    have = a + 1;
  }
  return have;
}

/* Which animations a model gets: 1 for lower*, 2 for upper*, 0 for any other. */
static int model_part(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "lower", 5) == 0) return 1;
  if (strncmp(base, "upper", 5) == 0) return 2;
  return 0;
}

static int wanted(int part, int a) {
  if (part == 0 || a < TORSO_GESTURE) return 1;
  int legs = a >= LEGS_WALKCR && a <= LEGS_LAST;
  return part == 1 ? legs : !legs;
}

int mesh__md3_cfg_clips(const char *model_path, mesh *m, char *err, size_t errlen) {
  const char *slash = strrchr(model_path, '/');
  size_t dir = slash ? (size_t)(slash - model_path) + 1 : 0;
  char *path = malloc(dir + sizeof("animation.cfg"));
  if (!path) return MESH_ENOMEM;
  memcpy(path, model_path, dir);
  memcpy(path + dir, "animation.cfg", sizeof("animation.cfg"));
  FILE *f = fopen(path, "rb");
  free(path);
  if (!f) return 0; /* none: the frame names are all there is */
  char *text = malloc(CFG_MAX_BYTES + 1);
  size_t len = text ? fread(text, 1, CFG_MAX_BYTES + 1, f) : 0;
  fclose(f);
  if (!text) return MESH_ENOMEM;
  if (len > CFG_MAX_BYTES) {
    free(text);
    mesh__set_err(err, errlen, "animation.cfg is over %d bytes", CFG_MAX_BYTES);
    return MESH_EFORMAT;
  }
  cfg_anim anims[ANIMS];
  int n = parse(text, len, anims, err, errlen);
  free(text);
  if (n < 0) return n;
  int part = model_part(model_path);
  long skip = part == 1 && n > LEGS_WALKCR ? anims[LEGS_WALKCR].first - anims[TORSO_GESTURE].first : 0;
  mesh_clip *grown = realloc(m->clips, sizeof(*grown) * ((size_t)m->clip_count + ANIMS));
  if (!grown) return MESH_ENOMEM;
  m->clips = grown;
  for (int a = 0; a < n; a++) {
    if (!wanted(part, a)) continue;
    long first = anims[a].first - (a >= LEGS_WALKCR && a <= LEGS_LAST ? skip : 0), count = anims[a].count;
    if (first < 0 || count <= 0 || first >= (long)m->frame_count) continue; /* not in this model's frames */
    if (first + count > (long)m->frame_count) count = (long)m->frame_count - first;
    mesh_clip *c = &m->clips[m->clip_count];
    memset(c, 0, sizeof(*c));
    c->name = mesh__strdup(anim_names[a]);
    if (!c->name) return MESH_ENOMEM;
    c->first_frame = (uint32_t)first;
    c->frame_count = (uint32_t)count;
    c->fps = (float)anims[a].fps;
    c->play_once = anims[a].loop == 0;
    c->loop_frames = anims[a].loop > 0 && anims[a].loop < count ? (uint32_t)anims[a].loop : 0;
    m->clip_count++;
  }
  return 0;
}
