// sched/rewave.c — a plan's groups regrouped into waves for lockstep execution (sched/plan.h
// plan_rewave).
#include <stdlib.h>
#include <string.h>

#include "sched/order.h"
#include "sched/plan.h"

tsr_status plan_rewave(const plan *src, const int64_t *tokens, int nclips, const cost_model *cm,
                       const sched_cluster *cl, plan *out) {
  const int N = src->ranks;
  int ng = 0;
  for (int gi = 0; gi < src->ngroups; gi++) ng += src->groups[gi].nclips > 0;
  double *t = malloc((size_t)(ng ? ng : 1) * sizeof *t);
  int32_t *gid = malloc((size_t)(ng ? ng : 1) * sizeof *gid);
  int32_t *order = malloc((size_t)(ng ? ng : 1) * sizeof *order);
  plan_slot *slots = malloc((size_t)(ng ? ng : 1) * sizeof *slots);
  int32_t *slot_of = malloc((size_t)(nclips ? nclips : 1) * sizeof *slot_of);
  uint8_t *busy = NULL;  // (nw * N) rank r is in a group of wave w
  int32_t *used = NULL;  // (nw) ranks taken in wave w
  int nw = 0, cap = 0;
  tsr_status st = t && gid && order && slots && slot_of
                      ? TSR_OK : err_set(TSR_ENOMEM, "plan_rewave: out of memory");
  for (int gi = 0, j = 0; !st && gi < src->ngroups; gi++)
    if (src->groups[gi].nclips > 0) gid[j] = gi, t[j++] = plan_group_time(src, gi, tokens, cm, cl);
  if (!st) st = sched_order_desc(t, ng, order);  // longest first, ties in plan order
  for (int j = 0; !st && j < ng; j++) {
    const plan_group *g = &src->groups[gid[order[j]]];
    int w = 0;
    for (; w < nw; w++) {  // the first wave whose ranks of g are free
      if (used[w] + g->size > N) continue;
      const uint8_t *b = busy + (size_t)w * N + g->first_rank;
      int r = 0;
      while (r < g->size && !b[r]) r++;
      if (r == g->size) break;
    }
    if (w == nw) {  // a new wave
      if (nw == cap) {
        int c = cap ? 2 * cap : 8;
        uint8_t *nb = realloc(busy, (size_t)c * N);
        int32_t *nu = realloc(used, (size_t)c * sizeof *nu);
        if (nb) busy = nb;
        if (nu) used = nu;
        if (!nb || !nu) {
          st = err_set(TSR_ENOMEM, "plan_rewave: out of memory");
          break;
        }
        cap = c;
      }
      memset(busy + (size_t)nw * N, 0, (size_t)N);
      used[nw++] = 0;
    }
    memset(busy + (size_t)w * N + g->first_rank, 1, (size_t)g->size);
    used[w] += g->size;
    slots[j] = (plan_slot){w, g->first_rank, g->size};
    for (int k = 0; k < g->nclips; k++) slot_of[src->clip_index[g->clip_off + k]] = j;
  }
  if (!st) st = plan_build(out, slots, ng, slot_of, nclips);
  if (!st) plan_choose_modes(out, tokens, cm, cl);
  free(t), free(gid), free(order), free(slots), free(slot_of), free(busy), free(used);
  return st;
}
