// model/lora.c — low-rank adapters on the block linears (model/lora.h): the adapter table,
// its buffers and init, and the forward and backward of the adapters as GEMMs of the backend
// (kernels.h gemm, gemm_strided), grouped by shared input and, with fp32 activations, run
// through the merged weight (docs/model.md "LoRA adapters"), called from the linear helpers
// of layers.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"
#include "model/dit_internal.h"
#include "model/lora.h"

// One adapted linear: W (in, out) of tensor base_w, A (r, in) and B (out, r) at a_off, b_off;
// member `slot` of group `group`.
typedef struct {
  int base_w, in, out;
  int group, slot;
  size_t a_off, b_off;
} lora_adapter;

// The adapters of one block that read the same input: the self-attention's q, k, v, and the
// cross-attention's k, v (the captions, then the null token's rows). Their A's are
// contiguous, A_all (n r, in), so that ONE down-projection makes every member's u and one
// GEMM each makes the group's dA and input gradient; member j reads its columns
// [j r, (j + 1) r) of the group's u and du through gemm_strided (kernels.h). Any other
// adapter is a group of one. The members run one after another with the same input (the
// layer code's order, block.c and cross.c), which the two masks follow without relying on:
// a member whose columns are not fresh from this input recomputes all of them, and a
// backward flushes once every member's du is in.
typedef struct {
  int first, n, in;            // adapters first .. first + n - 1, their input width
  size_t a_off;                // A_all (n r, in) in the buffers
  void *u[2];                  // (max_rows, n r) [act] scale inp A_all^T of the last forward;
                               // [1]: the null token's rows (max_clips, n r), or NULL
  unsigned fresh[2];           // members whose columns of u[k] are unread since made from
  const void *inp[2];          //   inp[k], M[k] rows
  int M[2];
  unsigned pending;            // members whose du columns the backward has written since the
  void *dinp;                  //   last flush, on input binp (bM rows), adding to dinp
  const void *binp;
  int bM;
} lora_group;

struct dit_lora {
  lora_config cfg;
  int frozen;                  // forward only (dit_lora_attach_frozen): no grads, du, tmp
  float scale;                 // alpha / r
  int n;                       // adapters
  lora_adapter *ad;            // (n)
  int n_groups;
  lora_group *g;               // (n_groups)
  int max_group;               // the largest group's n
  int *of;                     // (m->n_tensors) adapter of a weight tensor, or -1
  dit_tensor *table;           // (2n) A then B of each adapter
  char (*names)[DIT_NAME_MAX]; // (2n)
  size_t n_params;
  float *params, *grads;       // (n_params) [f32] backend memory
  void *wact;                  // (n_params) [act] working copy the GEMMs read (params if fp32)
  void *act;                   // backend memory: every group's u (and null rows' u), du, tmp, tmp2
  void *du;                    // (max_rows, max_group r) [act] the backward's dL/du of a group
  void *tmp, *tmp2;            // (max_rows, max in) [act] fc2's input gradient, through GELU
  void *weff;                  // (max in x out) [f32] the merged weight of one linear, or NULL
  int max_rows;
};

// Block i's linears with the diffusers module names files and targets use (model/lora.h), and
// which share their input: 1 the self-attention's q/k/v, 2 the cross-attention's k/v, 0 none.
// The tessera family's per-block modulation has no diffusers counterpart: its tensor name.
enum { MODS_MAX = 11 };
static int block_modules(const dit_model *m, int i, dit_linear *lin, const char **mod,
                         int *share) {
  const dit_block_params *bp = &m->bp[i];
  int n = 0;
#define MOD(l, s, sh) (lin[n] = (l), share[n] = (sh), mod[n++] = (s))
  MOD(bp->q, "attn1.to_q", 1), MOD(bp->k, "attn1.to_k", 1), MOD(bp->v, "attn1.to_v", 1);
  MOD(bp->proj, "attn1.to_out.0", 0);
  if (m->cfg.text_dim > 0) {
    MOD(bp->x.q, "attn2.to_q", 0), MOD(bp->x.k, "attn2.to_k", 2), MOD(bp->x.v, "attn2.to_v", 2);
    MOD(bp->x.proj, "attn2.to_out.0", 0);
  }
  MOD(bp->fc1, "ffn.net.0.proj", 0), MOD(bp->fc2, "ffn.net.2", 0);
  if (!m->sw.mod_table) MOD(bp->adaln, "adaln", 0);
#undef MOD
  return n;
}

