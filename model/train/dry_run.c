// model/train/dry_run.c — the report of `tessera train --dry-run` (model/train/dry_run.h).
#include "model/train/dry_run.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "sched/placement.h"
#include "model/train/lr.h"
#include "model/train/plan_choice.h"

// The most tokens one rank holds in one group of plan p (the sum of its clips' chunks):
// the largest microbatch the plan runs. tokens: (clips of the batch).
static int64_t largest_microbatch(const plan *p, const int64_t *tokens) {
  int64_t most = 0;
  for (int g = 0; g < p->ngroups; g++) {
    const plan_group *gr = &p->groups[g];
    int64_t sum = 0;
    for (int k = 0; k < gr->nclips; k++) {
      int64_t t = tokens[p->clip_index[gr->clip_off + k]];
      sum += (t + gr->size - 1) / gr->size;
    }
    if (sum > most) most = sum;
  }
  return most;
}

// Under train.placement = blockwise: of p's masked ring groups of more than one rank, how
// many, and the most and the mean of their most loaded rank's work over the mean rank's
// (what their price is made of: sched/cost.h cost_mask.place), into buf ("" otherwise).
static void placed_text(const trainer *tr, const plan *p, const int64_t *tokens, char *buf,
                        size_t n) {
  const cost_mask *m = &tr->sched.cost.mask;
  buf[0] = '\0';
  if (m->place != COST_PLACE_BLOCKWISE || m->kind == COST_MASK_FULL) return;
  int groups = 0;
  double worst = 0, sum = 0;
  for (int g = 0; g < p->ngroups; g++) {
    const plan_group *gr = &p->groups[g];
    if (gr->size < 2 || gr->mode != COST_CP_RING || !gr->nclips) continue;
    double work[gr->size], most = 0, all = 0;
    int64_t L[gr->nclips];
    for (int c = 0; c < gr->nclips; c++) L[c] = tokens[p->clip_index[gr->clip_off + c]];
    if (placement_group(m, L, gr->nclips, gr->size, work, NULL, NULL, NULL)) continue;
    for (int r = 0; r < gr->size; r++) most = work[r] > most ? work[r] : most, all += work[r];
    double imb = all > 0 ? most / (all / gr->size) : 1;
    worst = imb > worst ? imb : worst, sum += imb, groups++;
  }
  snprintf(buf, n, "; %d masked ring group%s placed blockwise (work of the most loaded rank / "
           "the mean: at most %.4f, mean %.4f)", groups, groups == 1 ? "" : "s",
           groups ? worst : 1.0, groups ? sum / groups : 1.0);
}

// "1: 3, 2: 1" of the clips at each CP size of p (sizes with clips only).
static void cp_text(const plan *p, char *buf, size_t n) {
  int64_t hist[32] = {0};
  plan_cp_histogram(p, hist);
  size_t len = 0;
  buf[0] = '\0';
  for (int k = 0; k < 31 && (1 << k) <= p->ranks && len < n; k++)
    if (hist[k])
      len += (size_t)snprintf(buf + len, n - len, "%s%d: %lld", len ? ", " : "", 1 << k,
                              (long long)hist[k]);
}

