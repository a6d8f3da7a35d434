/*
 * client_texture.c — TEXTURE frames into a replica (docs/protocol.md §17): MATERIALS becomes
 * the replica mesh's submeshes (ranges, base colours, texture indices) and its image slots, each
 * IMAGE fills one slot, so a client sees the materials exactly as the server's mesh has them.
 *
 * DOES NOT draw or upload anything (viewer/vw_texture.c does, from the replica).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_replica.h"
#include "proto_texture.h"

static void drop_materials(mesh *m) {
  for (uint32_t i = 0; i < m->submesh_count; i++) free(m->submeshes[i].name);
  free(m->submeshes);
  for (uint32_t i = 0; i < m->image_count; i++) free(m->images[i].name), free(m->images[i].rgba);
  free(m->images);
  m->submeshes = NULL, m->images = NULL;
  m->submesh_count = m->image_count = 0;
}

static int take_materials(mesh *m, const proto_texture_view *v, char *err, size_t errlen) {
  for (uint32_t i = 0; i < v->submesh_count; i++) {
    proto_material pm;
    proto_texture_material(v, i, &pm);
    if (pm.first_triangle > m->triangle_count || pm.triangle_count > m->triangle_count - pm.first_triangle) {
      snprintf(err, errlen, "TEXTURE: submesh %u's triangles lie outside the mesh", i);
      return PROTO_EINVAL;
    }
  }
  mesh_submesh *sm = calloc((size_t)v->submesh_count + 1, sizeof(*sm));
  mesh_image *im = calloc((size_t)v->image_count + 1, sizeof(*im));
  if (!sm || !im) {
    free(sm), free(im);
    return PROTO_ENOMEM;
  }
  drop_materials(m);
  m->submeshes = sm, m->submesh_count = v->submesh_count;
  m->images = im, m->image_count = v->image_count;
  for (uint32_t i = 0; i < v->submesh_count; i++) {
    proto_material pm;
    proto_texture_material(v, i, &pm);
    sm[i].name = strdup("");
    sm[i].first_triangle = pm.first_triangle, sm[i].triangle_count = pm.triangle_count;
    sm[i].texture = pm.texture, sm[i].has_color = pm.has_color;
    memcpy(sm[i].base_color, pm.base_color, sizeof(pm.base_color));
    if (!sm[i].name) return PROTO_ENOMEM;
  }
  return 0;
}

static int take_image(mesh *m, const proto_texture_view *v, char *err, size_t errlen) {
  if (v->index >= m->image_count) {
    snprintf(err, errlen, "TEXTURE: image %u, but the materials named %u", v->index, m->image_count);
    return PROTO_EINVAL;
  }
  mesh_image *im = &m->images[v->index];
  size_t bytes = 4 * (size_t)v->width * v->height;
  uint8_t *px = malloc(bytes);
  char *name = malloc((size_t)v->name.len + 1);
  if (!px || !name) {
    free(px), free(name);
    return PROTO_ENOMEM;
  }
  memcpy(px, v->pixels, bytes);
  memcpy(name, v->name.ptr, v->name.len);
  name[v->name.len] = '\0';
  free(im->rgba), free(im->name);
  im->rgba = px, im->name = name, im->width = v->width, im->height = v->height;
  return 0;
}

int client__replica_texture(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen) {
  proto_texture_view v;
  int rc = r->have_snapshot ? proto_decode_texture(p, h->length, &v) : PROTO_ETYPE;
  if (rc) {
    snprintf(err, errlen, "TEXTURE: %s", r->have_snapshot ? proto_strerror(rc) : "before the snapshot");
    return rc;
  }
  rc = v.kind == PROTO_TEX_MATERIALS ? take_materials(r->mesh, &v, err, errlen) : take_image(r->mesh, &v, err, errlen);
  if (rc == 0) r->texture_serial++;
  return rc;
}

int client_replica_textures_ready(const client_replica *r) {
  if (!r->have_snapshot || r->texture_serial == 0) return 0;
  for (uint32_t i = 0; i < r->mesh->image_count; i++)
    if (!r->mesh->images[i].rgba) return 0;
  return 1;
}
