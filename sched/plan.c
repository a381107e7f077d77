// sched/plan.c — plan storage, builder and validation.
#include "sched/plan.h"

#include <stdlib.h>
#include <string.h>

void plan_init(plan *p, int ranks) {
  memset(p, 0, sizeof *p);
  p->ranks = ranks;
}

void plan_free(plan *p) {
  free(p->wave_off);
  free(p->groups);
  free(p->clip_index);
  free(p->cover);
  plan_init(p, p->ranks);
}

void plan_reset(plan *p) {
  p->nwaves = p->ngroups = p->nrefs = p->wave_open = 0;
}

// Grows array *a of *cap elements of `size` bytes to hold `need`.
static tsr_status plan_grow(void **a, int32_t *cap, int32_t need, size_t size) {
  if (need <= *cap) return TSR_OK;
  int32_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void *n = realloc(*a, (size_t)c * size);
  if (!n) return err_set(TSR_ENOMEM, "plan: out of memory (%d entries)", c);
  *a = n;
  *cap = c;
  return TSR_OK;
}

tsr_status plan_wave_begin(plan *p) {
  if (p->wave_open) return err_set(TSR_EINVAL, "plan: wave %d is still open", p->nwaves - 1);
  if (!p->cover && !(p->cover = malloc((size_t)p->ranks)))
    return err_set(TSR_ENOMEM, "plan: out of memory");
  tsr_status st = plan_grow((void **)&p->wave_off, &p->cap_waves, p->nwaves + 2,
                            sizeof *p->wave_off);
  if (st) return st;
  memset(p->cover, 0, (size_t)p->ranks);
  p->wave_off[p->nwaves] = p->ngroups;
  p->nwaves++;
  p->wave_off[p->nwaves] = p->ngroups;
  p->wave_open = 1;
  return TSR_OK;
}

static int is_pow2(int64_t k) { return k >= 1 && !(k & (k - 1)); }

tsr_status plan_add_group(plan *p, int first_rank, int size, const int32_t *clips, int nclips) {
  if (!p->wave_open) return err_set(TSR_EINVAL, "plan: add_group outside a wave");
  if (!is_pow2(size) || first_rank < 0 || first_rank % size || first_rank + size > p->ranks)
    return err_set(TSR_EINVAL, "plan: group [%d, %d) is not an aligned power-of-two block of "
                               "%d ranks", first_rank, first_rank + size, p->ranks);
  for (int r = first_rank; r < first_rank + size; r++)
    if (p->cover[r])
      return err_set(TSR_EINVAL, "plan: wave %d: rank %d is in two groups", p->nwaves - 1, r);
  tsr_status st = plan_grow((void **)&p->groups, &p->cap_groups, p->ngroups + 1,
                            sizeof *p->groups);
  if (!st)
    st = plan_grow((void **)&p->clip_index, &p->cap_refs, p->nrefs + nclips,
                   sizeof *p->clip_index);
  if (st) return st;
  memset(p->cover + first_rank, 1, (size_t)size);
  p->groups[p->ngroups++] = (plan_group){first_rank, size, p->nrefs, nclips, COST_CP_RING};
  if (nclips) memcpy(p->clip_index + p->nrefs, clips, (size_t)nclips * sizeof *clips);
  p->nrefs += nclips;
  p->wave_off[p->nwaves] = p->ngroups;
  return TSR_OK;
}

tsr_status plan_wave_end(plan *p) {
  if (!p->wave_open) return err_set(TSR_EINVAL, "plan: wave_end without wave_begin");
  for (int r = 0; r < p->ranks;) {
    if (p->cover[r]) {
      r++;
      continue;
    }
    int k = 1;  // largest aligned block at r that is wholly free
    for (;;) {
      int k2 = 2 * k;
      if (r % k2 || r + k2 > p->ranks) break;
      int free_all = 1;
      for (int q = r + k; q < r + k2 && free_all; q++) free_all = !p->cover[q];
      if (!free_all) break;
      k = k2;
    }
    tsr_status st = plan_add_group(p, r, k, NULL, 0);
    if (st) return st;
    r += k;
  }
  p->wave_open = 0;
  return TSR_OK;
}

