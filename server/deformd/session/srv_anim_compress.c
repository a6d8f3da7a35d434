/*
 * srv_anim_compress.c — anim.compress: a frame clip becomes a PCA basis on the thread pool
 * (pca.c, one model over every vertex or one per region), whose mean and components are added
 * to the session as morph targets in one operation; each frame is then K weights, quantised to
 * 8 bits where the frame a viewer rebuilds stays within the error budget (pca_stream_choose).
 *
 * The job reads the clip's frames in place (keyframe clips) or evaluates them first (recorded
 * and weight clips), and copies the session's targets when it starts, so the loop goes on.
 *
 * DOES NOT parse requests (srv_anim_rpc.c) or play anything (srv_anim_play.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pca.h"
#include "pca_stream.h"
#include <cjson/cJSON.h>
#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_store.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_anim.h"

typedef struct compress_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session;
  srv_clip *clip;
  srv_reply reply;
  char *prefix;
  uint32_t author;
  pca_options opt;
  double max_error_rel;
  uint32_t *region_of; /* NULL: one PCA over the whole mesh */
  uint32_t region_count;
  mesh view;           /* the session's mesh with the targets captured now */
  mesh_target *targets;
  /* results */
  int status;
  char err[512];
  float *frames;       /* F × 3V (owned unless it points at the mesh's keyframes) */
  int own_frames;
  pca_model model;
  pca_regions regions;
  uint32_t global_components; /* with regions: what one PCA over every vertex needs for the same budget */
  uint32_t K;
  float *mean;         /* 3V */
  float *deltas;       /* K × 3V: component k scaled by its largest weight */
  uint32_t *vidx;      /* per component: vertex list (regions) or NULL (every vertex) */
  uint32_t *vcount;    /* per component */
  uint32_t **vlist;
  float *fw;           /* F × K in [-1, 1] */
  int weight_bits;     /* 8: 8-bit frames where the budget allows; 16: always 16-bit */
  uint8_t *narrow;     /* F: frame f streams 8-bit weights */
  pca_stream_result sr; /* the error and size of what viewers get */
} compress_job;

/* Fills j->frames: the clip's frames as full positions. */
static int clip_frames(compress_job *j) {
  const srv_clip *c = j->clip;
  const mesh *m = &j->view;
  size_t n3 = 3 * (size_t)m->vertex_count;
  if (c->kind == CLIP_KEYFRAMES) {
    j->frames = (float *)c->frames;
    return 0;
  }
  j->frames = malloc(sizeof(float) * n3 * c->frame_count);
  float *w = calloc(m->target_count + 1, sizeof(float)), *off = malloc(sizeof(float) * (n3 + 1));
  if (!j->frames || !w || !off) {
    free(w);
    free(off);
    return MESH_ENOMEM;
  }
  j->own_frames = 1;
  for (uint32_t f = 0; f < c->frame_count; f++) {
    mesh v = *m;
    if (c->kind == CLIP_WEIGHTS) {
      memset(w, 0, sizeof(float) * m->target_count);
      memcpy(w, c->wclip->weights + (size_t)f * c->wclip_targets, sizeof(float) * c->wclip_targets);
      mesh_evaluate(&v, w, NULL, j->frames + n3 * f);
    } else {
      const rec_frame *r = &c->rec[f];
      v.targets = c->rec_targets;
      v.target_count = r->target_count;
      for (size_t i = 0; i < n3; i++) off[i] = proto_dequantize(r->offsets->q[i], j->session->offset_quantum);
      mesh_evaluate(&v, r->weights, off, j->frames + n3 * f);
    }
  }
  free(w);
  free(off);
  return 0;
}

