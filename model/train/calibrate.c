#include "model/train/calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "core/log.h"
#include "kernels/kernels.h"
#include "model/dit.h"
#include "model/objective.h"
#include "model/train/step.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Median seconds of forward + backward of one clip of L tokens.
static tsr_status time_clip(const kernels_backend *kb, const dit_config *mc,
                            const train_config *tc, int64_t L, int reps, double *seconds) {
  const int P = mc->pt * mc->ph * mc->pw * mc->channels;
  dit_model *m = NULL;
  objective_device dev = {0};
  uint8_t *tok = malloc((size_t)L * P);
  double *t = calloc((size_t)reps, sizeof *t);
  tsr_status st = tok && t ? TSR_OK : err_set(TSR_ENOMEM, "calibrate: out of memory for %lld tokens", (long long)L);
  if (!st) st = dit_create(&m, mc, kb, (int)L, 1);
  if (!st) st = dit_init(m, 1);
  if (!st) st = objective_device_alloc(&dev, kb, (int)L, 1, P);
  for (int64_t i = 0; !st && i < L * P; i++) tok[i] = (uint8_t)(i * 2654435761u >> 24);
  objective_clip c = {.clip_id = 1, .total_tokens = L, .first_token = 0, .len = (int)L,
                      .T = (int)L, .H = 1, .W = 1, .label = -1, .tokens = tok};
  // a text model: a caption of the longest length, never dropped, so the fitted a and ovh
  // price the cross-attention at model.text_len caption tokens
  train_config tcc = *tc;
  tcc.caption_dropout = 0;
  tcc.noise_per_chunk = 0;  // a level per chunk costs a row of modulation per chunk, no time
  float *text = mc->text_dim > 0 ? calloc((size_t)mc->text_len * mc->text_dim, sizeof(float)) : NULL;
  if (text) c.text = text, c.text_tokens = mc->text_len, c.text_dtype = KERNELS_TOKENS_F32;
  if (mc->text_dim > 0 && !text && !st) st = err_set(TSR_ENOMEM, "calibrate: out of memory");
  tc = &tcc;
  // One microbatch as the trainer runs it: objective (on the backend), forward, backward.
  for (int r = -1; r < reps && !st; r++) {  // r = -1: warm-up
    double t0 = time_now();
    st = objective_device_build(&dev, mc, tc, r + 1, 1, &c, 1);
    if (!st) st = dit_forward_dev(m, &dev.batch, NULL, NULL);
    if (!st) st = dit_backward(m, &dev.batch);
    if (!st) st = kb->sync(kb);
    if (r >= 0) t[r] = time_now() - t0;
  }
  if (!st) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *seconds = t[reps / 2];
  }
  objective_device_free(&dev);
  dit_free(&m);
  free(tok);
  free(text);
  free(t);
  return st;
}

// Median seconds of the per-step work outside the microbatches, as train_step does it:
// zero the gradients, the global norm (one sumsq, one host sync), AdamW over every tensor
// (train_adamw: one adamw_update_multi, the working copy's refresh) and the EMA.
static tsr_status time_optimizer(const kernels_backend *kb, const dit_config *mc,
                                 const train_config *tc, int reps, double *seconds) {
  dit_model *m = NULL;
  float *mom = NULL, *var = NULL, *ema = NULL;
  kernels_param_segment *segs = NULL;
  int n_segs = 0;
  double *t = calloc((size_t)reps, sizeof *t);
  tsr_status st = t ? dit_create(&m, mc, kb, 16, 1) : err_set(TSR_ENOMEM, "out of memory");
  size_t n = m ? dit_num_params(m) : 0;
  if (!st) st = kb->alloc(kb, (void **)&mom, n * sizeof(float));
  if (!st) st = kb->alloc(kb, (void **)&var, n * sizeof(float));
  if (!st) st = kb->alloc(kb, (void **)&ema, n * sizeof(float));
  if (!st) st = train_adamw_segments(m, &segs, &n_segs);
  for (int r = -1; r < reps && !st; r++) {
    double ss, t0 = time_now();
    st = dit_zero_grad(m);
    if (!st) st = kb->sumsq(kb, &ss, dit_grads(m), n);
    if (!st) st = train_adamw(m, tc, mom, var, segs, n_segs, tc->lr, r + 2, 1.0f);
    if (!st) st = kb->ema_update(kb, ema, dit_params(m), n, 0.999f);
    if (!st) st = kb->sync(kb);
    if (r >= 0) t[r] = time_now() - t0;
  }
  if (!st) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *seconds = t[reps / 2];
  }
  if (m) kb->free(kb, mom), kb->free(kb, var), kb->free(kb, ema), kb->free(kb, segs);
  dit_free(&m);
  free(t);
  return st;
}

