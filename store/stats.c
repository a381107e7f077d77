// store/stats.c — the sums of `tessera index stats` over a store's clip rows
// (store/stats.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/stats.h"

static void histo_init(store_histo *h, int lo_exp) {
  memset(h, 0, sizeof *h);
  h->lo_exp = lo_exp;
  h->used_lo = STORE_HISTO_BINS;
  h->used_hi = -1;
}

static void histo_add(store_histo *h, double v) {
  // An infinite or NaN duration must not reach the int cast.
  int b = v > 0 && isfinite(v) ? (int)floor(log2(v)) - h->lo_exp
                               : (v > 0 ? STORE_HISTO_BINS - 1 : 0);
  if (b < 0) b = 0;
  if (b >= STORE_HISTO_BINS) b = STORE_HISTO_BINS - 1;
  h->count[b]++;
  if (b < h->used_lo) h->used_lo = b;
  if (b > h->used_hi) h->used_hi = b;
}

double store_histo_lo(const store_histo *h, int b) { return ldexp(1.0, h->lo_exp + b); }

// The walk over the clip rows: the predicate and, for the kept clips, the sums in doubles
// as index_totals sums them (a damaged row must not overflow).
typedef struct {
  store_stats *out;
  int (*keep)(const store_clip_row *r, void *ctx);
  void *ctx;
  int64_t kept;
  double tokens, frames, dropped, seconds;
} walk;

static int add_score(const char *name, double v, void *p) {
  store_stats *s = p;
  store_score_sum *e = NULL;
  for (int i = 0; i < s->nscores && !e; i++)
    if (!strcmp(s->scores[i].name, name)) e = &s->scores[i];
  if (!e && s->nscores == STORE_STATS_MAX_SCORE_NAMES) {
    s->other_names++;
    return 0;
  }
  if (!e) {
    e = &s->scores[s->nscores++];
    *e = (store_score_sum){.min = v, .max = v};
    snprintf(e->name, sizeof e->name, "%s", name);
  }
  e->count++;
  e->sum += v;
  if (v < e->min) e->min = v;
  if (v > e->max) e->max = v;
  return 0;
}

static int add_clip(const store_clip_row *r, void *p) {
  walk *w = p;
  store_stats *s = w->out;
  if (w->keep && !w->keep(r, w->ctx)) return 0;
  w->kept++;
  w->tokens += (double)r->c.tokens;
  w->frames += (double)r->c.frames;
  w->dropped += (double)r->c.dropped_frames;
  w->seconds += r->c.duration_s;
  histo_add(&s->sec, r->c.duration_s);
  histo_add(&s->tok, (double)r->c.tokens);
  if (s->min_tok < 0 || r->c.tokens < s->min_tok) s->min_tok = r->c.tokens;
  if (r->c.tokens > s->max_tok) s->max_tok = r->c.tokens;
  if (s->min_sec < 0 || r->c.duration_s < s->min_sec) s->min_sec = r->c.duration_s;
  if (r->c.duration_s > s->max_sec) s->max_sec = r->c.duration_s;
  if (r->c.manifest_row > 0) s->manifest_clips++;
  if (r->c.manifest_row > 0 && r->c.span_cut) s->span_cut++;
  if (r->c.scores && store_scores_each(r->c.scores, add_score, s) != TSR_OK) {
    s->bad_scores++;  // `index verify` names the row
    err_clear();
  }
  return 0;
}

// The clip totals of out->t replaced by the sums over the kept clips.
static tsr_status kept_totals(const walk *w, const char *dir) {
  const double sum[3] = {w->tokens, w->frames, w->dropped};
  int64_t *dst[3] = {&w->out->t.tokens, &w->out->t.frames, &w->out->t.dropped_frames};
  for (int i = 0; i < 3; i++) {
    if (!(sum[i] > -9.2e18 && sum[i] < 9.2e18))  // converting it would be undefined
      return err_set(TSR_EFORMAT, "index of %s: the selected clips' tokens or frames add up to "
                     "%g: a clip row is damaged; run `tessera index verify`", dir, sum[i]);
    *dst[i] = (int64_t)sum[i];
  }
  w->out->t.clips = w->kept;
  w->out->t.seconds = w->seconds;
  return TSR_OK;
}

tsr_status store_stats_collect(store_index *ix, const char *dir,
                               int (*keep)(const store_clip_row *r, void *ctx), void *ctx,
                               store_stats *out) {
  *out = (store_stats){.min_tok = -1, .min_sec = -1};
  histo_init(&out->sec, -6);  // from 1/64 s
  histo_init(&out->tok, 0);
  if (!(out->scores = malloc(STORE_STATS_MAX_SCORE_NAMES * sizeof *out->scores)))
    return err_set(TSR_ENOMEM, "out of memory");
  walk w = {.out = out, .keep = keep, .ctx = ctx};
  tsr_status st = index_settings(ix, &out->s);
  if (!st) st = index_totals(ix, &out->t);
  out->store_clips = out->t.clips;
  if (!st) st = index_foreach_clip(ix, add_clip, &w);
  if (!st && keep) st = kept_totals(&w, dir);
  return st;
}

void store_stats_free(store_stats *s) {
  free(s->scores);
  s->scores = NULL;
  s->nscores = 0;
}