static void compress_work(uv_work_t *req) {
  compress_job *j = req->data;
  const srv_clip *c = j->clip;
  const mesh *m = &j->view;
  uint32_t V = m->vertex_count, F = c->frame_count;
  size_t n3 = 3 * (size_t)V;
  double diag = mesh_bbox_diagonal(m);
  if (j->opt.components == 0) j->opt.max_error = j->max_error_rel * diag;
  j->status = clip_frames(j);
  if (j->status) {
    snprintf(j->err, sizeof(j->err), "out of memory evaluating the clip's frames");
    return;
  }
  /* The decomposition: one model over every vertex, or one per region. */
  const pca_model **models = NULL;
  uint32_t nmodels = 1;
  if (j->region_of) {
    j->status = pca_build_regions(j->frames, F, V, j->region_of, j->region_count, &j->opt, &j->regions, j->err,
                                  sizeof(j->err));
    nmodels = j->region_count;
    /* The saving is reported against one PCA of the whole mesh at the same budget. */
    pca_model whole;
    if (j->status == 0 && pca_build(j->frames, F, V, &j->opt, &whole, j->err, sizeof(j->err)) == 0) {
      j->global_components = whole.components;
      pca_fini(&whole);
    }
  } else {
    j->status = pca_build(j->frames, F, V, &j->opt, &j->model, j->err, sizeof(j->err));
  }
  if (j->status) return;
  models = malloc(sizeof(*models) * nmodels);
  j->mean = malloc(sizeof(float) * (n3 + 1));
  if (!models || !j->mean) goto oom;
  uint32_t K = 0;
  for (uint32_t r = 0; r < nmodels; r++) {
    models[r] = j->region_of ? &j->regions.regions[r].model : &j->model;
    K += models[r]->components;
  }
  j->K = K;
  j->deltas = malloc(sizeof(float) * n3 * (K ? K : 1));
  j->vcount = calloc(K + 1, sizeof(uint32_t));
  j->vlist = calloc(K + 1, sizeof(uint32_t *));
  j->fw = malloc(sizeof(float) * (size_t)F * (K ? K : 1));
  if (!j->deltas || !j->vcount || !j->vlist || !j->fw) goto oom;
  /* Mean, and each component scaled by its largest |weight| so the streamed weights are in
   * [-1, 1] (what the targets' sliders show); the shape is the same. */
  memcpy(j->mean, m->positions, sizeof(float) * n3);
  memset(j->deltas, 0, sizeof(float) * n3 * K);
  uint32_t k0 = 0;
  for (uint32_t r = 0; r < nmodels; r++) {
    const pca_model *pm = models[r];
    uint32_t nv = j->region_of ? j->regions.regions[r].vertex_count : V;
    const uint32_t *verts = j->region_of ? j->regions.regions[r].vertices : NULL;
    for (uint32_t i = 0; i < nv; i++)
      for (int d = 0; d < 3; d++) j->mean[3 * (size_t)(verts ? verts[i] : i) + d] = pm->mean[3 * (size_t)i + d];
    pca_stream_scale(pm, verts, V, k0, K, j->deltas, j->fw);
    for (uint32_t k = 0; k < pm->components; k++) {
      j->vcount[k0 + k] = nv;
      j->vlist[k0 + k] = (uint32_t *)verts; /* borrowed from the regions (freed with them) */
    }
    k0 += pm->components;
  }
  /* The error viewers see: each frame rebuilt from its quantised weights, as they rebuild it;
   * 8-bit weights for the frames where that stays within the budget (the one asked for, or with
   * a component count, the largest error the unquantised components already have). */
  double budget = j->opt.components == 0 ? j->opt.max_error
                  : j->region_of         ? j->regions.max_error
                                         : j->model.max_error;
  j->narrow = malloc(F + 1);
  if (!j->narrow ||
      pca_stream_choose(j->frames, F, V, j->mean, j->deltas, j->fw, K, budget, j->weight_bits == 8, j->narrow, &j->sr))
    goto oom;
  free(models);
  return;
oom:
  free(models);
  j->status = MESH_ENOMEM;
  snprintf(j->err, sizeof(j->err), "out of memory building the compressed clip");
}

static void compress_job_free(compress_job *j) {
  if (j->own_frames) free(j->frames);
  if (j->region_of) pca_regions_fini(&j->regions);
  else pca_fini(&j->model);
  free(j->region_of);
  free(j->targets);
  free(j->mean);
  free(j->deltas);
  free(j->vcount);
  free(j->vlist);
  free(j->fw);
  free(j->narrow);
  free(j->prefix);
  free(j);
}