// Least squares of y ~ sum_j c_j f_j(x) over active terms, weights 1/y^2 (relative error).
static int fit(const double *x, const double *y, int n, const int *active, double c[3]) {
  double A[3][4] = {{0}};
  int idx[3], m = 0;
  for (int j = 0; j < 3; j++)
    if (active[j]) idx[m++] = j;
  for (int i = 0; i < n; i++) {
    double f[3] = {1, x[i], x[i] * x[i]}, w = 1 / (y[i] * y[i]);
    for (int r = 0; r < m; r++) {
      for (int s = 0; s < m; s++) A[r][s] += w * f[idx[r]] * f[idx[s]];
      A[r][m] += w * f[idx[r]] * y[i];
    }
  }
  for (int col = 0; col < m; col++) {  // Gauss-Jordan with partial pivoting
    int piv = col;
    for (int r = col + 1; r < m; r++)
      if (fabs(A[r][col]) > fabs(A[piv][col])) piv = r;
    if (fabs(A[piv][col]) < 1e-300) return -1;
    for (int s = 0; s <= m; s++) {
      double tmp = A[col][s];
      A[col][s] = A[piv][s];
      A[piv][s] = tmp;
    }
    for (int r = 0; r < m; r++) {
      if (r == col) continue;
      double f = A[r][col] / A[col][col];
      for (int s = 0; s <= m; s++) A[r][s] -= f * A[col][s];
    }
  }
  c[0] = c[1] = c[2] = 0;
  for (int r = 0; r < m; r++) c[idx[r]] = A[r][m] / A[r][r];
  return 0;
}

// One timed exchange in the world group, buffers a, b in kb's memory: a ring exchange of
// `bytes`; an all-to-all (every rank sends `bytes` to every other); an all-gather (every
// rank contributes `bytes`, receives world x bytes); a reduce-scatter (every rank sends
// world x bytes of floats, receives its summed slice of `bytes`).
enum { EX_RING, EX_ALLTOALL, EX_ALLGATHER, EX_REDUCE_SCATTER };
typedef struct {
  const comm_backend *cb;
  comm_group *g;
  void *a, *b;
  int64_t bytes;
  int op;               // EX_*
  int64_t *cnt, *disp;  // (world) the all-to-all's counts and displacements
} exchange;

static tsr_status run_exchange(const exchange *x) {
  if (x->op == EX_ALLTOALL)
    return x->cb->alltoallv(x->cb, x->g, x->a, x->cnt, x->disp, x->b, x->cnt, x->disp);
  if (x->op == EX_ALLGATHER) return x->cb->allgather(x->cb, x->g, x->a, x->b, x->bytes);
  if (x->op == EX_REDUCE_SCATTER)
    return x->cb->reduce_scatter_sum_f32(x->cb, x->g, x->a, x->b, x->bytes / (int64_t)sizeof(float));
  comm_request *req = NULL;
  tsr_status st = x->cb->ring_start(x->cb, x->g, x->a, x->b, x->bytes, &req);
  tsr_status w = x->cb->wait(x->cb, &req);
  return st ? st : w;
}

