// model/lora.c — low-rank adapters on the block linears (model/lora.h): the adapter table,
// its buffers and init, and the forward and backward of one adapter as four GEMMs of the
// backend (kernels.h gemm), called from the linear helpers of layers.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"
#include "model/dit_internal.h"
#include "model/lora.h"

// One adapted linear: W (in, out) of tensor base_w, A (r, in) and B (out, r) at a_off, b_off.
typedef struct {
  int base_w, in, out;
  size_t a_off, b_off;
  void *u;                     // (max_rows, r) [act] scale inp A^T of the last forward
  void *u_null;                // (max_clips, r) [act] the same for the null token's rows
                               // (cross-attention k/v of a model with it: u_of), else NULL
} lora_adapter;

struct dit_lora {
  lora_config cfg;
  float scale;                 // alpha / r
  int n;                       // adapters
  lora_adapter *ad;            // (n)
  int *of;                     // (m->n_tensors) adapter of a weight tensor, or -1
  dit_tensor *table;           // (2n) A then B of each adapter
  char (*names)[DIT_NAME_MAX]; // (2n)
  size_t n_params;
  float *params, *grads;       // (n_params) [f32] backend memory
  void *wact;                  // (n_params) [act] working copy the GEMMs read (params if fp32)
  void *act;                   // backend memory: every u, du, the null rows' u, tmp, tmp2
  void *du;                    // (max_rows, r) [act] the backward's dL/du
  void *tmp, *tmp2;            // (max_rows, max in) [act] fc2's input gradient, through GELU
  int max_rows;
};

