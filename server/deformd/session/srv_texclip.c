/*
 * srv_texclip.c — a session's animated texture clips (see srv_texclip.h).
 *
 * texclip.upload's job, on the pool: each frame's base64 decoded and its PNG or JPEG decoded
 * (mesh_image_decode, stb_image), every frame checked to have the first one's size and the whole
 * clip, as floats, to fit SRV_TEXCLIP_MAX_BYTES before the rest is decoded (the same limit the
 * PCA's own double copies are sized by: pca_build keeps about two F × 3·W·H double arrays, so a
 * 256 MB clip costs about 1.3 GB at its peak); then texpca_build and the TEXCLIP frame's bytes.
 * On the loop: the clip joins the session and its frame goes to every connection granted
 * "texclip". A clip's frame is encoded once and shared by every join (invariant 3).
 *
 * TEXWEIGHTS follows the player (srv_texclip_show, called where srv_anim_play.c streams a
 * frame): absolute (the clips shown now, each with all its weights), sent only when it differs
 * from the last one, and kept for late joiners.
 *
 * Stored body (schema 5's texclips table): the followed clip's name, fps, the TEXCLIP frame as
 * sent (header included), F and K, F × K float weights, and the report's JSON text; a restore
 * decodes the frame with proto_decode_texclip's checks, so a damaged row fails its session's
 * restore with a reason instead of reaching a viewer.
 *
 * DOES NOT parse requests.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "mesh.h"
#include "mesh_demo_texclip.h"
#include "proto.h"
#include "proto_caps.h"
#include "proto_texclip.h"
#include "pca.h"
#include "srv_base64.h"
#include "srv_bytes.h"
#include "srv_store.h"
#include "srv_error.h"
#include "srv_frame.h"
#include "srv_log.h"
#include "srv_caps.h"
#include "srv_conn.h"
#include "srv_fanout.h"
#include "srv_anim.h"
#include "srv_texclip.h"

typedef struct srv_texclips {
  srv_texclip *head;
  uint32_t count, next_id;
  srv_frame *weights;  /* the last TEXWEIGHTS sent (NULL: none yet) */
  proto_texweights_entry shown[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t shown_count;
} srv_texclips;

typedef struct upload_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session;
  srv_reply reply;
  srv_texclip_spec spec;
  int status;
  char err[512];
  mesh_texclip clip;
  texpca_report report;
  uint32_t width, height;
  uint32_t id;         /* reserved when the upload started (a failed one leaves a gap) */
  proto_buf frame;     /* the TEXCLIP frame */
  double decode_ms;
  int demo;            /* srv_texclip_demo: the frames are made here, not decoded */
  mesh head_bounds;    /* the demo: only the head's bounds, copied on the loop */
} upload_job;

void srv_texclip_spec_fini(srv_texclip_spec *spec) {
  for (uint32_t i = 0; spec->frames && i < spec->frame_count; i++) free(spec->frames[i]);
  free(spec->frames);
  free(spec->name);
  free(spec->follows);
  memset(spec, 0, sizeof(*spec));
}

static void texclip_free(srv_texclip *t) {
  free(t->name);
  free(t->follows);
  mesh_texclip_fini(&t->clip);
  srv_frame_unref(t->frame);
  cJSON_Delete(t->report);
  free(t);
}

static void texclips_fini(srv_session *s) {
  srv_texclips *x = s->texclips;
  if (!x) return;
  while (x->head) {
    srv_texclip *n = x->head->next;
    texclip_free(x->head);
    x->head = n;
  }
  srv_frame_unref(x->weights);
  free(x);
  s->texclips = NULL;
}

static srv_texclips *texclips_of(srv_session *s) {
  if (!s->texclips) {
    s->texclips = calloc(1, sizeof(srv_texclips));
    if (s->texclips) s->texclips_fini = texclips_fini;
  }
  return s->texclips;
}

const srv_texclip *srv_texclip_first(const srv_session *s) { return s->texclips ? s->texclips->head : NULL; }

static srv_texclip *find(const srv_session *s, const char *name) {
  for (srv_texclip *t = s->texclips ? s->texclips->head : NULL; t; t = t->next)
    if (strcmp(t->name, name) == 0) return t;
  return NULL;
}