// Seconds of an exchange (median of reps): between a barrier of the ranks and the moment
// the received bytes are usable on the backend (kb's sync: a device backend's exchange runs
// on a stream). Buffers in kb's memory, as the trainer's. The slowest rank's time of each
// rep counts (an exchange waits for all). op: EX_* (run_exchange).
static tsr_status time_exchange(const kernels_backend *kb, const comm_backend *cb, int64_t bytes,
                                int op, int reps, double *seconds) {
  const int k = comm_size();
  exchange x = {.cb = cb, .g = comm_group_get(k), .bytes = bytes, .op = op};
  int64_t total = op == EX_RING ? bytes : k * bytes;
  double *t = calloc((size_t)reps, sizeof *t);
  tsr_status st = t ? TSR_OK : err_set(TSR_ENOMEM, "calibrate: out of memory");
  if (!st) st = kb->alloc(kb, &x.a, (size_t)total);
  if (!st) st = kb->alloc(kb, &x.b, (size_t)total);
  if (!st) st = kb->memset_zero(kb, x.a, (size_t)total);  // the reduce-scatter sums it
  if (!st && op == EX_ALLTOALL) {
    x.cnt = calloc((size_t)k, sizeof *x.cnt), x.disp = calloc((size_t)k, sizeof *x.disp);
    if (!x.cnt || !x.disp) st = err_set(TSR_ENOMEM, "calibrate: out of memory");
    for (int j = 0; j < k && !st; j++) x.cnt[j] = bytes, x.disp[j] = j * bytes;
  }
  for (int r = -1; r < reps && !st; r++) {
    st = cb->barrier(cb, x.g);
    double t0 = time_now();
    if (!st) st = run_exchange(&x);
    if (!st) st = kb->sync(kb);
    int64_t ns = (int64_t)((time_now() - t0) * 1e9);
    if (!st) st = comm_allreduce_max_i64(&ns, 1);
    if (r >= 0) t[r] = (double)ns * 1e-9;
  }
  if (!st) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *seconds = t[reps / 2];
  }
  kb->free(kb, x.a);
  kb->free(kb, x.b);
  free(t), free(x.cnt), free(x.disp);
  return st;
}

// Fastest of reps + 1 world all-reduces of n fp32 values (the step's gradient), in kb's
// memory, until the sum is usable on the backend; the slowest rank's time of each rep.
static tsr_status time_allreduce(const kernels_backend *kb, const comm_backend *cb, size_t n,
                                 int reps, double *seconds) {
  comm_group *g = comm_group_get(comm_size());
  float *x = NULL;
  tsr_status st = kb->alloc(kb, (void **)&x, n * sizeof *x);
  double best = 1e30;
  for (int r = 0; r < reps + 1 && !st; r++) {
    st = cb->barrier(cb, g);
    double t0 = time_now();
    if (!st) st = cb->allreduce_sum_f32(cb, g, x, (int64_t)n);
    if (!st) st = kb->sync(kb);
    int64_t ns = (int64_t)((time_now() - t0) * 1e9);
    if (!st) st = comm_allreduce_max_i64(&ns, 1);
    best = fmin(best, (double)ns * 1e-9);
  }
  kb->free(kb, x);
  if (!st) *seconds = best;
  return st;
}