// The linears outside the blocks that adapters may target, by diffusers' names: the time
// embedding's two and (Wan) the shared modulation projection.
static int model_modules(const dit_model *m, dit_linear *lin, const char **mod) {
  int n = 0;
  lin[n] = m->t_fc1, mod[n++] = "condition_embedder.time_embedder.linear_1";
  lin[n] = m->t_fc2, mod[n++] = "condition_embedder.time_embedder.linear_2";
  if (m->sw.mod_table) lin[n] = m->time_proj, mod[n++] = "condition_embedder.time_proj";
  return n;
}

// PEFT's rule: the target is the whole name or a suffix after a dot.
static int target_matches(const char *name, const char *t, size_t tl) {
  size_t nl = strlen(name);
  if (tl == 0 || tl > nl || strncmp(name + nl - tl, t, tl)) return 0;
  return nl == tl || name[nl - tl - 1] == '.';
}

// 1 if `name` matches any target of the comma-separated list; hits[k] counts target k's.
static int matches_any(const char *name, const char *targets, int *hits) {
  int any = 0, k = 0;
  for (const char *t = targets; *t; k++) {
    size_t tl = strcspn(t, ",");
    if (target_matches(name, t, tl)) hits[k]++, any = 1;
    t += tl + (t[tl] == ',');
  }
  return any;
}

static size_t pad16(size_t n) { return (n + 15) / 16 * 16; }  // 64-byte starts, as the base's

// A new group of n adapters of input width `in`, its A's (n r, in) at the buffers' end.
static lora_group *new_group(struct dit_lora *lo, int n, int in) {
  lora_group *g = &lo->g[lo->n_groups++];
  g->first = lo->n, g->n = n, g->in = in, g->a_off = lo->n_params;
  lo->n_params += pad16((size_t)n * (size_t)lo->cfg.rank * (size_t)in);
  if (n > lo->max_group) lo->max_group = n;
  return g;
}

// Adds the adapter of weight w (module `name`) as member `slot` of group g, whose A's start at
// g->a_off; its table entries are A then B, B placed at the end of the buffers.
static void add_adapter(struct dit_lora *lo, const dit_model *m, int w, const char *name,
                        lora_group *g, int slot) {
  int r = lo->cfg.rank;
  lora_adapter *a = &lo->ad[lo->n];
  const dit_tensor *wt = &m->table[w];
  a->base_w = w, a->in = (int)wt->shape[0], a->out = (int)wt->shape[1];
  a->group = (int)(g - lo->g), a->slot = slot;
  a->a_off = g->a_off + (size_t)slot * (size_t)r * (size_t)a->in;
  a->b_off = lo->n_params;
  lo->n_params += pad16((size_t)a->out * (size_t)r);
  int64_t shape[2][2] = {{r, a->in}, {a->out, r}};
  size_t off[2] = {a->a_off, a->b_off};
  const char *which[2] = {"lora_A", "lora_B"};
  for (int k = 0; k < 2; k++) {
    int ti = 2 * lo->n + k;
    snprintf(lo->names[ti], DIT_NAME_MAX, "%s.%s.weight", name, which[k]);
    dit_tensor *t = &lo->table[ti];
    t->name = lo->names[ti], t->ndim = 2;
    t->shape[0] = shape[k][0], t->shape[1] = shape[k][1];
    t->numel = (size_t)(shape[k][0] * shape[k][1]);
    t->offset = off[k];
  }
  lo->of[w] = lo->n++;
}

// 1 when TESSERA_LORA_PER_ADAPTER=1: every adapter alone with its four GEMMs, no groups and
// no merged weight (the path before them, for comparisons: tests/model/test_lora.c,
// bench/train/lora.sh).
static int per_adapter(void) {
  const char *e = getenv("TESSERA_LORA_PER_ADAPTER");
  return e && !strcmp(e, "1");
}