/* ---- the job ------------------------------------------------------------------------------------ */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Frame f into the float frames (allocated at frame 0, once the size is known). */
static int decode_frame(upload_job *j, uint32_t f, float **frames) {
  uint8_t *bytes = NULL;
  size_t len = 0;
  const char *b64 = j->spec.frames[f];
  int d = srv_base64_decode(b64, strlen(b64), &bytes, &len);
  if (d) {
    snprintf(j->err, sizeof(j->err), d == -2 ? "out of memory" : "frame %u is not base64 (RFC 4648, padded)", f);
    return d == -2 ? SRV_EINTERNAL : SRV_EPARAMS;
  }
  mesh_image img = {0};
  char why[256];
  int rc = mesh_image_decode(bytes, len, &img, why, sizeof(why));
  free(bytes);
  if (rc) {
    snprintf(j->err, sizeof(j->err), "frame %u: %s", f, why);
    return rc == MESH_ENOMEM ? SRV_EINTERNAL : SRV_EPARAMS;
  }
  if (f == 0) {
    size_t need = (size_t)img.width * img.height * 12 * j->spec.frame_count;
    if (img.width > MESH_TEXCLIP_MAX_SIDE || img.height > MESH_TEXCLIP_MAX_SIDE || need > SRV_TEXCLIP_MAX_BYTES) {
      snprintf(j->err, sizeof(j->err), "%u frames of %u × %u texels: each side at most %u and the clip at most %zu MB "
               "as floats (F × W × H × 12 bytes; this one %zu MB)", j->spec.frame_count, img.width, img.height,
               MESH_TEXCLIP_MAX_SIDE, SRV_TEXCLIP_MAX_BYTES >> 20, need >> 20);
      free(img.rgba);
      return SRV_ELIMIT;
    }
    j->width = img.width;
    j->height = img.height;
    *frames = malloc(need);
    if (!*frames) {
      free(img.rgba);
      snprintf(j->err, sizeof(j->err), "out of memory for the frames");
      return SRV_EINTERNAL;
    }
  } else if (img.width != j->width || img.height != j->height) {
    snprintf(j->err, sizeof(j->err), "frame %u is %u × %u texels, frame 0 %u × %u: every frame must have one size", f,
             img.width, img.height, j->width, j->height);
    free(img.rgba);
    return SRV_EPARAMS;
  }
  size_t plane = (size_t)j->width * j->height;
  float *out = *frames + 3 * plane * f;
  for (size_t i = 0; i < plane; i++)
    for (int ch = 0; ch < 3; ch++) out[3 * i + ch] = img.rgba[4 * i + ch] / 255.0f;
  free(img.rgba);
  return 0;
}

/* The TEXCLIP frame of the clip (RGB texels). */
static int encode_clip(upload_job *j) {
  proto_buf_init(&j->frame);
  return texpca_encode_texclip(&j->clip, j->id, j->spec.name, j->spec.fps, &j->frame);
}

/* The demo's frames (mesh_demo_texclip), one per key of "smile-frown", with its two windows. */
static int demo_frames(upload_job *j, float **frames) {
  float smile[MESH_DEMO_CLIP_KEYS], frown[MESH_DEMO_CLIP_KEYS];
  for (uint32_t k = 0; k < MESH_DEMO_CLIP_KEYS; k++) mesh_demo_smile_frown(k, &smile[k], &frown[k]);
  j->width = MESH_DEMO_SKIN_W;
  j->height = MESH_DEMO_SKIN_H;
  j->spec.rect_count = 2;
  if (mesh_demo_texclip(&j->head_bounds, j->width, j->height, smile, frown, MESH_DEMO_CLIP_KEYS, frames,
                        j->spec.rects) == 0)
    return 0;
  snprintf(j->err, sizeof(j->err), "cannot make the demo's frames (out of memory, or a flat head)");
  return SRV_EINTERNAL;
}

static void upload_work(uv_work_t *req) {
  upload_job *j = req->data;
  double t0 = now_ms();
  float *frames = NULL;
  if (j->demo) j->status = demo_frames(j, &frames);
  for (uint32_t f = 0; !j->demo && j->status == 0 && f < j->spec.frame_count; f++) {
    j->status = decode_frame(j, f, &frames);
    free(j->spec.frames[f]); /* the text is not needed again */
    j->spec.frames[f] = NULL;
  }
  j->decode_ms = now_ms() - t0;
  if (j->status == 0) {
    char why[256] = "";
    int rc = texpca_build(frames, j->spec.frame_count, j->width, j->height, j->spec.rects, j->spec.rect_count,
                          j->spec.budget, &j->clip, &j->report, why, sizeof(why));
    if (rc) {
      snprintf(j->err, sizeof(j->err), "texture PCA: %s", why);
      j->status = rc == PCA_ENOMEM ? SRV_EINTERNAL : rc == PCA_EINVAL ? SRV_EPARAMS : SRV_ESOLVER;
    } else if (encode_clip(j) != 0) {
      snprintf(j->err, sizeof(j->err), "out of memory encoding the clip");
      j->status = SRV_EINTERNAL;
    }
  }
  free(frames);
}