tsr_status calibrate_run(const dit_config *mc, const train_config *tc, const calibrate_opts *o,
                         const cost_model *base, calibrate_point *pts, calibrate_result *res) {
  if (o->points < 3 || o->reps < 1 || o->min_tokens < 1 || o->max_tokens <= o->min_tokens)
    return err_set(TSR_EINVAL, "calibrate: need >= 3 points, >= 1 rep and min < max tokens");
  memset(res, 0, sizeof *res);
  res->cost = *base;
  const kernels_backend *kb;
  tsr_status bst = backend_for_precision(o->backend, tc->precision, &kb);
  if (bst) return err_wrap(bst, "calibrate: ");
  double x[64], y[64];
  int n = o->points > 64 ? 64 : o->points;
  progress pg;
  progress_begin(&pg, "calibrate");
  for (int i = 0; i < n; i++) {
    double f = (double)i / (n - 1);
    int64_t L = (int64_t)llround(o->min_tokens * pow((double)o->max_tokens / o->min_tokens, f));
    tsr_status st = time_clip(kb, mc, tc, L, o->reps, &y[i]);
    if (st) return err_wrap(st, "calibrate at %lld tokens: ", (long long)L);
    x[i] = (double)L;
    pts[i].tokens = L;
    pts[i].measured_s = y[i];
    progress_update(&pg, i + 1, n, 1, "%lld tokens: %.4f s forward+backward", (long long)L, y[i]);
  }
  progress_end(&pg);
  int active[3] = {1, 1, 1};
  double c[3];
  for (int round = 0; round < 3; round++) {  // drop negative terms and refit
    if (fit(x, y, n, active, c)) return err_set(TSR_EINVAL, "calibrate: the fit is singular");
    int dropped = 0;
    for (int j = 0; j < 3; j++)
      if (active[j] && c[j] < 0) active[j] = 0, dropped = 1;
    if (!dropped) break;
  }
  res->cost.ovh = fmax(c[0], 0);
  // A term the fit dropped (noise made it negative) gets its least accepted value: a
  // cost file needs a, b > 0 (sched/cost.h).
  res->cost.a = fmax(c[1], cost_key_lo[0]);
  res->cost.b = fmax(c[2], cost_key_lo[1]);
  for (int i = 0; i < n; i++) {
    pts[i].fitted_s = res->cost.ovh + res->cost.a * x[i] + res->cost.b * x[i] * x[i];
    res->max_rel_err = fmax(res->max_rel_err, fabs(pts[i].fitted_s - y[i]) / y[i]);
  }
  // per block K, V forward and K, V, dK, dV backward: 6 D values in the act dtype
  res->cost.kv = 6.0 * (double)kernels_dtype_size(kb->act_dtype) * mc->hidden * mc->depth;
  double opt_s = 0;
  tsr_status ost = time_optimizer(kb, mc, tc, o->reps, &opt_s);
  if (ost) return err_wrap(ost, "calibrate: timing the optimizer step: ");
  res->optimizer_s = opt_s;
  res->cost.allreduce = opt_s;  // per-step cost outside the microbatches
  if (comm_size() > 1) {
    double small, large, ar;
    const int64_t big = 64 << 20;
    const comm_backend *cb = o->comm;
    if (!cb || cb->mem != (kb->device_memory ? COMM_MEM_DEVICE : COMM_MEM_HOST))
      return err_set(TSR_EINVAL, "calibrate: the communication backend %s does not work on the "
                     "memory of compute backend %s (--comm)", cb ? cb->name : "(none)", kb->name);
    tsr_status st = time_exchange(kb, cb, 8, EX_RING, 2 * o->reps + 1, &small);
    if (!st) st = time_exchange(kb, cb, big, EX_RING, o->reps, &large);
    if (st) return err_wrap(st, "calibrate: timing ring exchanges (%s): ", cb->name);
    res->cost.lat = small;
    res->cost.bw_intra = big / fmax(large - small, 1e-9);
    // Ulysses' all-to-all: the bytes a rank sends, (k - 1) pieces, against their time
    const int k = comm_size();
    const int64_t piece = big / k;
    if (!st) st = time_exchange(kb, cb, 8, EX_ALLTOALL, 2 * o->reps + 1, &small);
    if (!st) st = time_exchange(kb, cb, piece, EX_ALLTOALL, o->reps, &large);
    if (st) return err_wrap(st, "calibrate: timing all-to-alls (%s): ", cb->name);
    res->cost.a2a_lat = fmax(small, 1e-9);
    res->cost.a2a_bw_intra = fmin(fmax((double)piece * (k - 1) / fmax(large - small, 1e-9),
                                       cost_key_lo[11]), cost_key_hi[11]);
    // ZeRO's world collectives (sched/cost.h): 64 MiB whole, a rank's piece 64 MiB / k
    // (whole floats), against 16 bytes a rank; bandwidth = (k-1)/k of the whole over the time
    // a large one takes beyond a small one, coll_lat the small ones' mean
    const int64_t slice = piece / 16 * 16, tiny = 16;
    double ag_s, ag_l, rs_s, rs_l;
    if (!st) st = time_exchange(kb, cb, tiny, EX_ALLGATHER, 2 * o->reps + 1, &ag_s);
    if (!st) st = time_exchange(kb, cb, slice, EX_ALLGATHER, o->reps, &ag_l);
    if (!st) st = time_exchange(kb, cb, tiny, EX_REDUCE_SCATTER, 2 * o->reps + 1, &rs_s);
    if (!st) st = time_exchange(kb, cb, slice, EX_REDUCE_SCATTER, o->reps, &rs_l);
    if (st) return err_wrap(st, "calibrate: timing all-gathers and reduce-scatters (%s): ", cb->name);
    const double moved = (double)slice * (k - 1);  // (k-1)/k of the k * slice bytes whole
    res->cost.ag_bw = fmin(fmax(moved / fmax(ag_l - ag_s, 1e-9), cost_key_lo[13]), cost_key_hi[13]);
    res->cost.rs_bw = fmin(fmax(moved / fmax(rs_l - rs_s, 1e-9), cost_key_lo[14]), cost_key_hi[14]);
    res->cost.coll_lat = fmin(fmax((ag_s + rs_s) / 2, 1e-9), cost_key_hi[15]);
    // the step's all-reduce of every gradient (float32)
    dit_model *m = NULL;
    if ((st = dit_create(&m, mc, kb, 16, 1))) return st;
    size_t np = dit_num_params(m);
    dit_free(&m);
    if ((st = time_allreduce(kb, cb, np, o->reps, &ar)))
      return err_wrap(st, "calibrate: timing the gradient all-reduce (%s): ", cb->name);
    res->cost.allreduce = opt_s + ar;
    res->measured_comm = 1;
  }
  return cost_model_check(&res->cost);
}