tsr_status plan_copy(plan *dst, const plan *src) {
  plan_reset(dst);
  dst->ranks = src->ranks;
  tsr_status st = plan_grow((void **)&dst->wave_off, &dst->cap_waves, src->nwaves + 1,
                            sizeof *dst->wave_off);
  if (!st)
    st = plan_grow((void **)&dst->groups, &dst->cap_groups, src->ngroups, sizeof *dst->groups);
  if (!st)
    st = plan_grow((void **)&dst->clip_index, &dst->cap_refs, src->nrefs,
                   sizeof *dst->clip_index);
  if (st) return st;
  memcpy(dst->wave_off, src->wave_off, (size_t)(src->nwaves + 1) * sizeof *src->wave_off);
  memcpy(dst->groups, src->groups, (size_t)src->ngroups * sizeof *src->groups);
  memcpy(dst->clip_index, src->clip_index, (size_t)src->nrefs * sizeof *src->clip_index);
  dst->nwaves = src->nwaves;
  dst->ngroups = src->ngroups;
  dst->nrefs = src->nrefs;
  return TSR_OK;
}

tsr_status plan_validate(const plan *p, const int64_t *tokens, int nclips,
                         const sched_cluster *cl) {
  if (p->ranks != cl->ranks)
    return err_set(TSR_EINVAL, "plan is for %d ranks, the cluster has %d", p->ranks, cl->ranks);
  if (p->wave_open) return err_set(TSR_EINVAL, "plan: wave %d is not closed", p->nwaves - 1);
  int *seen = calloc((size_t)nclips + 1, sizeof *seen);
  int *in_wave = malloc((size_t)p->ranks * sizeof *in_wave);
  tsr_status st = TSR_OK;
  if (!seen || !in_wave) {
    st = err_set(TSR_ENOMEM, "plan_validate: out of memory");
    goto done;
  }
  if (p->nwaves < 0 || (p->nwaves > 0 && p->wave_off[0] != 0) ||
      (p->nwaves > 0 && p->wave_off[p->nwaves] != p->ngroups)) {
    st = err_set(TSR_EINVAL, "plan: wave offsets do not cover the %d groups", p->ngroups);
    goto done;
  }
  for (int w = 0; w < p->nwaves && !st; w++) {
    for (int r = 0; r < p->ranks; r++) in_wave[r] = 0;
    for (int gi = p->wave_off[w]; gi < p->wave_off[w + 1] && !st; gi++) {
      const plan_group *g = &p->groups[gi];
      if (!is_pow2(g->size) || g->first_rank < 0 || g->first_rank % g->size ||
          g->first_rank + g->size > p->ranks) {
        st = err_set(TSR_EINVAL, "wave %d group %d: ranks [%d, %d) are not an aligned "
                                 "power-of-two block of %d ranks",
                     w, gi, g->first_rank, g->first_rank + g->size, p->ranks);
        break;
      }
      for (int r = g->first_rank; r < g->first_rank + g->size; r++)
        if (in_wave[r]++) {
          st = err_set(TSR_EINVAL, "wave %d: rank %d is in more than one group", w, r);
          break;
        }
      if (g->clip_off < 0 || g->nclips < 0 || g->clip_off + g->nclips > p->nrefs) {
        st = err_set(TSR_EINVAL, "wave %d group %d: clip list out of range", w, gi);
        break;
      }
      if (g->mode < 0 || g->mode >= COST_CP_NMODES) {
        st = err_set(TSR_EINVAL, "wave %d group %d: CP mode %d is neither ring (0) nor "
                                 "Ulysses (1)", w, gi, g->mode);
        break;
      }
      int64_t mem = 0;
      for (int j = 0; j < g->nclips && !st; j++) {
        int c = p->clip_index[g->clip_off + j];
        if (c < 0 || c >= nclips) {
          st = err_set(TSR_EINVAL, "wave %d group %d: clip index %d is not in the batch of %d",
                       w, gi, c, nclips);
          break;
        }
        if (seen[c]++) {
          st = err_set(TSR_EINVAL, "clip %d appears more than once (again in wave %d)", c, w);
          break;
        }
        mem += cost_chunk_tokens(tokens[c], g->size);
      }
      if (!st && mem > cl->mem_tokens)
        st = err_set(TSR_EINVAL, "wave %d group [%d, %d): a rank holds %lld tokens, more than "
                                 "mem_tokens %lld",
                     w, g->first_rank, g->first_rank + g->size, (long long)mem,
                     (long long)cl->mem_tokens);
    }
    for (int r = 0; r < p->ranks && !st; r++)
      if (!in_wave[r]) st = err_set(TSR_EINVAL, "wave %d: rank %d is in no group", w, r);
  }
  for (int c = 0; c < nclips && !st; c++)
    if (!seen[c]) st = err_set(TSR_EINVAL, "clip %d (%lld tokens) is in no group", c,
                               (long long)tokens[c]);
done:
  free(seen);
  free(in_wave);
  return st;
}