// Block i's adapters: the matched modules, those that share an input as one group (its A's
// contiguous, then each member's B), the others alone.
static void add_block(struct dit_lora *lo, const dit_model *m, int i, int *hits) {
  dit_linear lin[MODS_MAX];
  const char *mod[MODS_MAX];
  int share[MODS_MAX], matched[MODS_MAX], done[MODS_MAX] = {0}, nm = 0, grouped = !per_adapter();
  char names[MODS_MAX][DIT_NAME_MAX];
  int n = block_modules(m, i, lin, mod, share);
  for (int j = 0; j < n; j++) {
    snprintf(names[j], DIT_NAME_MAX, "blocks.%d.%s", i, mod[j]);
    if (matches_any(names[j], lo->cfg.targets, hits)) matched[nm++] = j;
  }
  for (int s = 0; s < nm; s++) {
    if (done[s]) continue;
    int members[MODS_MAX], gn = 0;
    for (int t = s; t < nm; t++)
      if (t == s || (grouped && share[matched[s]] && share[matched[t]] == share[matched[s]]))
        members[gn++] = t, done[t] = 1;
    lora_group *g = new_group(lo, gn, (int)m->table[lin[matched[s]].w].shape[0]);
    for (int k = 0; k < gn; k++) {
      int j = matched[members[k]];
      add_adapter(lo, m, lin[j].w, names[j], g, k);
    }
  }
}

// The adapters of every matched linear; each target must match at least one.
static tsr_status build_table(struct dit_lora *lo, const dit_model *m) {
  const char *targets = lo->cfg.targets;
  int nt = 1, cap = MODS_MAX * (m->cfg.depth + 1);
  for (const char *c = targets; *c; c++) nt += *c == ',';
  int *hits = calloc((size_t)nt, sizeof *hits);
  lo->ad = calloc((size_t)cap, sizeof *lo->ad);
  lo->g = calloc((size_t)cap, sizeof *lo->g);
  lo->table = calloc((size_t)cap * 2, sizeof *lo->table);
  lo->names = calloc((size_t)cap * 2, sizeof *lo->names);
  lo->of = malloc(sizeof *lo->of * (size_t)m->n_tensors);
  if (!hits || !lo->ad || !lo->g || !lo->table || !lo->names || !lo->of)
    return free(hits), err_set(TSR_ENOMEM, "lora: no memory for the adapter table");
  for (int i = 0; i < m->n_tensors; i++) lo->of[i] = -1;
  for (int i = 0; i < m->cfg.depth; i++) add_block(lo, m, i, hits);
  dit_linear lin[MODS_MAX];
  const char *mod[MODS_MAX];
  int n = model_modules(m, lin, mod);
  for (int j = 0; j < n; j++) {  // each alone: a group of one
    if (matches_any(mod[j], targets, hits))
      add_adapter(lo, m, lin[j].w, mod[j], new_group(lo, 1, (int)m->table[lin[j].w].shape[0]), 0);
  }
  tsr_status st = TSR_OK;
  const char *t = targets;
  for (int k = 0; k < nt && st == TSR_OK; k++) {
    size_t tl = strcspn(t, ",");
    if (!hits[k])
      st = err_set(TSR_EINVAL, "lora.targets: '%.*s' matches no linear of the model", (int)tl, t);
    t += tl + (t[tl] == ',');
  }
  free(hits);
  // ZeRO (model/train/zero.h): the buffers' length a multiple of 16 x shard_ranks floats, so
  // the adapters' state splits into equal slices of whole 64-byte lines; the padding stays 0
  size_t a = 16 * (size_t)(lo->cfg.shard_ranks > 1 ? lo->cfg.shard_ranks : 1);
  lo->n_params = (lo->n_params + a - 1) / a * a;
  return st;
}