tsr_status calibrate_write(const char *path, const calibrate_result *res, const char *comment) {
  fs_atomic a;
  tsr_status st = fs_atomic_open(&a, path);
  if (st) return err_wrap(st, "choose a writable --out: ");
  FILE *f = a.f;
  fprintf(f, "# tessera cost model (sched/cost.h, docs/plan.md), written by tessera calibrate\n");
  fprintf(f, "# %s\n", comment);
  fprintf(f, "# measured: a, b, ovh (fit of objective+forward+backward times of one microbatch),\n"
             "# kv (from the model), allreduce = optimizer step (%.4g s)%s\n",
          res->optimizer_s, res->measured_comm ? " + gradient all-reduce; lat, bw_intra (ring); "
                                                 "a2a_lat, a2a_bw_intra (all-to-all);\n# ag_bw, "
                                                 "rs_bw, coll_lat (world all-gather and "
                                                 "reduce-scatter, ZeRO)" : "");
  fprintf(f, "# from the base file: bw_inter, a2a_bw_inter%s\n",
          res->measured_comm ? "" : ", bw_intra, lat, a2a_*, ag_bw, rs_bw, coll_lat\n# (one "
                                    "rank: nothing to measure; 0: priced with the ring's keys)");
  for (int i = 0; i < COST_NKEYS; i++)
    fprintf(f, "%s = %.6g\n", cost_key_names[i], cost_model_get(&res->cost, i));
  st = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return st;
}