/* The targets a compressed clip adds: "<prefix>.mean", then "<prefix>.pc1" ... */
static int add_basis_targets(srv_server *srv, compress_job *j, uint64_t *version, char *why, size_t whylen) {
  srv_session *s = j->session;
  uint32_t V = s->mesh->vertex_count, K = j->K;
  size_t n3 = 3 * (size_t)V;
  srv_new_target *nt = calloc(K + 1, sizeof(*nt));
  char **names = calloc(K + 1, sizeof(char *));
  uint32_t **idx = calloc(K + 1, sizeof(uint32_t *));
  float **del = calloc(K + 1, sizeof(float *));
  int rc = nt && names && idx && del ? 0 : -1;
  for (uint32_t k = 0; rc == 0 && k <= K; k++) {
    /* k = 0: the mean's offset from the base; k ≥ 1: component k. Only non-zero vertices. */
    const float *src = k == 0 ? NULL : j->deltas + n3 * (k - 1);
    idx[k] = malloc(sizeof(uint32_t) * (V + 1));
    del[k] = malloc(sizeof(float) * (n3 + 1));
    names[k] = malloc(PROTO_MAX_NAME + 1);
    if (!idx[k] || !del[k] || !names[k]) {
      rc = -1;
      break;
    }
    uint32_t n = 0;
    for (uint32_t v = 0; v < V; v++) {
      float d[3];
      for (int c = 0; c < 3; c++)
        d[c] = k == 0 ? j->mean[3 * (size_t)v + c] - s->mesh->positions[3 * (size_t)v + c] : src[3 * (size_t)v + c];
      if (d[0] == 0 && d[1] == 0 && d[2] == 0) continue;
      idx[k][n] = v;
      memcpy(del[k] + 3 * (size_t)n, d, sizeof(d));
      n++;
    }
    if (k == 0) snprintf(names[k], PROTO_MAX_NAME + 1, "%s.mean", j->prefix);
    else snprintf(names[k], PROTO_MAX_NAME + 1, "%s.pc%u", j->prefix, k);
    nt[k] = (srv_new_target){names[k], n, idx[k], del[k], 0.0f, k == 0 ? 0.0f : -1.0f, 1.0f};
  }
  if (rc) snprintf(why, whylen, "out of memory");
  srv_op op = {.kind = SRV_OP_ADD_TARGETS, .author = j->author, .cause = SRV_CAUSE_ANIM_COMPRESS, .count = K + 1,
               .added = nt};
  if (rc == 0 && srv_session_check(s, &op, why, whylen) != 0) rc = -2;
  if (rc == 0) {
    j->clip->mean_target = s->mesh->target_count;
    *version = srv_session_apply(srv, s, &op);
    if (*version == 0) {
      rc = -1;
      snprintf(why, whylen, "out of memory");
    }
  }
  for (uint32_t k = 0; k <= K && idx && del && names; k++) {
    free(idx[k]);
    free(del[k]);
    free(names[k]);
  }
  free(nt);
  free(names);
  free(idx);
  free(del);
  return rc;
}

/* The clip's report: what anim.compress answers and anim.list shows as "compressed". It is JSON
 * because the store keeps it as such with the clip (srv_record.c), the one answer the session
 * layer writes as JSON (docs/architecture.md, "Where answers become JSON"). Caller frees. */