// 1 if group g's linears also run on the null token's rows in a forward: the cross-
// attention's keys and values of a model with the null token (model/cross.c).
static int runs_on_null(const dit_model *m, const struct dit_lora *lo, const lora_group *g) {
  if (!m->sw.null_token || m->cfg.text_dim == 0) return 0;
  int w = lo->ad[g->first].base_w;
  for (int i = 0; i < m->cfg.depth; i++)
    if (w == m->bp[i].x.k.w || w == m->bp[i].x.v.w) return 1;
  return 0;
}

// The activation buffer in values: every group's u (rows x n r each) and, for the groups that
// run on the null token's rows, their u of those (max_clips x n r), then du (rows x
// max_group r), fc2's two scratch rows (rows x max in each) and, with fp32 activations, the
// merged weight (the largest in x out; *weff 0 without), for microbatches of max_rows rows.
// at[g] (when not NULL) = where group g's u starts, at_null[g] its null rows' (or -1).
static size_t act_values(struct dit_lora *lo, const dit_model *m, kernels_dtype act, size_t *at,
                         int64_t *at_null, size_t *du_at, size_t *tmp, size_t *weff) {
  int max_in = 0, r = lo->cfg.rank;
  size_t max_w = 0;
  for (int i = 0; i < lo->n; i++)
    if ((size_t)lo->ad[i].in * (size_t)lo->ad[i].out > max_w)
      max_w = (size_t)lo->ad[i].in * (size_t)lo->ad[i].out;
  *weff = act == KERNELS_F32 && !per_adapter() ? pad16(max_w) : 0;
  lo->max_rows = m->max_tokens;
  if (m->max_text > lo->max_rows) lo->max_rows = m->max_text;
  size_t rows = (size_t)lo->max_rows, v = 0;
  for (int k = 0; k < lo->n_groups; k++) {
    const lora_group *g = &lo->g[k];
    size_t w = (size_t)g->n * (size_t)r;
    if (at) at[k] = v;
    v += pad16(rows * w);
    int null = runs_on_null(m, lo, g);
    if (at_null) at_null[k] = null ? (int64_t)v : -1;
    if (null) v += pad16((size_t)m->max_clips * w);
    max_in = g->in > max_in ? g->in : max_in;
  }
  *du_at = v;
  if (!lo->frozen) v += pad16(rows * (size_t)lo->max_group * (size_t)r);
  *tmp = lo->frozen ? 0 : pad16(rows * (size_t)max_in);
  return v + 2 * *tmp + *weff;
}

// Buffers: parameters, gradients, the working copy (bf16), then act_values' layout.
static tsr_status alloc_buffers(struct dit_lora *lo, const dit_model *m) {
  const kernels_backend *kb = m->kb;
  size_t *at = malloc(sizeof *at * (size_t)(lo->n_groups + 1)), du_at, tmp, weff;
  int64_t *at_null = malloc(sizeof *at_null * (size_t)(lo->n_groups + 1));
  if (!at || !at_null)
    return free(at), free(at_null), err_set(TSR_ENOMEM, "lora: no memory for the adapter table");
  size_t act_n = act_values(lo, m, kb->act_dtype, at, at_null, &du_at, &tmp, &weff);
  size_t pb = sizeof(float) * lo->n_params;
  tsr_status st = kb->alloc(kb, (void **)&lo->params, pb ? pb : 4);
  if (!st && !lo->frozen) st = kb->alloc(kb, (void **)&lo->grads, pb ? pb : 4);
  if (!st) st = kb->alloc(kb, &lo->act, kernels_act_bytes(kb, act_n));
  lo->wact = lo->params;
  if (!st && kb->act_dtype != KERNELS_F32)
    st = kb->alloc(kb, &lo->wact, kernels_act_bytes(kb, lo->n_params ? lo->n_params : 1));
  if (!st) st = kb->memset_zero(kb, lo->params, pb);
  if (!st && lo->grads) st = kb->memset_zero(kb, lo->grads, pb);
  for (int k = 0; !st && k < lo->n_groups; k++) {
    lo->g[k].u[0] = kernels_act_at(kb, lo->act, at[k]);
    lo->g[k].u[1] = at_null[k] >= 0 ? kernels_act_at(kb, lo->act, (size_t)at_null[k]) : NULL;
  }
  if (!st && !lo->frozen) {
    lo->du = kernels_act_at(kb, lo->act, du_at);
    lo->tmp = kernels_act_at(kb, lo->act, du_at + pad16((size_t)lo->max_rows *
                                                        (size_t)lo->max_group *
                                                        (size_t)lo->cfg.rank));
    lo->tmp2 = kernels_act_at(kb, lo->tmp, tmp);
  }
  // fp32: [act] is [f32]; after du, tmp and tmp2 (none when frozen)
  if (!st) lo->weff = weff ? kernels_act_at(kb, lo->act, act_n - weff) : NULL;
  free(at), free(at_null);
  return st;
}

