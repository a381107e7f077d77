// tools/cmd_index_read.c — `tessera index stats` and `tessera index list`: what a store's
// index holds, as text or JSON (tools/cmd_index_read.h; the other subcommands:
// tools/cmd_index.c).
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cmd_index_read.h"

#include "core/term.h"
#include "ingest/manifest_filter.h"
#include "model/train/mix.h"
#include "store/clip_filter.h"
#include "store/index.h"
#include "store/json_cols.h"
#include "store/settings.h"
#include "store/stats.h"
#include "store/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/opt.h"
#include "tools/parse.h"

// ---- --where: the manifest filter syntax on a clip's stored scores ----------------------

// Non-zero if the clip's scores pass every --where clause of f (manifest_filter_stored).
static int where_passes(const manifest_filter *f, const store_clip_row *r) {
  manifest_filter_result why;
  return !manifest_filter_stored(f, r->c.scores, &why);
}

// where_passes as list_ctx's keep predicate (ctx: the manifest_filter).
static int where_keep(const store_clip_row *r, void *f) { return where_passes(f, r); }

// The canonical text of f's clauses (ingest/manifest_filter.h), escaped for the terminal,
// into out (n >= TERM_ESCAPE_SIZE(4096) bytes).
static void where_text(const manifest_filter *f, char *out, size_t n) {
  char text[4096];
  if (manifest_filter_format(f, text, sizeof text)) {  // 32 clauses of 62-byte names fit
    snprintf(text, sizeof text, "(%d clauses)", f->nwhere);
    err_clear();
  }
  term_escape(out, n, text);
}

// ---- stats ----------------------------------------------------------------------------

static void histo_print(const store_histo *h, const char *title, const char *unit) {
  printf("%s:\n", title);
  if (h->used_hi < 0) {
    printf("  (no clips)\n");
    return;
  }
  int64_t mx = 0;
  for (int b = h->used_lo; b <= h->used_hi; b++)
    if (h->count[b] > mx) mx = h->count[b];
  for (int b = h->used_lo; b <= h->used_hi; b++) {
    char bar[41];
    int w = mx ? (int)((h->count[b] * 40 + mx - 1) / mx) : 0;
    memset(bar, '#', (size_t)w);
    bar[w] = 0;
    printf("  [%10g, %10g) %-3s |%-40s| %lld\n", store_histo_lo(h, b), store_histo_lo(h, b + 1), unit, bar,
           (long long)h->count[b]);
  }
}

static json_t *histo_json(const store_histo *h) {
  json_t *a = json_array();
  for (int b = h->used_lo; b <= h->used_hi; b++)
    json_array_append_new(a, json_pack("{s:f, s:f, s:I}", "lo", store_histo_lo(h, b), "hi",
                                       store_histo_lo(h, b + 1), "count", (json_int_t)h->count[b]));
  return a;
}

// Paths, labels and reasons come from the data: escaped for the terminal (core/term.h).
static int print_failed(const char *path, const char *err, void *ctx) {
  char p[TERM_ESCAPE_SIZE(4096)], e[TERM_ESCAPE_SIZE(4096)];
  printf("  %s: %s\n", term_escape(p, sizeof p, path), term_escape(e, sizeof e, err));
  return 0;
}

// JSON strings are UTF-8: a path that is not (a failed source's) is given escaped.
static int json_failed(const char *path, const char *err, void *ctx) {
  char p[TERM_ESCAPE_SIZE(4096)], e[TERM_ESCAPE_SIZE(4096)];
  if (!term_is_utf8(path)) path = term_escape(p, sizeof p, path);
  if (!term_is_utf8(err)) err = term_escape(e, sizeof e, err);
  json_array_append_new(ctx, json_pack("{s:s, s:s}", "path", path, "error", err));
  return 0;
}

// What stats prints, gathered.
typedef struct {
  const char *dir;
  store_stats ss;      // with --where, the clip totals are those of the clips that pass
  char where[TERM_ESCAPE_SIZE(4096)];  // --where's canonical text, escaped ("" when none)
  json_t *failed;  // --json: the failed sources
} stats_run;