static cJSON *clip_report(const srv_session *s, const srv_clip *c, const compress_job *j, uint64_t version) {
  uint32_t V = s->mesh->vertex_count, F = c->frame_count;
  double diag = mesh_bbox_diagonal(s->mesh);
  const pca_model *pm = j->region_of ? NULL : &j->model;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)version);
  cJSON_AddStringToObject(r, "clip", c->name);
  cJSON_AddNumberToObject(r, "frames", F);
  cJSON_AddNumberToObject(r, "components", j->K);
  if (pm) cJSON_AddNumberToObject(r, "rank", pm->rank);
  cJSON_AddBoolToObject(r, "budget_met", pm ? pm->budget_met : j->regions.budget_met);
  double rms = pm ? pm->rms_error : j->regions.rms_error, mx = pm ? pm->max_error : j->regions.max_error;
  cJSON_AddNumberToObject(r, "rms_error", rms);
  cJSON_AddNumberToObject(r, "max_error", mx);
  cJSON_AddNumberToObject(r, "max_error_relative", diag > 0 ? mx / diag : 0);
  cJSON_AddNumberToObject(r, "streamed_rms_error", j->sr.rms_error);
  cJSON_AddNumberToObject(r, "streamed_max_error", j->sr.max_error);
  cJSON_AddNumberToObject(r, "streamed_max_error_relative", diag > 0 ? j->sr.max_error / diag : 0);
  /* A frame: header 20, weights body: mode 1, count 4, first 2, scale 4, then 1 or 2 per weight. */
  double bytes = j->sr.bytes_per_frame, raw = 12.0 * V;
  cJSON_AddNumberToObject(r, "bytes_per_frame", bytes);
  cJSON_AddNumberToObject(r, "bytes_per_frame_max", (double)j->sr.bytes_max);
  cJSON_AddNumberToObject(r, "frames_8bit", j->sr.narrow_frames);
  cJSON_AddNumberToObject(r, "raw_bytes_per_frame", raw);
  cJSON_AddNumberToObject(r, "ratio", raw / bytes);
  cJSON_AddNumberToObject(r, "build_ms", pm ? pm->build_ms : j->regions.build_ms);
  cJSON_AddNumberToObject(r, "mean_target", c->mean_target);
  cJSON_AddNumberToObject(r, "first_component", c->first_component);
  if (j->region_of) {
    cJSON_AddNumberToObject(r, "global_components", j->global_components);
    /* At this clip's mean bytes per weight (1 in 8-bit frames, 2 in 16-bit ones). */
    double per_weight = j->K ? (bytes - (double)proto_weights_qrun_size(0, 1)) / j->K : 2.0;
    cJSON_AddNumberToObject(r, "saving_bytes_per_frame", per_weight * ((double)j->global_components - j->K));
    cJSON *regs = cJSON_AddArrayToObject(r, "regions");
    for (uint32_t g = 0; g < j->region_count; g++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "vertices", j->regions.regions[g].vertex_count);
      cJSON_AddNumberToObject(o, "components", j->regions.regions[g].model.components);
      cJSON_AddNumberToObject(o, "max_error", j->regions.regions[g].model.max_error);
      cJSON_AddItemToArray(regs, o);
    }
  }
  return r;
}

static void compress_done(uv_work_t *req, int status) {
  compress_job *j = req->data;
  srv_server *srv = j->srv;
  srv_session *s = j->session;
  srv_clip *c = j->clip;
  srv->pending_jobs--;
  c->busy = 0;
  if (status == UV_ECANCELED && !j->status) {
    j->status = -1;
    snprintf(j->err, sizeof(j->err), "cancelled");
  }
  char msg[768];
  if (s->closed) {
    snprintf(msg, sizeof(msg), "session '%s' was closed during the compression", s->name);
    srv_reply_error(&j->reply, SRV_ENOSESSION, msg);
  } else if (j->status) {
    snprintf(msg, sizeof(msg), "compressing clip '%s': %s", c->name, j->err);
    srv_reply_error(&j->reply, j->status == MESH_ENOMEM || j->status == PCA_ENOMEM ? SRV_EINTERNAL : SRV_ESOLVER,
                    msg);
  } else {
    char why[512];
    uint64_t version = 0;
    int rc = add_basis_targets(srv, j, &version, why, sizeof(why));
    if (rc) {
      srv_reply_error(&j->reply, rc == -2 ? SRV_ERANGE : SRV_EINTERNAL, why);
    } else {
      free(c->frame_weights);
      free(c->frame_narrow);
      c->frame_weights = j->fw;
      c->frame_narrow = j->narrow;
      j->fw = NULL;
      j->narrow = NULL;
      c->first_component = c->mean_target + 1;
      c->components = j->K;
      c->compressed = 1;
      cJSON_Delete(c->report);
      c->report = clip_report(s, c, j, version);
      srv_anim_store_clip(srv, s, c);
      srv_log(SRV_LOG_INFO, "session %s: clip %s compressed to %u components (max error %.3g, %.1f× smaller)",
              s->name, c->name, j->K, j->sr.max_error, 12.0 * s->mesh->vertex_count / j->sr.bytes_per_frame);
      srv_reply_ok(&j->reply, &(srv_result){.kind = SRV_RESULT_ANIM_COMPRESS, .compressed = c});
    }
  }
  srv_session_unref(s);
  compress_job_free(j);
}