// A ~ U(-1/sqrt(in), 1/sqrt(in)) (PEFT: kaiming_uniform_(a = sqrt(5))), B = 0; host-built,
// keyed by the tensor's name as dit_init keys the base's.
static tsr_status init_adapters(struct dit_lora *lo, const kernels_backend *kb, uint64_t seed) {
  float *host = calloc(lo->n_params ? lo->n_params : 1, sizeof(float));
  if (!host) return err_set(TSR_ENOMEM, "lora: no memory to initialise the adapters");
  for (int i = 0; i < lo->n; i++) {
    const dit_tensor *t = &lo->table[2 * i];
    rng_key key = {.seed = seed, .step = 0, .stream = RNG_STREAM_INIT,
                   .clip = hash_fnv1a(HASH_FNV1A_INIT, t->name, strlen(t->name))};
    double bound = 1.0 / sqrt((double)lo->ad[i].in);
    for (size_t j = 0; j < t->numel; j++)
      host[t->offset + j] = (float)((2 * rng_uniform(&key, j) - 1) * bound);
  }
  tsr_status st = kb->to_device(kb, lo->params, host, sizeof(float) * lo->n_params);
  free(host);
  return st;
}

static tsr_status attach(dit_model *m, const lora_config *lc, uint64_t seed, int frozen) {
  if (m->lora) return err_set(TSR_EINVAL, "lora: the model already has adapters");
  if (lc->rank < 1 || !(lc->alpha > 0) || !lc->targets[0])
    return err_set(TSR_EINVAL, "lora: rank must be >= 1, alpha > 0 and targets non-empty "
                   "(rank %d, alpha %g)", lc->rank, lc->alpha);
  struct dit_lora *lo = calloc(1, sizeof *lo);
  if (!lo) return err_set(TSR_ENOMEM, "lora: no memory");
  lo->cfg = *lc, lo->scale = lc->alpha / (float)lc->rank, lo->frozen = frozen;
  m->lora = lo;  // dit_lora_free undoes a partial attach
  tsr_status st = build_table(lo, m);
  if (st == TSR_OK) st = alloc_buffers(lo, m);
  if (st == TSR_OK) st = init_adapters(lo, m->kb, seed);
  if (st == TSR_OK) st = dit_lora_refresh(m);
  if (st != TSR_OK) dit_lora_free(m);
  return st;
}

tsr_status dit_lora_attach(dit_model *m, const lora_config *lc, uint64_t seed) {
  return attach(m, lc, seed, 0);
}
tsr_status dit_lora_attach_frozen(dit_model *m, const lora_config *lc, uint64_t seed) {
  return attach(m, lc, seed, 1);
}

tsr_status dit_lora_memory(const dit_config *c, const lora_config *lc, kernels_dtype act,
                           int max_tokens, int max_clips, int frozen, size_t *n_params,
                           size_t *act_bytes) {
  *n_params = *act_bytes = 0;
  dit_model m;
  tsr_status st = dit_model_shell(&m, c, max_tokens, max_clips);
  if (st) return st;
  struct dit_lora lo = {.cfg = *lc, .frozen = frozen};
  m.lora = &lo;
  st = build_table(&lo, &m);
  if (!st) {
    size_t du_at, tmp, weff;
    *n_params = lo.n_params;
    *act_bytes =
        act_values(&lo, &m, act, NULL, NULL, &du_at, &tmp, &weff) * kernels_dtype_size(act);
  }
  free(lo.ad), free(lo.g), free(lo.of), free(lo.table), free(lo.names);
  m.lora = NULL;
  dit_model_shell_free(&m);
  return st;
}