// One batch: drawn from *smp (a copy of the run's sampler), planned as the step would be,
// printed; *predicted: the step time of the plan that would run.
static tsr_status show_batch(const trainer *tr, const train_options *o, data_sampler *smp,
                             int64_t step, int64_t *ids, int64_t *tok, FILE *out,
                             double *predicted) {
  int64_t n = 0;
  tsr_status st = data_sampler_next(smp, tr->tc.global_batch, ids, &n);
  int64_t sum = 0, lo = INT64_MAX, hi = 0;
  for (int64_t i = 0; !st && i < n; i++) {
    tok[i] = data_clip_at(tr->data, tr->split.train[ids[i]])->tokens;
    sum += tok[i];
    lo = tok[i] < lo ? tok[i] : lo;
    hi = tok[i] > hi ? tok[i] : hi;
  }
  if (st) return st;
  sched_result res;
  plan alt;
  plan_init(&alt, tr->sched.cluster.ranks);
  const plan *run = NULL;
  const char *name = "";
  st = sched_plan_batch(&tr->sched, tok, (int)n, &res);
  if (!st) st = train_choose_plan(&tr->sched, o->plan_kind, tok, n, &res, &alt, &run, predicted, &name);
  if (!st) {
    char cp[160], placed[200];
    cp_text(run, cp, sizeof cp);
    placed_text(tr, run, tok, placed, sizeof placed);
    fprintf(out, "step %lld: %lld clips, %lld tokens (%lld-%lld a clip); plan %s: waves %d, "
            "groups %d, clips at CP size %s; largest microbatch %lld tokens a rank (of %lld); "
            "predicted %.4f s (packing only %.4f s, static CP %.4f s, lower bound %.4f s)%s\n",
            (long long)step + 1, (long long)n, (long long)sum, (long long)lo, (long long)hi, name,
            run->nwaves, run->ngroups, cp, (long long)largest_microbatch(run, tok),
            (long long)tr->tc.mem_tokens, *predicted, res.packing_only_s, res.static_balanced_s,
            res.lower_bound_s, placed);
  }
  sched_result_free(&res);
  plan_free(&alt);
  return st;
}

tsr_status train_dry_run_print(const trainer *tr, const train_options *o,
                               const train_dry_run_view *v, FILE *out) {
  if (comm_rank() != 0) return TSR_OK;
  fprintf(out, "# tessera train --dry-run: nothing was trained or written. The effective "
          "config,\n# as RUN/config.ini would hold it:\n");
  tsr_status st = run_config_print(out, o, v->prev, v->mc, v->tc, tr->tc.mem_tokens);
  if (st) return st;
  char what[768];
  train_memory_format(v->mem, what, sizeof what);
  fprintf(out, "\n# The run\nmemory per rank (model) for the largest microbatch, %lld tokens "
          "(train.mem_tokens%s): %s; of %.3f GiB (%s)\n", (long long)tr->tc.mem_tokens,
          v->tc->mem_tokens == 0 ? " = 0: derived" : "", what, (double)v->capacity / (1 << 30),
          v->cap_source);
  fprintf(out, "store %s: %lld clips, %lld train, %lld held out for validation; %d rank%s, "
          "cost model %s\n", data_dir(tr->data), (long long)data_num_clips(tr->data),
          (long long)tr->split.n_train, (long long)tr->split.n_val, tr->sched.cluster.ranks,
          tr->sched.cluster.ranks == 1 ? "" : "s", o->cost_path ? o->cost_path
          : "built in (the tiny model's CPU numbers)");
  fprintf(out, "steps %lld -> %lld; learning rate: warm-up %lld steps, cosine to step %lld\n",
          (long long)tr->step, (long long)v->stop, (long long)tr->tc.warmup,
          (long long)lr_schedule_length(&tr->tc));
  int64_t B = tr->tc.global_batch;
  int64_t *ids = malloc(sizeof *ids * (size_t)B), *tok = malloc(sizeof *tok * (size_t)B);
  if (!ids || !tok) st = err_set(TSR_ENOMEM, "dry run: out of memory");
  data_sampler smp = tr->sampler;
  double sum = 0;
  int shown = 0;
  for (int64_t s = tr->step; !st && s < v->stop && shown < v->batches; s++, shown++) {
    double p = 0;
    st = show_batch(tr, o, &smp, s, ids, tok, out, &p);
    sum += p;
  }
  free(ids), free(tok);
  double total = shown ? sum / shown * (double)(v->stop - tr->step) : 0;
  if (!st && shown)
    fprintf(out, "predicted step time %.4f s (the mean of these %d batches); the %lld steps "
            "to go: about %.1f s (%.2f h) of steps, besides validation, samples and "
            "checkpoints\n", sum / shown, shown, (long long)(v->stop - tr->step), total,
            total / 3600);
  return st;
}