int srv_anim_compress(srv_server *srv, srv_session *s, srv_clip *c, srv_anim_compress_spec *spec, srv_reply reply,
                      char *err, size_t errlen) {
  int rc = 0;
  if (c->kind == CLIP_WEIGHTS) {
    snprintf(err, errlen, "clip '%s' animates target weights: it plays as it is (anim.play)", c->name);
    rc = SRV_ERANGE;
  } else if (c->busy) {
    snprintf(err, errlen, "clip '%s' is being compressed already", c->name);
    rc = SRV_EBUSY;
  } else if (c->frame_count < 2) {
    snprintf(err, errlen, "clip '%s' has %u frame(s): nothing to compress", c->name, c->frame_count);
    rc = SRV_ERANGE;
  } else {
    size_t bytes = sizeof(float) * 3 * (size_t)s->mesh->vertex_count * c->frame_count;
    if (c->kind != CLIP_KEYFRAMES && bytes > ANIM_MAX_FRAME_BYTES) {
      snprintf(err, errlen, "clip '%s' would take %zu MB as frames; the limit is %zu MB", c->name, bytes >> 20,
               ANIM_MAX_FRAME_BYTES >> 20);
      rc = SRV_ELIMIT;
    }
  }
  compress_job *j = rc ? NULL : calloc(1, sizeof(*j));
  if (!rc && !j) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
  }
  if (rc) {
    free(spec->region_of);
    spec->region_of = NULL;
    return rc;
  }
  j->prefix = strdup(spec->prefix);
  j->region_of = spec->region_of;
  j->region_count = spec->region_of ? spec->region_count : 0;
  spec->region_of = NULL;
  j->srv = srv;
  j->session = s;
  j->clip = c;
  j->opt.components = spec->components;
  j->max_error_rel = spec->max_error_rel;
  j->weight_bits = spec->weight_bits;
  j->author = spec->author;
  /* The targets as they are now (recorded clips bring their own). */
  j->view = *s->mesh;
  j->targets = malloc(sizeof(mesh_target) * (s->mesh->target_count + 1));
  if (!j->prefix || !j->targets) {
    snprintf(err, errlen, "out of memory");
    compress_job_free(j);
    return SRV_EINTERNAL;
  }
  if (s->mesh->target_count) /* (memcpy from a NULL array is undefined even for 0 bytes) */
    memcpy(j->targets, s->mesh->targets, sizeof(mesh_target) * s->mesh->target_count);
  j->view.targets = j->targets;
  j->req.data = j;
  if (uv_queue_work(srv->loop, &j->req, compress_work, compress_done) != 0) {
    snprintf(err, errlen, "cannot start the compression");
    compress_job_free(j);
    return SRV_EINTERNAL;
  }
  j->reply = reply;
  srv->pending_jobs++;
  c->busy = 1;
  srv_session_ref(s);
  return 0;
}

void srv_anim_store_clip(srv_server *srv, srv_session *s, const srv_clip *c) {
  if (!srv->store || !s->store_id) return;
  proto_buf b;
  proto_buf_init(&b);
  if (srv_record_encode_clip(s, c, &b) != 0 || srv_store_put_clip(srv->store, s->store_id, c->name, b.data, b.len) != 0)
    srv_log(SRV_LOG_ERROR, "session %s: cannot queue clip %s for the store (out of memory)", s->name, c->name);
  proto_buf_fini(&b);
}