// x's stats over the clips that pass `where` (NULL: every clip), and the failed sources
// for --json.
static tsr_status stats_collect(store_index *ix, stats_run *x, const manifest_filter *where) {
  tsr_status st = store_stats_collect(ix, x->dir, where ? where_keep : NULL, (void *)where,
                                      &x->ss);
  if (!st && x->failed) st = index_foreach_failed(ix, json_failed, x->failed);
  return st;
}

// {"name": {"count", "min", "mean", "max"}, ...} in the order the names first appear.
static json_t *scores_json(const store_stats *sc) {
  json_t *o = json_object();
  for (int i = 0; i < sc->nscores; i++) {
    const store_score_sum *e = &sc->scores[i];
    json_object_set_new(o, e->name, json_pack("{s:I, s:f, s:f, s:f}", "count",
                                               (json_int_t)e->count, "min", e->min, "mean",
                                               e->sum / (double)e->count, "max", e->max));
  }
  return o;
}

// The stats of x as one JSON object (NULL when out of memory).
static json_t *stats_json_obj(stats_run *x) {
  const store_settings *s = &x->ss.s;
  const store_totals *t = &x->ss.t;
  json_t *o = json_pack(
      "{s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:I, s:i, s:i}, s:{s:I, s:I, s:I},"
      " s:I, s:I, s:I, s:I, s:f, s:f, s:o, s:o, s:o, s:I, s:I, s:o, s:s, s:I}",
      "store", x->dir, "settings", "fps_num", s->fps_num, "fps_den", s->fps_den, "short_side",
      s->short_side, "pt", s->pt, "ph", s->ph, "pw", s->pw, "channels", s->channels, "dtype",
      store_dtype_name(s->dtype), "max_seconds", s->max_seconds, "token_bytes",
      (json_int_t)store_token_bytes(s), "vae_t", s->vae_t, "vae_s", s->vae_s,
      "sources", "done", (json_int_t)t->sources_done, "partial", (json_int_t)t->sources_partial,
      "failed", (json_int_t)t->sources_failed, "clips", (json_int_t)t->clips, "tokens",
      (json_int_t)t->tokens, "frames", (json_int_t)t->frames, "dropped_frames",
      (json_int_t)t->dropped_frames, "seconds", t->seconds, "hours", t->seconds / 3600.0,
      "histogram_seconds", histo_json(&x->ss.sec), "histogram_tokens", histo_json(&x->ss.tok),
      "failed_sources", x->failed, "manifest_clips", (json_int_t)x->ss.manifest_clips,
      "span_cut_clips", (json_int_t)x->ss.span_cut, "scores", scores_json(&x->ss), "where",
      x->where, "clips_in_store", (json_int_t)x->ss.store_clips);
  x->failed = NULL;
  return o;
}

static tsr_status stats_print_json(json_t *o) {
  int bad = !o || json_dumpf(o, stdout, JSON_INDENT(2)) != 0 || putchar('\n') == EOF;
  return bad ? err_set(TSR_EIO, "cannot write JSON to stdout") : TSR_OK;
}

// The manifest part of the text: clips from manifest rows, cut ones, each score's sums.
static void stats_text_manifest(const store_stats *sc) {
  if (sc->manifest_clips)
    printf("manifest: %lld clips from manifest rows, %lld of them cut at the end of their "
           "video\n", (long long)sc->manifest_clips, (long long)sc->span_cut);
  if (sc->nscores) printf("scores:%*s %10s %12s %12s %12s\n", 23, "", "clips", "min", "mean",
                          "max");
  for (int i = 0; i < sc->nscores; i++) {
    const store_score_sum *e = &sc->scores[i];
    char name[TERM_ESCAPE_SIZE(STORE_MAX_SCORE_NAME)];
    printf("  %-28s %10lld %12.6g %12.6g %12.6g\n", term_escape(name, sizeof name, e->name),
           (long long)e->count, e->min, e->sum / (double)e->count, e->max);
  }
  if (sc->other_names)
    printf("  (%lld more scores of other names, not summed)\n", (long long)sc->other_names);
  if (sc->bad_scores)
    printf("  (%lld clips whose scores do not parse: see `tessera index verify`)\n",
           (long long)sc->bad_scores);
}