void dit_lora_free(dit_model *m) {
  struct dit_lora *lo = m->lora;
  if (!lo) return;
  if (lo->wact != lo->params) m->kb->free(m->kb, lo->wact);  // grads NULL when frozen
  m->kb->free(m->kb, lo->params), m->kb->free(m->kb, lo->grads), m->kb->free(m->kb, lo->act);
  free(lo->ad), free(lo->g), free(lo->of), free(lo->table), free(lo->names), free(lo);
  m->lora = NULL;
}

int dit_lora_num_tensors(const dit_model *m) { return m->lora ? 2 * m->lora->n : 0; }
const dit_tensor *dit_lora_tensor_info(const dit_model *m, int i) { return &m->lora->table[i]; }
size_t dit_lora_num_params(const dit_model *m) { return m->lora ? m->lora->n_params : 0; }
float *dit_lora_params(dit_model *m) { return m->lora ? m->lora->params : NULL; }
float *dit_lora_grads(dit_model *m) { return m->lora ? m->lora->grads : NULL; }
const lora_config *dit_lora_get_config(const dit_model *m) { return m->lora ? &m->lora->cfg : NULL; }

tsr_status dit_lora_refresh(dit_model *m) {
  const struct dit_lora *lo = m->lora;
  if (!lo || lo->wact == lo->params) return TSR_OK;
  return m->kb->cast(m->kb, lo->wact, m->kb->act_dtype, lo->params, KERNELS_F32, lo->n_params);
}

void *dit_lora_work(dit_model *m) {
  return !m->lora || m->lora->wact == m->lora->params ? NULL : m->lora->wact;
}

tsr_status dit_lora_zero_grad(dit_model *m) {
  if (!m->lora || !m->lora->grads) return TSR_OK;
  return m->kb->memset_zero(m->kb, m->lora->grads, sizeof(float) * m->lora->n_params);
}

// The working copy of the adapter tensor at float offset off.
static const void *w_of(const dit_model *m, size_t off) {
  return kernels_act_at(m->kb, m->lora->wact, off);
}

static const lora_adapter *adapter_of(const dit_model *m, dit_linear l) {
  return m->lora && m->lora->of[l.w] >= 0 ? &m->lora->ad[m->lora->of[l.w]] : NULL;
}

int dit_lora_has(const dit_model *m, dit_linear l) { return adapter_of(m, l) != NULL; }

// Which u of group g a run on inp uses: the null token's rows have their own, since the
// cross-attention runs the k/v linears on the captions and then on them before either's
// backward (model/cross.c).
static int u_index(const dit_model *m, const lora_group *g, const void *inp) {
  return g->u[1] && inp == m->nullctx;
}

// Adapter a's columns of a (rows, n r) buffer of its group: row stride n r.
static void *cols_of(const dit_model *m, const lora_adapter *a, void *buf) {
  return kernels_act_at(m->kb, buf, (size_t)a->slot * (size_t)m->lora->cfg.rank);
}

// Whether adapter a's linear runs on the merged weight W + s A^T B^T for M rows: with fp32
// activations only (in bf16 the merged weight would round the adapter's small product to W's
// precision, losing it while B is small). The forward's up-projection and the input gradient
// through the adapter are then the base linear's own GEMMs on that weight (the same math as
// u B^T and du A, rounded otherwise), leaving u, du, dB and dA as the adapter's GEMMs. Making
// the weight reads and writes the (in, out) weight about three times; the two thin GEMMs it
// saves read and write the (M, out) and (M, in) activations: worth it from M = in rows.
static int merged(const dit_model *m, const lora_adapter *a, int M) {
  return m->lora->weff && M >= a->in;
}

int dit_lora_merged(const dit_model *m, dit_linear l, int M) {
  const lora_adapter *a = adapter_of(m, l);
  return a && merged(m, a, M);
}

