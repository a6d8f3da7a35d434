/*
 * dfm_order.c — the fill-reducing orders of the systems' columns: AMD on a gesture's free
 * vertices (beside its edge weights), AMD on the whole mesh's vertex graph once per mesh
 * (dfm_mesh_order), and that order restricted to a gesture's free vertices.
 *
 * Also the settings every system's CHOLMOD starts with, and the symbolic analysis of the whole
 * mesh's vertex graph in its order (dfm_mesh_symbolic), which padded whole-mesh systems copy
 * instead of analysing their own matrix.
 *
 * DOES NOT factorise (dfm_system.c hands the order or the copied analysis to CHOLMOD).
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

/* The settings every system's CHOLMOD uses (and dfm_mesh_symbolic's, for the same factor). */
void dfm__cholmod_start(cholmod_common *cc, dfm_factor factor) {
  cholmod_l_start(cc);
  /* CHOLMOD picks simplicial or supernodal from the fill it predicts: simplicial wins on small
   * regions (MEASURED.md: 98 vs 170 ms at 38k vertices with little fill), supernodal (BLAS on
   * dense fronts) on large closed surfaces (220 vs 1170 ms on a 41k-vertex sphere). */
  cc->supernodal = factor == DFM_FACTOR_SIMPLICIAL    ? CHOLMOD_SIMPLICIAL
                   : factor == DFM_FACTOR_SUPERNODAL ? CHOLMOD_SUPERNODAL
                                                     : CHOLMOD_AUTO;
  /* AMD only. By default CHOLMOD also tries METIS when AMD's fill looks high, which it does on
   * closed surfaces: on the 164k-vertex sphere METIS cut nnz(L) by 29% but took 1.3 s to
   * order against AMD's 0.38 s, and the drags were no faster (docs/performance.md). */
  cc->nmethods = 1;
  cc->method[0].ordering = CHOLMOD_AMD;
  cc->postorder = 1;
  cc->print = 0;
}

/* The pattern of every vertex's row of the Laplacian (its neighbours and itself), lower
 * triangle, analysed in the given order as factor_system would analyse a system's matrix. */
int dfm_mesh_symbolic(const mesh_adjacency *adj, const int64_t *order, dfm_symbolic **out) {
  uint32_t n = adj->vertex_count;
  *out = NULL;
  dfm_symbolic *sym = calloc(1, sizeof(*sym));
  if (!sym) return DFM_ENOMEM;
  sym->n = n;
  dfm__cholmod_start(&sym->cc, DFM_FACTOR_AUTO);
  sym->cc.method[0].ordering = CHOLMOD_GIVEN;
  size_t nnz = n;
  for (uint32_t v = 0; v < n; v++)
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) nnz += adj->vv[e] > v;
  cholmod_sparse *A = cholmod_l_allocate_sparse(n, n, nnz, 1, 1, -1, CHOLMOD_PATTERN, &sym->cc);
  if (A) {
    SuiteSparse_long *Ap = A->p, *Ai = A->i;
    size_t at = 0;
    for (uint32_t v = 0; v < n; v++) {
      Ap[v] = (SuiteSparse_long)at;
      Ai[at++] = v; /* neighbours ascend, so the column stays sorted */
      for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++)
        if (adj->vv[e] > v) Ai[at++] = adj->vv[e];
    }
    Ap[n] = (SuiteSparse_long)at;
    sym->L = cholmod_l_analyze_p(A, (SuiteSparse_long *)order, NULL, 0, &sym->cc);
    cholmod_l_free_sparse(&A, &sym->cc);
  }
  if (!sym->L || sym->cc.status < CHOLMOD_OK) {
    dfm_mesh_symbolic_free(sym);
    return DFM_ENOMEM;
  }
  sym->lnz = sym->cc.lnz, sym->fl = sym->cc.fl;
  cholmod_l_free_work(&sym->cc);
  *out = sym;
  return 0;
}

size_t dfm_mesh_symbolic_bytes(const dfm_symbolic *sym) {
  if (!sym) return 0;
  const cholmod_factor *L = sym->L;
  size_t words = 2 * (size_t)L->n + (L->is_super ? 3 * ((size_t)L->nsuper + 1) + L->ssize : 0);
  return sizeof(*sym) + sizeof(*L) + sizeof(SuiteSparse_long) * words;
}

void dfm_mesh_symbolic_free(dfm_symbolic *sym) {
  if (!sym) return;
  cholmod_l_free_factor(&sym->L, &sym->cc);
  cholmod_l_finish(&sym->cc);
  free(sym);
}

cholmod_factor *dfm__symbolic_copy(dfm_system *s, const dfm_symbolic *sym) {
  int64_t *ext = malloc(sizeof(int64_t) * ((size_t)s->n + 1));
  cholmod_factor *L = ext ? cholmod_l_copy_factor(sym->L, &s->cc) : NULL;
  if (L) {
    int64_t next = s->nf;
    for (uint32_t v = 0; v < s->n; v++) ext[v] = s->col[v] >= 0 ? s->col[v] : next++;
    SuiteSparse_long *perm = L->Perm;
    for (size_t i = 0; i < L->n; i++) perm[i] = ext[perm[i]];
    if (L->IPerm)
      for (size_t i = 0; i < L->n; i++) ((SuiteSparse_long *)L->IPerm)[perm[i]] = (SuiteSparse_long)i;
  }
  free(ext);
  return L;
}