static cJSON *report_json(const srv_texclip *t, const upload_job *j) {
  const mesh_texclip *c = &t->clip;
  size_t once = 0, per = 0;
  mesh_texclip_bytes(c, &once, &per);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", t->name);
  cJSON_AddNumberToObject(o, "id", t->id);
  cJSON_AddStringToObject(o, "clip", t->follows);
  cJSON_AddNumberToObject(o, "frames", c->frame_count);
  cJSON_AddNumberToObject(o, "fps", t->fps);
  cJSON_AddNumberToObject(o, "width", c->width);
  cJSON_AddNumberToObject(o, "height", c->height);
  cJSON_AddNumberToObject(o, "components", c->component_count);
  cJSON_AddNumberToObject(o, "layers", c->layers);
  cJSON_AddNumberToObject(o, "max_error", j->report.max_error);
  cJSON_AddNumberToObject(o, "rms_error", j->report.rms_error);
  cJSON_AddBoolToObject(o, "budget_met", j->report.budget_met);
  cJSON *ws = cJSON_AddArrayToObject(o, "windows");
  for (uint32_t r = 0; r < c->window_count; r++) {
    const texpca_window_report *wr = &j->report.windows[r];
    cJSON *w = cJSON_CreateObject();
    cJSON_AddNumberToObject(w, "x", c->windows[r].x);
    cJSON_AddNumberToObject(w, "y", c->windows[r].y);
    cJSON_AddNumberToObject(w, "w", c->windows[r].w);
    cJSON_AddNumberToObject(w, "h", c->windows[r].h);
    cJSON_AddNumberToObject(w, "texels", wr->texels);
    cJSON_AddNumberToObject(w, "rank", wr->rank);
    cJSON_AddNumberToObject(w, "components", wr->components);
    cJSON_AddNumberToObject(w, "max_error", wr->max_error);
    cJSON_AddNumberToObject(w, "rms_error", wr->rms_error);
    cJSON_AddBoolToObject(w, "budget_met", wr->budget_met);
    cJSON_AddItemToArray(ws, w);
  }
  cJSON_AddNumberToObject(o, "texclip_bytes", (double)(t->frame ? t->frame->len : 0));
  cJSON_AddNumberToObject(o, "weights_bytes_per_frame", PROTO_HEADER_SIZE + 1 + 9 + (double)per);
  cJSON_AddNumberToObject(o, "raw_bytes_per_frame", 3.0 * c->width * c->height);
  cJSON_AddNumberToObject(o, "decode_ms", j->decode_ms);
  cJSON_AddNumberToObject(o, "build_ms", j->report.build_ms);
  return o;
}

static void store_clip(srv_server *srv, srv_session *s, const srv_texclip *t);

static void send_to_texclip_viewers(srv_session *s, srv_frame *f) {
  for (srv_conn *c = srv_fanout_first(s); c; c = srv_fanout_next(c))
    if (srv_caps_has(c, PROTO_CAP_TEXCLIP) && srv_conn_send(c, f) != 0)
      srv_log(SRV_LOG_WARN, "connection %u: its queue refused a texture clip frame", c->id);
}