static void stats_text(const stats_run *x) {
  const store_settings *s = &x->ss.s;
  const store_totals *t = &x->ss.t;
  const char *dt = store_dtype_name(s->dtype);
  printf("store %s\n", x->dir);
  if (store_is_latent(s))
    printf("settings: latents of a VAE of stride %dx%dx%d, video at %d/%d fps, patch %dx%dx%d, %d "
           "channels %s, max %g s per clip\n", s->vae_t, s->vae_s, s->vae_s, s->fps_num,
           s->fps_den, s->pt, s->ph, s->pw, s->channels, dt, s->max_seconds);
  else
    printf("settings: fps %d/%d, short side %d, patch %dx%dx%d, %d channels %s, max %g s per "
           "clip\n", s->fps_num, s->fps_den, s->short_side, s->pt, s->ph, s->pw, s->channels, dt,
           s->max_seconds);
  printf("sources: %lld done (%lld partial), %lld failed\n", (long long)t->sources_done,
         (long long)t->sources_partial, (long long)t->sources_failed);
  if (x->where[0])
    printf("selected: %lld of %lld clips pass %s (what follows counts them)\n",
           (long long)t->clips, (long long)x->ss.store_clips, x->where);
  printf("clips: %lld, tokens: %lld (%.3g GB), frames: %lld (+%lld dropped), hours: %.3f\n",
         (long long)t->clips, (long long)t->tokens,
         (double)t->tokens * (double)store_token_bytes(s) / 1e9, (long long)t->frames,
         (long long)t->dropped_frames, t->seconds / 3600.0);
  if (t->clips)
    printf("clip length: %.3g to %.3g s, %lld to %lld tokens\n", x->ss.min_sec, x->ss.max_sec,
           (long long)x->ss.min_tok, (long long)x->ss.max_tok);
  histo_print(&x->ss.sec, "clip length in seconds", "s");
  histo_print(&x->ss.tok, "clip length in tokens", "tok");
  stats_text_manifest(&x->ss);
}

// One store's stats: printed as text, or with `json` as an object into *obj (the caller's).
// *t: its totals (of the clips that pass `where`), *clips: every clip of the store.
static tsr_status stats_store(const char *dir, int json, const manifest_filter *where,
                              json_t **obj, store_totals *t, int64_t *clips) {
  stats_run x = {.dir = dir, .failed = json ? json_array() : NULL};
  if (where && where->nwhere) where_text(where, x.where, sizeof x.where);
  else where = NULL;
  store_index *ix = NULL;
  tsr_status st = store_open(&ix, x.dir, 0, NULL);
  if (!st) st = stats_collect(ix, &x, where);
  if (!st && json && !(*obj = stats_json_obj(&x))) st = err_set(TSR_ENOMEM, "out of memory");
  if (!st && !json) {
    stats_text(&x);
    if (x.ss.t.sources_failed) {
      printf("failed sources:\n");
      st = index_foreach_failed(ix, print_failed, NULL);
    }
  }
  index_close(&ix);
  json_decref(x.failed);
  store_stats_free(&x.ss);
  *t = x.ss.t;
  *clips = x.ss.store_clips;
  return st;
}

// The mix's totals: the sums of its stores' (sources, clips, tokens, frames, seconds).
static void totals_add(store_totals *sum, const store_totals *t) {
  sum->sources_done += t->sources_done;
  sum->sources_partial += t->sources_partial;
  sum->sources_failed += t->sources_failed;
  sum->clips += t->clips;
  sum->tokens += t->tokens;
  sum->frames += t->frames;
  sum->dropped_frames += t->dropped_frames;
  sum->seconds += t->seconds;
}