tsr_status dit_lora_weight(dit_model *m, dit_linear l, int M, const void **w) {
  const lora_adapter *a = adapter_of(m, l);
  *w = dit_w(m, l.w);
  if (!a || !merged(m, a, M)) return TSR_OK;
  const kernels_backend *kb = m->kb;
  const struct dit_lora *lo = m->lora;
  // weff (in, out) = W + scale A^T (in, r) B^T (r, out), as dit_lora_merge folds it (fp32:
  // the working copies are the masters)
  TSR_TRY(kb->copy(kb, lo->weff, *w, sizeof(float) * (size_t)a->in * (size_t)a->out));
  TSR_TRY(kb->gemm(kb, 1, 1, a->in, a->out, lo->cfg.rank, lo->scale, lo->params + a->a_off,
                   lo->params + a->b_off, 1.0f, lo->weff));
  *w = lo->weff;
  return TSR_OK;
}

tsr_status dit_lora_fwd(dit_model *m, dit_linear l, void *out, const void *inp, int M) {
  const lora_adapter *a = adapter_of(m, l);
  if (!a || M == 0) return TSR_OK;
  const kernels_backend *kb = m->kb;
  struct dit_lora *lo = m->lora;
  lora_group *g = &lo->g[a->group];
  int r = lo->cfg.rank, w = g->n * r, k = u_index(m, g, inp);
  unsigned bit = 1u << a->slot;
  if (lo->frozen && merged(m, a, M)) return TSR_OK;  // out has it, and no backward needs u
  if (!(g->fresh[k] & bit) || g->inp[k] != inp || g->M[k] != M) {
    // u (M, n r) = scale inp (M, in) A_all^T: every member's product in one GEMM
    TSR_TRY(kb->gemm(kb, 0, 1, M, w, g->in, lo->scale, inp, w_of(m, g->a_off), 0.0f, g->u[k]));
    g->fresh[k] = (1u << g->n) - 1, g->inp[k] = inp, g->M[k] = M;
  }
  g->fresh[k] &= ~bit;
  if (merged(m, a, M)) return TSR_OK;  // out has it: the base ran on the merged weight
  // out (M, out) += u[:, slot r ..] (M, r) B^T
  return kb->gemm_strided(kb, 0, 1, M, a->out, r, 1.0f, cols_of(m, a, g->u[k]), w,
                          w_of(m, a->b_off), r, 1.0f, out, a->out, kb->act_dtype);
}

// The adapter's dB, and its columns of lo->du, dL/du (M, r) = scale dout B; then, once every
// member of its group has its du in (the backward's calls for the group's linears on one
// input), the group's dA_all (n r, in) += du^T inp in one GEMM, and in *flush_out 1: the
// caller adds the input gradient du A_all (group_dinp). The members must add to the same dinp
// (the layer code's: block.c's dt3, cross.c's dctx and dnull).
static tsr_status param_grads(dit_model *m, const lora_adapter *a, void *dinp, const void *dout,
                              const void *inp, int M, int *flush_out) {
  const kernels_backend *kb = m->kb;
  struct dit_lora *lo = m->lora;
  lora_group *g = &lo->g[a->group];
  int r = lo->cfg.rank, w = g->n * r;
  unsigned bit = 1u << a->slot;
  void *u = g->u[u_index(m, g, inp)];
  *flush_out = 0;
  if (lo->frozen)
    return err_set(TSR_EINVAL, "lora: the adapters of a forward-only model "
                   "(dit_lora_attach_frozen) have no backward");
  if (g->pending & bit) g->pending = 0;  // a new backward of the group (an earlier one failed)
  if (g->pending && (g->dinp != dinp || g->binp != inp || g->bM != M))
    return err_set(TSR_EINVAL, "lora: the backward of %s ran on another input than the other "
                   "adapters of its group (%d rows, %d before)", lo->table[2 * (a - lo->ad)].name,
                   M, g->bM);
  TSR_TRY(kb->gemm_strided(kb, 0, 0, M, r, a->out, lo->scale, dout, a->out, w_of(m, a->b_off), r,
                           0.0f, cols_of(m, a, lo->du), w, kb->act_dtype));
  // dB (out, r) += dout^T u (u holds the scale), accumulated in fp32 whatever the act dtype
  TSR_TRY(kb->gemm_strided(kb, 1, 0, a->out, r, M, 1.0f, dout, a->out, cols_of(m, a, u), w, 1.0f,
                           lo->grads + a->b_off, r, KERNELS_F32));
  g->pending |= bit, g->dinp = dinp, g->binp = inp, g->bM = M;
  if (g->pending != (1u << g->n) - 1) return TSR_OK;
  g->pending = 0;
  *flush_out = 1;
  // dA_all (n r, in) += du^T (n r, M) inp (M, in)
  return kb->gemm_strided(kb, 1, 0, w, g->in, M, 1.0f, lo->du, w, inp, g->in, 1.0f,
                          lo->grads + g->a_off, g->in, KERNELS_F32);
}