void plan_mode_histogram(const plan *p, int64_t *hist) {
  for (int g = 0; g < p->ngroups; g++)
    if (p->groups[g].size > 1 && p->groups[g].mode >= 0 && p->groups[g].mode < COST_CP_NMODES)
      hist[p->groups[g].mode] += p->groups[g].nclips;
}

void plan_cp_histogram(const plan *p, int64_t *hist) {
  for (int g = 0; g < p->ngroups; g++) {
    int l = 0;
    while ((1 << l) < p->groups[g].size) l++;
    hist[l] += p->groups[g].nclips;
  }
}

tsr_status plan_build(plan *out, const plan_slot *slots, int ngroups, const int32_t *slot_of,
                      int nclips) {
  plan_reset(out);
  int nwaves = 0;
  for (int g = 0; g < ngroups; g++)
    if (slots[g].wave + 1 > nwaves) nwaves = slots[g].wave + 1;
  // Counting sorts: groups by (wave, first rank), clips by group (stable: batch order).
  int32_t *gorder = malloc(((size_t)ngroups + 1) * sizeof *gorder);
  int32_t *cstart = calloc((size_t)ngroups + 1, sizeof *cstart);
  int32_t *clips = malloc(((size_t)nclips + 1) * sizeof *clips);
  int32_t *wcount = calloc((size_t)nwaves + 1, sizeof *wcount);
  int32_t *rcount = calloc((size_t)out->ranks + 1, sizeof *rcount);
  int32_t *tmp = malloc(((size_t)ngroups + 1) * sizeof *tmp);
  tsr_status st = TSR_OK;
  if (!gorder || !cstart || !clips || !wcount || !rcount || !tmp) {
    st = err_set(TSR_ENOMEM, "plan_build: out of memory");
    goto done;
  }
  for (int g = 0; g < ngroups; g++) rcount[slots[g].first_rank + 1]++;
  for (int r = 0; r < out->ranks; r++) rcount[r + 1] += rcount[r];
  for (int g = 0; g < ngroups; g++) tmp[rcount[slots[g].first_rank]++] = g;
  for (int g = 0; g < ngroups; g++) wcount[slots[g].wave + 1]++;
  for (int w = 0; w < nwaves; w++) wcount[w + 1] += wcount[w];
  for (int j = 0; j < ngroups; j++) gorder[wcount[slots[tmp[j]].wave]++] = tmp[j];
  for (int c = 0; c < nclips; c++) cstart[slot_of[c] + 1]++;
  for (int g = 0; g < ngroups; g++) cstart[g + 1] += cstart[g];
  for (int c = 0; c < nclips; c++) clips[cstart[slot_of[c]]++] = c;
  for (int g = ngroups; g > 0; g--) cstart[g] = cstart[g - 1];  // back to starts
  cstart[0] = 0;
  for (int j = 0, w = 0; w < nwaves && !st; w++) {
    st = plan_wave_begin(out);
    for (; !st && j < ngroups && slots[gorder[j]].wave == w; j++) {
      int g = gorder[j];
      st = plan_add_group(out, slots[g].first_rank, slots[g].size, clips + cstart[g],
                          cstart[g + 1] - cstart[g]);
    }
    if (!st) st = plan_wave_end(out);
  }
done:
  free(gorder);
  free(cstart);
  free(clips);
  free(wcount);
  free(rcount);
  free(tmp);
  return st;
}