// What an epoch of the mix draws of each store (mix_epoch_draws: no clip held out;
// train.val_clips takes its clips before the quotas are counted).
static void mix_text(const mix_spec *m, const store_totals *sum, const store_totals *t,
                     const int64_t *clips, const int64_t *quota, int64_t draws) {
  printf("\nmix %s: %d stores\n", m->path, m->n);
  printf("  %-20s %10s %12s %9s %-12s %12s %7s %9s\n", "store", "clips", "tokens", "hours",
         "drawn by", "per epoch", "share", "per clip");
  for (int s = 0; s < m->n; s++) {
    char how[32], name[TERM_ESCAPE_SIZE(MIX_NAME_MAX)];
    if (m->store[s].repeat) snprintf(how, sizeof how, "repeat %lld", (long long)m->store[s].repeat);
    else snprintf(how, sizeof how, "weight %g", m->store[s].weight);
    printf("  %-20s %10lld %12lld %9.3f %-12s %12lld %6.2f%% %9.3f\n",
           term_escape(name, sizeof name, m->store[s].name), (long long)t[s].clips,
           (long long)t[s].tokens, t[s].seconds / 3600.0, how, (long long)quota[s],
           100.0 * (double)quota[s] / (double)draws, (double)quota[s] / (double)clips[s]);
  }
  printf("totals: clips: %lld, tokens: %lld, frames: %lld (+%lld dropped), hours: %.3f; an "
         "epoch draws %lld clips\n", (long long)sum->clips, (long long)sum->tokens,
         (long long)sum->frames, (long long)sum->dropped_frames, sum->seconds / 3600.0,
         (long long)draws);
}

static json_t *totals_json(const store_totals *t) {
  return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "sources_done",
                   (json_int_t)t->sources_done, "sources_partial", (json_int_t)t->sources_partial,
                   "sources_failed", (json_int_t)t->sources_failed, "clips", (json_int_t)t->clips,
                   "tokens", (json_int_t)t->tokens, "frames", (json_int_t)t->frames,
                   "dropped_frames", (json_int_t)t->dropped_frames, "seconds", t->seconds,
                   "hours", t->seconds / 3600.0);
}

// `index stats DATASET.ini`: every store's stats (text: one after the other; JSON: in
// "stores"), then the mix's totals and what an epoch draws of each store.
static tsr_status stats_mix(const char *path, int json, const manifest_filter *where) {
  mix_spec m;
  tsr_status st = mix_read(path, &m);
  if (st) return st;
  store_totals sum = {0}, *t = calloc((size_t)m.n, sizeof *t);
  int64_t *clips = calloc((size_t)m.n, sizeof *clips), *quota = calloc((size_t)m.n, sizeof *quota);
  json_t *stores = json ? json_array() : NULL;
  if (!t || !clips || !quota || (json && !stores)) st = err_set(TSR_ENOMEM, "out of memory");
  for (int s = 0; !st && s < m.n; s++) {
    json_t *obj = NULL;
    char name[TERM_ESCAPE_SIZE(MIX_NAME_MAX)];
    if (!json)
      printf("%s== store %d of %d: '%s'\n", s ? "\n" : "", s + 1, m.n,
             term_escape(name, sizeof name, m.store[s].name));
    st = stats_store(m.store[s].path, json, where, &obj, &t[s], &clips[s]);
    if (st) st = err_wrap(st, "mix %s, store '%s': ", path, term_escape(name, sizeof name,
                                                                         m.store[s].name));
    else if (json && json_array_append_new(stores, obj)) st = err_set(TSR_ENOMEM, "out of memory");
    if (!st) totals_add(&sum, &t[s]);
  }
  int64_t draws = 0;
  if (!st) st = mix_epoch_draws(&m, clips, quota, &draws);
  if (!st && !json) mix_text(&m, &sum, t, clips, quota, draws);
  if (!st && json) {
    json_t *shares = json_array();
    for (int s = 0; s < m.n; s++)
      json_array_append_new(shares, json_pack(
          "{s:s, s:s, s:f, s:I, s:I, s:I, s:f, s:f}", "name", m.store[s].name, "path",
          m.store[s].path, "weight", m.store[s].weight, "repeat", (json_int_t)m.store[s].repeat,
          "clips", (json_int_t)clips[s], "draws_per_epoch", (json_int_t)quota[s], "share",
          (double)quota[s] / (double)draws, "draws_per_clip", (double)quota[s] / (double)clips[s]));
    json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:I}", "mix", path, "stores", stores, "mix_stores",
                          shares, "totals", totals_json(&sum), "draws_per_epoch",
                          (json_int_t)draws);
    stores = NULL;
    st = o ? stats_print_json(o) : err_set(TSR_ENOMEM, "out of memory");
    json_decref(o);
  }
  json_decref(stores);
  free(t);
  free(clips);
  free(quota);
  mix_free(&m);
  return st;
}