/* Adds the finished clip to the session. Returns 0, SRV_EEXIST, SRV_ELIMIT or SRV_EINTERNAL with msg. */
static int adopt(upload_job *j, srv_texclip **out, char *msg, size_t msglen) {
  srv_session *s = j->session;
  srv_texclips *x = texclips_of(s);
  srv_texclip *t = x ? calloc(1, sizeof(*t)) : NULL;
  if (!t) {
    snprintf(msg, msglen, "out of memory");
    return SRV_EINTERNAL;
  }
  if (find(s, j->spec.name)) {
    snprintf(msg, msglen, "session '%s' got a texture clip '%s' meanwhile", s->name, j->spec.name);
    free(t);
    return SRV_EEXIST;
  }
  if (x->count >= SRV_TEXCLIP_MAX_CLIPS) {
    snprintf(msg, msglen, "session '%s' has %u texture clips already: the limit", s->name, x->count);
    free(t);
    return SRV_ELIMIT;
  }
  t->id = j->id;
  t->frame = srv_frame_from_buf(&j->frame);
  t->name = j->spec.name;
  t->follows = j->spec.follows;
  j->spec.name = j->spec.follows = NULL;
  t->fps = j->spec.fps;
  t->clip = j->clip;
  memset(&j->clip, 0, sizeof(j->clip));
  if (!t->frame) {
    texclip_free(t);
    snprintf(msg, msglen, "out of memory");
    return SRV_EINTERNAL;
  }
  t->report = report_json(t, j);
  srv_texclip **tail = &x->head;
  while (*tail) tail = &(*tail)->next;
  *tail = t;
  x->count++;
  *out = t;
  return 0;
}

static void upload_done(uv_work_t *req, int status) {
  upload_job *j = req->data;
  srv_server *srv = j->srv;
  srv_session *s = j->session;
  srv->pending_jobs--;
  if (status == UV_ECANCELED && !j->status) {
    j->status = SRV_ESHUTDOWN;
    snprintf(j->err, sizeof(j->err), "cancelled");
  }
  char msg[768];
  srv_texclip *t = NULL;
  if (s->closed) {
    snprintf(msg, sizeof(msg), "session '%s' was closed while texture clip '%s' was compressed", s->name,
             j->spec.name);
    srv_reply_error(&j->reply, SRV_ENOSESSION, msg);
  } else if (j->status) {
    snprintf(msg, sizeof(msg), "texture clip '%s': %s", j->spec.name, j->err);
    srv_reply_error(&j->reply, j->status, msg);
  } else {
    int rc = adopt(j, &t, msg, sizeof(msg));
    if (rc) {
      srv_reply_error(&j->reply, rc, msg);
    } else {
      send_to_texclip_viewers(s, t->frame);
      store_clip(srv, s, t);
      if (srv->on_texclip) srv->on_texclip(srv, s, t, NULL);
      srv_log(SRV_LOG_INFO, "session %s: texture clip %s: %u frames of %u × %u, %u components (max error %.2f/255)",
              s->name, t->name, t->clip.frame_count, t->clip.width, t->clip.height, t->clip.component_count,
              j->report.max_error * 255);
      srv_reply_ok(&j->reply, &(srv_result){.kind = SRV_RESULT_TEXCLIP, .texclip = t});
    }
  }
  srv_session_unref(s);
  mesh_texclip_fini(&j->clip);
  proto_buf_fini(&j->frame);
  srv_texclip_spec_fini(&j->spec);
  free(j);
}

