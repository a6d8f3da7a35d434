/*
 * dfm_order.c — the fill-reducing orders of the systems' columns: AMD on a gesture's free
 * vertices (beside its edge weights), AMD on the whole mesh's vertex graph once per mesh
 * (dfm_mesh_order), and that order restricted to a gesture's free vertices.
 *
 * DOES NOT analyse or factorise (dfm_system.c hands the order to CHOLMOD).
 */
#include <amd.h>
#include <cholmod.h>
#include <stdlib.h>

#include "dfm_internal.h"

/* AMD on the graph of `count` vertices, vertex[k] (NULL: vertex k) numbered by col[] (NULL: the
 * vertex itself; -1: not in the graph), into order[count]. 0 or DFM_ENOMEM. */
static int amd_graph(uint32_t count, const uint32_t *vertex, const int32_t *col, const mesh_adjacency *adj,
                     SuiteSparse_long *order) {
  size_t nnz = 0;
  for (uint32_t k = 0; k < count; k++) {
    uint32_t v = vertex ? vertex[k] : k;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) nnz += !col || col[adj->vv[e]] >= 0;
  }
  SuiteSparse_long *Ap = malloc(sizeof(SuiteSparse_long) * ((size_t)count + 1));
  SuiteSparse_long *Ai = malloc(sizeof(SuiteSparse_long) * (nnz + 1));
  int rc = DFM_ENOMEM;
  if (Ap && Ai) {
    size_t at = 0;
    for (uint32_t k = 0; k < count; k++) {
      uint32_t v = vertex ? vertex[k] : k;
      Ap[k] = (SuiteSparse_long)at;
      /* Neighbours ascend by vertex, and so do their columns (assigned in vertex order). */
      for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
        uint32_t u = adj->vv[e];
        if (!col || col[u] >= 0) Ai[at++] = col ? col[u] : (SuiteSparse_long)u;
      }
    }
    Ap[count] = (SuiteSparse_long)at;
    double control[AMD_CONTROL], info[AMD_INFO];
    amd_l_defaults(control);
    if (amd_l_order((SuiteSparse_long)count, Ap, Ai, order, control, info) >= AMD_OK) rc = 0;
  }
  free(Ap);
  free(Ai);
  return rc;
}

/* The AMD order of the system's columns. For the Laplacian and ARAP systems the matrix's pattern
 * is the graph of the free vertices (the biharmonic one reaches two rings), so the order needs
 * no weights and runs beside them (weights_and_order); CHOLMOD then only builds the symbolic
 * factor. The same AMD with CHOLMOD's settings (dense rows above 10 √n, aggressive absorption)
 * on the same pattern: the same factor as cholmod_l_analyze's own AMD. When it cannot (memory),
 * s->order stays NULL and CHOLMOD orders the columns itself. */
void dfm__amd_columns(dfm_system *s, const mesh_adjacency *adj) {
  s->order = malloc(sizeof(SuiteSparse_long) * ((size_t)s->nf + 1));
  if (s->order && amd_graph(s->nf, s->free_vertex, s->col, adj, s->order) != 0) {
    free(s->order);
    s->order = NULL;
  }
}

_Static_assert(sizeof(SuiteSparse_long) == sizeof(int64_t), "dfm_mesh_order's int64_t is CHOLMOD's long");

int dfm_mesh_order(const mesh_adjacency *adj, int64_t **out) {
  *out = malloc(sizeof(int64_t) * ((size_t)adj->vertex_count + 1));
  if (!*out) return DFM_ENOMEM;
  if (amd_graph(adj->vertex_count, NULL, NULL, adj, (SuiteSparse_long *)*out) != 0) {
    free(*out);
    *out = NULL;
    return DFM_ENOMEM;
  }
  return 0;
}

/* The columns in the mesh order's sequence: the order the whole graph's elimination gives its
 * subgraph of free vertices (no fill the whole graph's order would not have). */
int dfm__restrict_mesh_order(dfm_system *s, const int64_t *mesh_order) {
  s->order = malloc(sizeof(SuiteSparse_long) * ((size_t)s->nf + 1));
  if (!s->order) return DFM_ENOMEM;
  uint32_t k = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    int32_t c = s->col[mesh_order[i]];
    if (c >= 0) s->order[k++] = c;
  }
  return 0;
}