static const opt_def stats_opts[] = {
    OPT("where", "EXPR", 'w', NULL,
        "count only the clips whose scores pass EXPR, NAME OP NUMBER as\n"
        "in 'aesthetic_score >= 4.5' (< <= > >= == !=; the syntax of\n"
        "`tessera manifest --where`); repeat: all must hold. A clip\n"
        "without the score fails. Source counts stay the store's"),
    OPT("json", NULL, 'j', NULL, "the same as one JSON object on stdout"),
    OPT_END};

int cmd_index_stats(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index stats STORE|DATASET.ini [--where EXPR]... [--json]\n\n"
           "Prints the store's settings, counts of sources (done, partial, failed) and clips,\n"
           "total tokens, frames and hours, histograms of clip length in seconds and in\n"
           "tokens (power-of-two bins), for clips from a manifest their count and how many\n"
           "were cut at the end of their video, for each score the count of clips that have\n"
           "it, its min, mean and max, and every failed source with its reason.\n");
    opt_help(stdout, stats_opts, 14);
    printf("Of a dataset mix (DATASET.ini, docs/train.md \"Dataset mixes\"): each store's\n"
           "stats, then the mix's totals and each store's draws an epoch and share of them.\n");
    return 0;
  }
  int json = 0, c;
  manifest_filter where = {0};
  tsr_status st = TSR_OK;
  opt_parser op;
  opt_begin(&op, stats_opts, argc, argv);
  while (!st && (c = opt_next(&op)) != -1)
    st = c == 'j' ? (json = 1, TSR_OK)
         : c == 'w' ? manifest_filter_add_where(&where, optarg) : TSR_EINVAL;
  if (!st) st = cli_positionals(argc, argv, 1, 1, "STORE");
  if (st) return cli_usage_error("index stats");
  json_t *obj = NULL;
  store_totals t;
  int64_t clips;
  if (mix_is_spec(argv[optind])) {
    st = stats_mix(argv[optind], json, &where);
  } else {
    st = stats_store(argv[optind], json, &where, &obj, &t, &clips);
    if (!st && json) st = stats_print_json(obj);
    json_decref(obj);
  }
  return st ? cli_error("index stats") : 0;
}

// ---- list -----------------------------------------------------------------------------

typedef struct {
  store_clip_filter f;  // the filters; --where's score clauses are its keep (where_keep)
  int64_t limit, shown, matched;
  int json;                    // --json: a JSON array, written one element at a time
  int write_failed;            // a JSON element could not be made or written
} list_ctx;

// A real, or null for NaN (an open span end).
static json_t *json_real_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

// The manifest fields (null for a clip not from a manifest), scores and caption of a clip.
static int list_json_extras(json_t *o, const store_clip *c) {
  int m = c->manifest_row > 0;
  // scores are canonical JSON; a damaged row's are given as the text it holds
  json_t *scores = c->scores ? json_loads(c->scores, JSON_DECODE_INT_AS_REAL, NULL)
                             : json_null();
  if (!scores) scores = term_is_utf8(c->scores) ? json_string(c->scores) : json_null();
  json_t *row = m ? json_integer(c->manifest_row) : json_null();
  json_t *span = m ? json_integer(c->manifest_span) : json_null();
  return json_object_set_new(o, "manifest_row", row) ||
         json_object_set_new(o, "manifest_span", span) ||
         json_object_set_new(o, "span_start", json_real_or_null(m ? c->span_start : NAN)) ||
         json_object_set_new(o, "span_end", json_real_or_null(m ? c->span_end : NAN)) ||
         json_object_set_new(o, "span_cut", m ? json_boolean(c->span_cut) : json_null()) ||
         json_object_set_new(o, "scores", scores) ||
         json_object_set_new(o, "caption", c->caption && term_is_utf8(c->caption)
                                               ? json_string(c->caption) : json_null());
}