// out (M, in) = du (M, n r) A_all (n r, in) + beta out: the group's input gradient.
static tsr_status group_dinp(dit_model *m, const lora_adapter *a, void *out, float beta, int M) {
  const struct dit_lora *lo = m->lora;
  const lora_group *g = &lo->g[a->group];
  return m->kb->gemm(m->kb, 0, 0, M, g->in, g->n * lo->cfg.rank, 1.0f, lo->du,
                     w_of(m, g->a_off), beta, out);
}

tsr_status dit_lora_bwd(dit_model *m, dit_linear l, void *dinp, const void *dout,
                        const void *inp, int M) {
  const lora_adapter *a = adapter_of(m, l);
  if (!a || M == 0) return TSR_OK;
  int flush;
  TSR_TRY(param_grads(m, a, dinp, dout, inp, M, &flush));
  if (!flush || !dinp || merged(m, a, M)) return TSR_OK;  // merged: the base's dinp has it
  return group_dinp(m, a, dinp, 1.0f, M);  // dinp += du A_all
}

tsr_status dit_lora_bwd_dgelu(dit_model *m, dit_linear l, void *dpre, const void *dout,
                              const void *inp, const void *pre, int M) {
  const lora_adapter *a = adapter_of(m, l);
  if (!a || M == 0) return TSR_OK;
  const kernels_backend *kb = m->kb;
  const struct dit_lora *lo = m->lora;
  int flush;
  TSR_TRY(param_grads(m, a, dpre, dout, inp, M, &flush));
  if (!flush || !dpre || merged(m, a, M)) return TSR_OK;  // merged: the base's dpre has it
  size_t n = (size_t)M * (size_t)lo->g[a->group].in;
  // dpre += GELU'(pre) (du A): the fused base entry already applied GELU' to its own part
  TSR_TRY(group_dinp(m, a, lo->tmp, 0.0f, M));
  TSR_TRY(kb->gelu_backward(kb, lo->tmp2, lo->tmp, pre, n));
  return kb->add_act(kb, dpre, dpre, lo->tmp2, n);
}

tsr_status dit_lora_merge(dit_model *m) {
  struct dit_lora *lo = m->lora;
  if (!lo) return err_set(TSR_EINVAL, "lora merge: the model has no adapters");
  const kernels_backend *kb = m->kb;
  if (kb->act_dtype != KERNELS_F32)  // the GEMM writes the fp32 masters as [act]
    return err_set(TSR_EINVAL, "lora merge: needs a backend with fp32 activations (%s has %s)",
                   kb->name, kernels_dtype_name(kb->act_dtype));
  for (int i = 0; i < lo->n; i++) {
    const lora_adapter *a = &lo->ad[i];
    // W (in, out) += scale A^T (in, r) B^T (r, out)
    TSR_TRY(kb->gemm(kb, 1, 1, a->in, a->out, lo->cfg.rank, lo->scale, lo->params + a->a_off,
                     lo->params + a->b_off, 1.0f, dit_p(m, a->base_w)));
  }
  dit_lora_free(m);
  return dit_refresh_weights(m);
}