// Block i's linears with the diffusers module names files and targets use (model/lora.h).
enum { MODS_MAX = 10 };
static int block_modules(const dit_model *m, int i, dit_linear *lin, const char **mod) {
  const dit_block_params *bp = &m->bp[i];
  int n = 0;
#define MOD(l, s) (lin[n] = (l), mod[n++] = (s))
  MOD(bp->q, "attn1.to_q"), MOD(bp->k, "attn1.to_k"), MOD(bp->v, "attn1.to_v");
  MOD(bp->proj, "attn1.to_out.0");
  if (m->cfg.text_dim > 0) {
    MOD(bp->x.q, "attn2.to_q"), MOD(bp->x.k, "attn2.to_k"), MOD(bp->x.v, "attn2.to_v");
    MOD(bp->x.proj, "attn2.to_out.0");
  }
  MOD(bp->fc1, "ffn.net.0.proj"), MOD(bp->fc2, "ffn.net.2");
#undef MOD
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

static void add_pair(struct dit_lora *lo, const dit_model *m, int w, const char *name, int r) {
  lora_adapter *a = &lo->ad[lo->n];
  const dit_tensor *wt = &m->table[w];
  a->base_w = w, a->in = (int)wt->shape[0], a->out = (int)wt->shape[1];
  int64_t shape[2][2] = {{r, a->in}, {a->out, r}};
  const char *which[2] = {"lora_A", "lora_B"};
  for (int k = 0; k < 2; k++) {
    int ti = 2 * lo->n + k;
    snprintf(lo->names[ti], DIT_NAME_MAX, "%s.%s.weight", name, which[k]);
    dit_tensor *t = &lo->table[ti];
    t->name = lo->names[ti], t->ndim = 2;
    t->shape[0] = shape[k][0], t->shape[1] = shape[k][1];
    t->numel = (size_t)(shape[k][0] * shape[k][1]);
    t->offset = lo->n_params;
    lo->n_params += (t->numel + 15) / 16 * 16;  // 64-byte starts, as the base's
  }
  a->a_off = lo->table[2 * lo->n].offset, a->b_off = lo->table[2 * lo->n + 1].offset;
  lo->of[w] = lo->n++;
}

// The adapters of every matched linear; each target must match at least one.
static tsr_status build_table(struct dit_lora *lo, const dit_model *m) {
  const char *targets = lo->cfg.targets;
  int nt = 1, cap = MODS_MAX * m->cfg.depth;
  for (const char *c = targets; *c; c++) nt += *c == ',';
  int *hits = calloc((size_t)nt, sizeof *hits);
  lo->ad = calloc((size_t)cap, sizeof *lo->ad);
  lo->table = calloc((size_t)cap * 2, sizeof *lo->table);
  lo->names = calloc((size_t)cap * 2, sizeof *lo->names);
  lo->of = malloc(sizeof *lo->of * (size_t)m->n_tensors);
  if (!hits || !lo->ad || !lo->table || !lo->names || !lo->of)
    return free(hits), err_set(TSR_ENOMEM, "lora: no memory for the adapter table");
  for (int i = 0; i < m->n_tensors; i++) lo->of[i] = -1;
  for (int i = 0; i < m->cfg.depth; i++) {
    dit_linear lin[MODS_MAX];
    const char *mod[MODS_MAX];
    int n = block_modules(m, i, lin, mod);
    for (int j = 0; j < n; j++) {
      char name[DIT_NAME_MAX];
      snprintf(name, sizeof name, "blocks.%d.%s", i, mod[j]);
      if (matches_any(name, targets, hits)) add_pair(lo, m, lin[j].w, name, lo->cfg.rank);
    }
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
  return st;
}

// 1 if adapter a's linear also runs on the null token's rows in a forward: the cross-
// attention's keys and values of a model with the null token (model/cross.c).
static int runs_on_null(const dit_model *m, const lora_adapter *a) {
  if (!m->sw.null_token || m->cfg.text_dim == 0) return 0;
  for (int i = 0; i < m->cfg.depth; i++)
    if (a->base_w == m->bp[i].x.k.w || a->base_w == m->bp[i].x.v.w) return 1;
  return 0;
}

// The activation buffer in values: every adapter's u and du (per_u each), the null rows'
// u of the adapters that have one (per_null each, *n_null of them), then fc2's two scratch
// rows (tmp each), for microbatches of max_rows rows.
static size_t act_values(struct dit_lora *lo, const dit_model *m, size_t *per_u, size_t *per_null,
                         int *n_null, size_t *tmp) {
  int max_in = 0;
  lo->max_rows = m->max_tokens;
  if (m->max_text > lo->max_rows) lo->max_rows = m->max_text;
  size_t rows = (size_t)lo->max_rows;
  *per_u = (rows * (size_t)lo->cfg.rank + 15) / 16 * 16;
  *per_null = ((size_t)m->max_clips * (size_t)lo->cfg.rank + 15) / 16 * 16;
  *n_null = 0;
  for (int i = 0; i < lo->n; i++) {
    max_in = lo->ad[i].in > max_in ? lo->ad[i].in : max_in;
    *n_null += runs_on_null(m, &lo->ad[i]);
  }
  *tmp = (rows * (size_t)max_in + 15) / 16 * 16;
  return *per_u * (size_t)(lo->n + 1) + *per_null * (size_t)*n_null + 2 * *tmp;
}

// Buffers: parameters, gradients, the working copy (bf16), then act_values' layout.
static tsr_status alloc_buffers(struct dit_lora *lo, const dit_model *m) {
  const kernels_backend *kb = m->kb;
  size_t per_u, per_null, tmp;
  int n_null;
  size_t act_n = act_values(lo, m, &per_u, &per_null, &n_null, &tmp);
  size_t pb = sizeof(float) * lo->n_params;
  DIT_TRY(kb->alloc(kb, (void **)&lo->params, pb ? pb : 4));
  DIT_TRY(kb->alloc(kb, (void **)&lo->grads, pb ? pb : 4));
  DIT_TRY(kb->alloc(kb, &lo->act, kernels_act_bytes(kb, act_n)));
  lo->wact = lo->params;
  if (kb->act_dtype != KERNELS_F32)
    DIT_TRY(kb->alloc(kb, &lo->wact, kernels_act_bytes(kb, lo->n_params ? lo->n_params : 1)));
  DIT_TRY(kb->memset_zero(kb, lo->params, pb));
  DIT_TRY(kb->memset_zero(kb, lo->grads, pb));
  for (int i = 0; i < lo->n; i++) lo->ad[i].u = kernels_act_at(kb, lo->act, per_u * (size_t)i);
  lo->du = kernels_act_at(kb, lo->act, per_u * (size_t)lo->n);
  size_t at = per_u * (size_t)(lo->n + 1);
  for (int i = 0; i < lo->n; i++)
    if (runs_on_null(m, &lo->ad[i])) {
      lo->ad[i].u_null = kernels_act_at(kb, lo->act, at);
      at += per_null;
    }
  lo->tmp = kernels_act_at(kb, lo->act, at);
  lo->tmp2 = kernels_act_at(kb, lo->act, at + tmp);
  return TSR_OK;
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

tsr_status dit_lora_attach(dit_model *m, const lora_config *lc, uint64_t seed) {
  if (m->lora) return err_set(TSR_EINVAL, "lora: the model already has adapters");
  if (lc->rank < 1 || !(lc->alpha > 0) || !lc->targets[0])
    return err_set(TSR_EINVAL, "lora: rank must be >= 1, alpha > 0 and targets non-empty "
                   "(rank %d, alpha %g)", lc->rank, lc->alpha);
  struct dit_lora *lo = calloc(1, sizeof *lo);
  if (!lo) return err_set(TSR_ENOMEM, "lora: no memory");
  lo->cfg = *lc, lo->scale = lc->alpha / (float)lc->rank;
  m->lora = lo;  // dit_lora_free undoes a partial attach
  tsr_status st = build_table(lo, m);
  if (st == TSR_OK) st = alloc_buffers(lo, m);
  if (st == TSR_OK) st = init_adapters(lo, m->kb, seed);
  if (st == TSR_OK) st = dit_lora_refresh(m);
  if (st != TSR_OK) dit_lora_free(m);
  return st;
}

tsr_status dit_lora_memory(const dit_config *c, const lora_config *lc, kernels_dtype act,
                           int max_tokens, int max_clips, size_t *n_params, size_t *act_bytes) {
  *n_params = *act_bytes = 0;
  dit_model m;
  tsr_status st = dit_model_shell(&m, c, max_tokens, max_clips);
  if (st) return st;
  struct dit_lora lo = {.cfg = *lc};
  m.lora = &lo;
  st = build_table(&lo, &m);
  if (!st) {
    size_t per_u, per_null, tmp;
    int n_null;
    *n_params = lo.n_params;
    *act_bytes = act_values(&lo, &m, &per_u, &per_null, &n_null, &tmp) * kernels_dtype_size(act);
  }
  free(lo.ad), free(lo.of), free(lo.table), free(lo.names);
  m.lora = NULL;
  dit_model_shell_free(&m);
  return st;
}

void dit_lora_free(dit_model *m) {
  struct dit_lora *lo = m->lora;
  if (!lo) return;
  if (lo->wact != lo->params) m->kb->free(m->kb, lo->wact);
  m->kb->free(m->kb, lo->params), m->kb->free(m->kb, lo->grads), m->kb->free(m->kb, lo->act);
  free(lo->ad), free(lo->of), free(lo->table), free(lo->names), free(lo);
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

tsr_status dit_lora_zero_grad(dit_model *m) {
  if (!m->lora) return TSR_OK;
  return m->kb->memset_zero(m->kb, m->lora->grads, sizeof(float) * m->lora->n_params);
}

// The working copy of the adapter tensor at float offset off.
static const void *w_of(const dit_model *m, size_t off) {
  return kernels_act_at(m->kb, m->lora->wact, off);
}

// The kept u of adapter a for a run on inp: the null token's rows have their own, since the
// cross-attention runs the k/v linears on the captions and then on them before either's
// backward (model/cross.c).
static void *u_of(const dit_model *m, const lora_adapter *a, const void *inp) {
  return a->u_null && inp == m->nullctx ? a->u_null : a->u;
}

static const lora_adapter *adapter_of(const dit_model *m, dit_linear l) {
  return m->lora && m->lora->of[l.w] >= 0 ? &m->lora->ad[m->lora->of[l.w]] : NULL;
}

int dit_lora_has(const dit_model *m, dit_linear l) { return adapter_of(m, l) != NULL; }

tsr_status dit_lora_fwd(dit_model *m, dit_linear l, void *out, const void *inp, int M) {
  const lora_adapter *a = adapter_of(m, l);
  if (!a || M == 0) return TSR_OK;
  const kernels_backend *kb = m->kb;
  const struct dit_lora *lo = m->lora;
  int r = lo->cfg.rank;
  // u (M, r) = scale inp (M, in) A^T; out (M, out) += u B^T
  void *u = u_of(m, a, inp);
  DIT_TRY(kb->gemm(kb, 0, 1, M, r, a->in, lo->scale, inp, w_of(m, a->a_off), 0.0f, u));
  return kb->gemm(kb, 0, 1, M, a->out, r, 1.0f, u, w_of(m, a->b_off), 1.0f, out);
}

// The adapter's gradients, and in lo->du its input side dL/du (M, r) = scale dout B.
static tsr_status param_grads(dit_model *m, const lora_adapter *a, const void *dout,
                              const void *inp, int M) {
  const kernels_backend *kb = m->kb;
  const struct dit_lora *lo = m->lora;
  int r = lo->cfg.rank;
  float *gA = lo->grads + a->a_off, *gB = lo->grads + a->b_off;
  DIT_TRY(kb->gemm(kb, 0, 0, M, r, a->out, lo->scale, dout, w_of(m, a->b_off), 0.0f, lo->du));
  // dB (out, r) += dout^T u (u holds the scale); dA (r, in) += du^T inp: the weight side of
  // linear_backward, which accumulates in fp32 whatever the act dtype
  DIT_TRY(kb->linear_backward(kb, NULL, gB, NULL, u_of(m, a, inp), dout, NULL, M, a->out, r));
  return kb->linear_backward(kb, NULL, gA, NULL, inp, lo->du, NULL, M, r, a->in);
}

tsr_status dit_lora_bwd(dit_model *m, dit_linear l, void *dinp, const void *dout,
                        const void *inp, int M) {
  const lora_adapter *a = adapter_of(m, l);
  if (!a || M == 0) return TSR_OK;
  DIT_TRY(param_grads(m, a, dout, inp, M));
  if (!dinp) return TSR_OK;
  const struct dit_lora *lo = m->lora;
  // dinp (M, in) += du (M, r) A (r, in)
  return m->kb->gemm(m->kb, 0, 0, M, a->in, lo->cfg.rank, 1.0f, lo->du, w_of(m, a->a_off), 1.0f,
                     dinp);
}

tsr_status dit_lora_bwd_dgelu(dit_model *m, dit_linear l, void *dpre, const void *dout,
                              const void *inp, const void *pre, int M) {
  const lora_adapter *a = adapter_of(m, l);
  if (!a || M == 0) return TSR_OK;
  const kernels_backend *kb = m->kb;
  const struct dit_lora *lo = m->lora;
  DIT_TRY(param_grads(m, a, dout, inp, M));
  size_t n = (size_t)M * (size_t)a->in;
  // dpre += GELU'(pre) (du A): the fused base entry already applied GELU' to its own part
  DIT_TRY(kb->gemm(kb, 0, 0, M, a->in, lo->cfg.rank, 1.0f, lo->du, w_of(m, a->a_off), 0.0f,
                   lo->tmp));
  DIT_TRY(kb->gelu_backward(kb, lo->tmp2, lo->tmp, pre, n));
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
    DIT_TRY(kb->gemm(kb, 1, 1, a->in, a->out, lo->cfg.rank, lo->scale, lo->params + a->a_off,
                     lo->params + a->b_off, 1.0f, dit_p(m, a->base_w)));
  }
  dit_lora_free(m);
  return dit_refresh_weights(m);
}