// One clip as an element of the --json array on stdout, as json_dumpf(JSON_INDENT(2)) of
// the whole array wrote it, but streamed: a store of millions of clips never holds them
// all (2M clips took 3.3 GB as one array). Returns non-zero on failure.
static int list_json(list_ctx *x, const store_clip_row *r, const char *label) {
  json_t *o = json_pack("{s:I, s:s, s:i, s:f, s:f, s:i, s:i, s:i, s:I, s:s}", "id",
                        (json_int_t)r->id, "source", r->source, "clip_index", r->c.clip_index,
                        "start_s", r->c.start_s, "duration_s", r->c.duration_s, "T", r->c.T,
                        "H", r->c.H, "W", r->c.W, "tokens", (json_int_t)r->c.tokens, "label",
                        label);
  char *text = o && !list_json_extras(o, &r->c) ? json_dumps(o, JSON_INDENT(2)) : NULL;
  json_decref(o);
  int bad = !text || fputs(x->shown == 1 ? "[\n  " : ",\n  ", stdout) == EOF;
  for (const char *p = text; !bad && *p; p++)  // every line of the element 2 deeper
    bad = putchar(*p) == EOF || (*p == '\n' && fputs("  ", stdout) == EOF);
  free(text);
  return x->write_failed = bad;
}

// "ROW:SPAN" and "START-END" (open ends "start", "end"; ",cut" when the video ended first)
// of a clip from a manifest, "-" for others.
static void span_text(const store_clip *c, char *rs, size_t nrs, char *sp, size_t nsp) {
  if (c->manifest_row <= 0) {
    snprintf(rs, nrs, "-");
    snprintf(sp, nsp, "-");
    return;
  }
  char a[32] = "start", b[32] = "end";
  if (!isnan(c->span_start)) snprintf(a, sizeof a, "%g", c->span_start);
  if (!isnan(c->span_end)) snprintf(b, sizeof b, "%g", c->span_end);
  snprintf(rs, nrs, "%lld:%d", (long long)c->manifest_row, c->manifest_span);
  snprintf(sp, nsp, "%s-%s%s", a, b, c->span_cut ? ",cut" : "");
}

static int list_clip(const store_clip_row *r, void *p) {
  list_ctx *x = p;
  const char *label = r->c.label ? r->c.label : "";
  if (!store_clip_filter_match(&x->f, r)) return 0;
  x->matched++;
  if (x->limit && x->shown >= x->limit) return 0;
  x->shown++;
  if (x->json) return list_json(x, r, label);
  char lab[TERM_ESCAPE_SIZE(sizeof r->label_buf)], src[TERM_ESCAPE_SIZE(sizeof r->source)];
  char sc[TERM_ESCAPE_SIZE(sizeof r->scores_buf)], rs[48], sp[80];
  span_text(&r->c, rs, sizeof rs, sp, sizeof sp);
  printf("%8lld  %9.2f  %8.2f  %5dx%dx%-4d %9lld  %-12s  %-9s  %-18s  %s%s%s\n",
         (long long)r->id, r->c.start_s, r->c.duration_s, r->c.T, r->c.H, r->c.W,
         (long long)r->c.tokens, label[0] ? term_escape(lab, sizeof lab, label) : "-", rs, sp,
         term_escape(src, sizeof src, r->source), r->c.scores ? "  " : "",
         r->c.scores ? term_escape(sc, sizeof sc, r->c.scores) : "");
  return 0;
}