static int start_job(srv_server *srv, srv_session *s, srv_texclip_spec *spec, srv_reply reply, int demo, char *err,
                     size_t errlen) {
  if (find(s, spec->name)) {
    snprintf(err, errlen, "session '%s' already has a texture clip called '%s'", s->name, spec->name);
    return SRV_EEXIST;
  }
  if (!s->anim || !srv_anim_find_clip(s->anim, spec->follows)) {
    snprintf(err, errlen, "session '%s' has no clip '%s' for the texture clip to follow (anim.list shows them)",
             s->name, spec->follows);
    return SRV_ENOCLIP;
  }
  if (s->texclips && s->texclips->count >= SRV_TEXCLIP_MAX_CLIPS) {
    snprintf(err, errlen, "session '%s' has %u texture clips: the limit", s->name, SRV_TEXCLIP_MAX_CLIPS);
    return SRV_ELIMIT;
  }
  upload_job *j = calloc(1, sizeof(*j));
  if (!j) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  srv_texclips *x = texclips_of(s);
  if (!x) {
    free(j);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  j->id = x->next_id++;
  j->srv = srv;
  j->session = s;
  j->req.data = j;
  j->spec = *spec;
  j->demo = demo;
  memcpy(j->head_bounds.bbox_min, s->mesh->bbox_min, sizeof(j->head_bounds.bbox_min));
  memcpy(j->head_bounds.bbox_max, s->mesh->bbox_max, sizeof(j->head_bounds.bbox_max));
  if (uv_queue_work(srv->loop, &j->req, upload_work, upload_done) != 0) {
    free(j);
    snprintf(err, errlen, "cannot start the texture clip's job");
    return SRV_EINTERNAL;
  }
  memset(spec, 0, sizeof(*spec));
  j->reply = reply;
  srv->pending_jobs++;
  srv_session_ref(s);
  return 0;
}

int srv_texclip_upload(srv_server *srv, srv_session *s, srv_texclip_spec *spec, srv_reply reply, char *err,
                       size_t errlen) {
  return start_job(srv, s, spec, reply, 0, err, errlen);
}

int srv_texclip_demo(srv_server *srv, srv_session *s, char *err, size_t errlen) {
  srv_texclip_spec spec = {.name = strdup(SRV_TEXCLIP_DEMO), .follows = strdup("smile-frown"),
                           .fps = 1.0f / MESH_DEMO_CLIP_STEP, .frame_count = MESH_DEMO_CLIP_KEYS};
  for (int i = 0; i < 3; i++) spec.budget[i].max_error = 2.0 / 255; /* texclip.upload's default */
  int rc = spec.name && spec.follows ? start_job(srv, s, &spec, (srv_reply){0}, 1, err, errlen) : SRV_EINTERNAL;
  if (rc == SRV_EINTERNAL && (!spec.name || !spec.follows)) snprintf(err, errlen, "out of memory");
  srv_texclip_spec_fini(&spec); /* empty once the job has it */
  return rc;
}

/* ---- the store ------------------------------------------------------------------------------------ */

int srv_texclip_encode(const srv_texclip *t, proto_buf *b) {
  char *json = cJSON_PrintUnformatted(t->report);
  uint32_t F = t->clip.frame_count, K = t->clip.component_count;
  srv_bytes_str(b, t->follows);
  srv_bytes_f32(b, t->fps);
  srv_bytes_varint(b, t->frame->len);
  srv_bytes_put(b, t->frame->data, t->frame->len);
  srv_bytes_varint(b, F);
  srv_bytes_varint(b, K);
  for (size_t i = 0; i < (size_t)F * K; i++) srv_bytes_f32(b, t->clip.weights[i]);
  size_t jl = json ? strlen(json) : 0;
  srv_bytes_varint(b, jl);
  if (jl) srv_bytes_put(b, json, jl);
  free(json);
  return json && !b->failed ? 0 : SRV_EINTERNAL;
}

static void store_clip(srv_server *srv, srv_session *s, const srv_texclip *t) {
  if (!srv->store || !s->store_id) return;
  proto_buf b;
  proto_buf_init(&b);
  if (srv_texclip_encode(t, &b) != 0 || srv_store_put_texclip(srv->store, s->store_id, t->name, b.data, b.len) != 0)
    srv_log(SRV_LOG_ERROR, "session %s: cannot queue texture clip %s for the store (out of memory)", s->name, t->name);
  proto_buf_fini(&b);
}

/* The stored clip's mesh_texclip from its decoded TEXCLIP frame (texels RGB -> RGBA). */
static int clip_from_frame(const proto_texclip *pc, uint32_t F, mesh_texclip *c, char *err, size_t errlen) {
  mesh_texclip_rect rects[MESH_TEXCLIP_MAX_WINDOWS];
  uint32_t count[MESH_TEXCLIP_MAX_WINDOWS];
  for (uint32_t r = 0; r < pc->window_count; r++) {
    if (r) rects[r - 1] = (mesh_texclip_rect){pc->windows[r].x, pc->windows[r].y, pc->windows[r].w, pc->windows[r].h};
    count[r] = pc->windows[r].count;
  }
  if (mesh_texclip_layout(c, pc->width, pc->height, F, rects, pc->window_count - 1u, count, err, errlen) != 0)
    return SRV_EDAMAGED;
  if (c->layers != pc->layers) {
    snprintf(err, errlen, "its frame has %u layers, its windows make %u", pc->layers, c->layers);
    mesh_texclip_fini(c);
    return SRV_EDAMAGED;
  }
  for (uint32_t k = 0; k < pc->component_count; k++)
    c->comps[k] = (mesh_texclip_comp){pc->comps[k].layer, pc->comps[k].x, pc->comps[k].y, pc->comps[k].scale,
                                      pc->comps[k].offset};
  for (size_t i = 0; i < (size_t)c->layers * c->width * c->height; i++) memcpy(c->texels + 4 * i, pc->texels + 3 * i, 3);
  return 0;
}

int srv_texclip_load(srv_session *s, const char *name, const uint8_t *p, size_t n, char *err, size_t errlen) {
  srv_bytes_cur cur = {p, p + n, 0};
  char *follows = srv_bytes_get_str(&cur);
  float fps = srv_bytes_get_f32(&cur);
  uint64_t flen = srv_bytes_get_varint(&cur);
  const uint8_t *frame = cur.p;
  int rc = SRV_EDAMAGED;
  srv_texclip *t = NULL;
  proto_texclip_window w[PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp k[PROTO_TEXCLIP_MAX_COMPONENTS];
  proto_texclip pc = {.windows = w, .comps = k};
  proto_header h;
  if (cur.bad || flen > (uint64_t)(cur.end - cur.p) || flen < PROTO_HEADER_SIZE ||
      proto_header_decode(frame, NULL, &h) != 0 || h.type != PROTO_TEXCLIP || h.length != flen - PROTO_HEADER_SIZE ||
      proto_decode_texclip(frame + PROTO_HEADER_SIZE, h.length, &pc) != 0) {
    snprintf(err, errlen, "texture clip '%s' of session '%s': its stored frame does not decode", name, s->name);
    goto out;
  }
  cur.p += flen;
  uint64_t F = srv_bytes_get_varint(&cur), K = srv_bytes_get_varint(&cur);
  if (cur.bad || K != pc.component_count || F == 0 || F > SRV_TEXCLIP_MAX_FRAMES ||
      F * K * 4 > (uint64_t)(cur.end - cur.p)) {
    snprintf(err, errlen, "texture clip '%s' of session '%s': its stored weights are damaged", name, s->name);
    goto out;
  }
  srv_texclips *x = texclips_of(s);
  t = x ? calloc(1, sizeof(*t)) : NULL;
  if (!t) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
    goto out;
  }
  char why[256] = "";
  if (clip_from_frame(&pc, (uint32_t)F, &t->clip, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "texture clip '%s' of session '%s': %s", name, s->name, why);
    goto out;
  }
  for (size_t i = 0; i < F * K; i++) t->clip.weights[i] = srv_bytes_get_f32(&cur);
  uint64_t jl = srv_bytes_get_varint(&cur);
  if (cur.bad || jl != (uint64_t)(cur.end - cur.p)) {
    snprintf(err, errlen, "texture clip '%s' of session '%s': its stored report is damaged", name, s->name);
    goto out;
  }
  t->report = cJSON_ParseWithLength((const char *)cur.p, (size_t)jl);
  proto_buf fb;
  proto_buf_init(&fb);
  uint8_t *copy = proto_buf_append(&fb, flen);
  if (copy) memcpy(copy, frame, flen);
  t->frame = copy ? srv_frame_from_buf(&fb) : NULL;
  proto_buf_fini(&fb);
  t->name = strdup(name);
  if (!t->report || !t->frame || !t->name) {
    snprintf(err, errlen, "texture clip '%s' of session '%s': out of memory or a damaged report", name, s->name);
    goto out;
  }
  t->follows = follows;
  follows = NULL;
  t->fps = fps;
  t->id = pc.id;
  if (pc.id >= x->next_id) x->next_id = pc.id + 1;
  srv_texclip **at = &x->head; /* in id order, which is upload order, however the rows come */
  while (*at && (*at)->id < t->id) at = &(*at)->next;
  t->next = *at;
  *at = t;
  x->count++;
  t = NULL;
  rc = 0;
out:
  if (t) texclip_free(t);
  free(follows);
  return rc;
}

/* ---- joins and playback --------------------------------------------------------------------------- */

int srv_texclip_join(srv_session *s, srv_conn *c) {
  if (!s->texclips || !srv_caps_has(c, PROTO_CAP_TEXCLIP)) return 0;
  for (srv_texclip *t = s->texclips->head; t; t = t->next)
    if (srv_conn_send(c, t->frame) != 0) return SRV_EINTERNAL;
  if (s->texclips->weights && srv_conn_send(c, s->texclips->weights) != 0) return SRV_EINTERNAL;
  return 0;
}

/* Adds the texture clips following `clip` shown at time t with weight `mix`. */
static void add_entries(const srv_texclips *x, const srv_clip *clip, double t, float mix,
                        proto_texweights_entry *e, uint32_t *n) {
  for (const srv_texclip *tc = x->head; tc && *n < PROTO_TEXWEIGHTS_MAX_CLIPS; tc = tc->next) {
    if (strcmp(tc->follows, clip->name) != 0) continue;
    double fi = floor(t * tc->fps);
    uint32_t f = fi <= 0 ? 0 : fi >= tc->clip.frame_count - 1 ? tc->clip.frame_count - 1 : (uint32_t)fi;
    proto_texweights_entry *o = &e[(*n)++];
    o->id = tc->id;
    o->mean = mix;
    o->count = (uint8_t)tc->clip.component_count;
    const float *w = tc->clip.weights + (size_t)f * tc->clip.component_count;
    for (uint32_t k = 0; k < o->count; k++) o->weights[k] = mix * w[k];
  }
}

void srv_texclip_show(srv_server *srv, srv_session *s) {
  srv_texclips *x = s->texclips;
  if (!x || !x->head) return;
  const srv_anim *a = s->anim;
  proto_texweights_entry e[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t n = 0;
  if (a && a->cur.clip) {
    double alpha = a->next.clip ? (a->fade_duration > 0 ? a->fade_elapsed / a->fade_duration : 1.0) : 0.0;
    alpha = alpha > 1 ? 1 : alpha;
    add_entries(x, a->cur.clip, a->cur.t, (float)(1.0 - alpha), e, &n);
    if (a->next.clip) add_entries(x, a->next.clip, a->next.t, (float)alpha, e, &n);
  }
  int same = n == x->shown_count && x->weights;
  for (uint32_t i = 0; same && i < n; i++)
    same = e[i].id == x->shown[i].id && e[i].mean == x->shown[i].mean && e[i].count == x->shown[i].count &&
           memcmp(e[i].weights, x->shown[i].weights, sizeof(float) * e[i].count) == 0;
  if (same) return;
  proto_buf b;
  proto_buf_init(&b);
  srv_frame *f = proto_encode_texweights(&b, e, n) == 0 ? srv_frame_from_buf(&b) : NULL;
  proto_buf_fini(&b);
  if (!f) {
    srv_log(SRV_LOG_WARN, "session %s: out of memory for a texture weights frame", s->name);
    return;
  }
  memcpy(x->shown, e, sizeof(e[0]) * n);
  x->shown_count = n;
  srv_frame_unref(x->weights);
  x->weights = f;
  send_to_texclip_viewers(s, f);
  if (srv->on_texclip) srv->on_texclip(srv, s, NULL, f);
}

/* ---- a relay's replica ------------------------------------------------------------------------------ */

const struct srv_frame *srv_texclip_weights(const srv_session *s) { return s->texclips ? s->texclips->weights : NULL; }

int srv_texclip_has(const srv_session *s, const char *name) { return find(s, name) != NULL; }

int srv_texclip_follow_clip(srv_session *s, const char *name, const uint8_t *p, size_t n, char *err, size_t errlen) {
  if (find(s, name)) return 0; /* had it from the snapshot's load already */
  int rc = srv_texclip_load(s, name, p, n, err, errlen);
  if (rc) return rc;
  srv_texclip *t = find(s, name);
  if (t) send_to_texclip_viewers(s, t->frame);
  return 0;
}

int srv_texclip_follow_weights(srv_session *s, const uint8_t *frame, size_t n, int send, char *err, size_t errlen) {
  proto_header h;
  proto_texweights_entry e[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t count = 0;
  if (n < PROTO_HEADER_SIZE || proto_header_decode(frame, NULL, &h) != 0 || h.type != PROTO_TEXWEIGHTS ||
      h.length != n - PROTO_HEADER_SIZE || proto_decode_texweights(frame + PROTO_HEADER_SIZE, h.length, e, &count) != 0) {
    snprintf(err, errlen, "session '%s': a texture weights frame that does not decode", s->name);
    return SRV_EDAMAGED;
  }
  srv_texclips *x = texclips_of(s);
  proto_buf b;
  proto_buf_init(&b);
  uint8_t *copy = x ? proto_buf_append(&b, n) : NULL;
  if (copy) memcpy(copy, frame, n);
  srv_frame *f = copy ? srv_frame_from_buf(&b) : NULL;
  proto_buf_fini(&b);
  if (!f) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  memcpy(x->shown, e, sizeof(e[0]) * count);
  x->shown_count = count;
  srv_frame_unref(x->weights);
  x->weights = f;
  if (send) send_to_texclip_viewers(s, f);
  return 0;
}