static const opt_def list_opts[] = {
    OPT("label", "L", 'l', NULL, "clips labelled L only (--label '' : clips without a label)"),
    OPT("source", "TEXT", 's', NULL, "clips whose source path contains TEXT"),
    OPT("min-tokens", "N", 'n', NULL, "clips of at least N tokens"),
    OPT("max-tokens", "N", 'x', NULL, "clips of at most N tokens"),
    OPT("row", "R", 'r', NULL, "clips of manifest row R (1-based data row)"),
    OPT("where", "EXPR", 'w', NULL,
        "clips whose scores pass EXPR, NAME OP NUMBER as in\n"
        "'aesthetic_score >= 4.5' (< <= > >= == !=; the syntax of\n"
        "`tessera manifest --where`); repeat: all must hold. A clip\n"
        "without the score fails"),
    OPT("limit", "N", 'k', NULL, "the first N matching clips (the count of all is printed)"),
    OPT("json", NULL, 'j', NULL,
        "a JSON array of {id, source, clip_index, start_s, duration_s,\n"
        "T, H, W, tokens, label, manifest_row, manifest_span,\n"
        "span_start, span_end, span_cut, scores, caption} on stdout\n"
        "instead (null where a clip has none)"),
    OPT_END};

// The options of list into x, --where's clauses into *where (x->f.keep judges them when
// there are some); TSR_EINVAL after opt_next or a parser said why.
static tsr_status list_options(int argc, char **argv, list_ctx *x, manifest_filter *where) {
  int c;
  tsr_status st = TSR_OK;
  opt_parser op;
  opt_begin(&op, list_opts, argc, argv);
  while (!st && (c = opt_next(&op)) != -1) {
    switch (c) {
    case 'l': x->f.label = optarg; break;
    case 's': x->f.source = optarg; break;
    case 'n': st = parse_i64("--min-tokens", optarg, 0, INT64_MAX, &x->f.min_tokens); break;
    case 'x': st = parse_i64("--max-tokens", optarg, 1, INT64_MAX, &x->f.max_tokens); break;
    case 'r': st = parse_i64("--row", optarg, 1, INT64_MAX, &x->f.row); break;
    case 'k': st = parse_i64("--limit", optarg, 1, INT64_MAX, &x->limit); break;
    case 'w': st = manifest_filter_add_where(where, optarg); break;
    case 'j': x->json = 1; break;
    default: st = TSR_EINVAL;  // opt_next said why
    }
  }
  if (!st) st = cli_positionals(argc, argv, 1, 1, "STORE");
  if (where->nwhere) {
    x->f.keep = where_keep;
    x->f.keep_ctx = where;
  }
  if (!st) st = store_clip_filter_check(&x->f);
  return st;
}

int cmd_index_list(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index list STORE [--label L] [--source TEXT] [--min-tokens N]\n"
           "                          [--max-tokens N] [--row R] [--where EXPR]...\n"
           "                          [--limit N] [--json]\n\n"
           "One line per clip, in id order: id, start and length in the source (seconds),\n"
           "token grid TxHxW, tokens, label, manifest row and span (ROW:SPAN), the span asked\n"
           "for (START-END seconds, open ends 'start' and 'end', ',cut' when the video ended\n"
           "first), source path and the row's scores; '-' where a clip has none. The id is\n"
           "what `tessera index export STORE --clip ID` takes.\n");
    opt_help(stdout, list_opts, 17);
    return 0;
  }
  list_ctx x = {0};
  manifest_filter where = {0};
  if (list_options(argc, argv, &x, &where)) return cli_usage_error("index list");
  const char *dir = argv[optind];
  store_index *ix = NULL;
  if (!x.json)
    printf("%8s  %9s  %8s  %-12s %9s  %-12s  %-9s  %-18s  %s\n", "id", "start_s", "length_s",
           "grid TxHxW", "tokens", "label", "row:span", "span_s", "source  scores");
  tsr_status st = store_open(&ix, dir, 0, NULL);
  if (!st) st = index_foreach_clip(ix, list_clip, &x);
  index_close(&ix);
  if (!st && x.json && !x.write_failed && fputs(x.shown ? "\n]\n" : "[]\n", stdout) == EOF)
    x.write_failed = 1;
  if (!st && x.write_failed) st = err_set(TSR_EIO, "cannot write JSON to stdout");
  if (st) return cli_error("index list");
  fflush(stdout);  // the table before the count, on a terminal
  if (!x.json)
    fprintf(stderr, "index list: %lld clips match, %lld shown\n", (long long)x.matched,
            (long long)x.shown);
  return 0;
}
