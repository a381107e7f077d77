// tools/cmd_index.c — `tessera index stats|verify|merge|recover|export`: inspect and
// maintain a token store (store/store.h, store/verify.h, store/merge.h, store/recover.h, ingest/export.h).
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/term.h"
#ifdef TESSERA_HAVE_MEDIA
#include "ingest/export.h"
#endif
#include "store/index.h"
#include "store/lock.h"
#include "store/merge.h"
#include "store/rebuild.h"
#include "store/recover.h"
#include "store/settings.h"
#include "store/store.h"
#include "store/verify.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/parse.h"

#define EXIT_CORRUPT 3

static void usage(FILE *f) {
  fprintf(f,
          "usage: tessera index <subcommand> [options]   (tessera index <subcommand> --help)\n\n"
          "Inspects and maintains a token store made by `tessera ingest`.\n\n"
          "subcommands:\n"
          "  stats STORE [--json]     counts, tokens, hours, length histograms, failed sources\n"
          "  list STORE [filters]     one line per clip: id, source, start, length, tokens,\n"
          "                           label (the ids `export --clip` takes)\n"
          "  verify STORE             check every shard header and clip checksum\n"
          "  merge OUT IN...          combine stores with identical settings into OUT\n"
          "  recover STORE            finish an interrupted ingest's bookkeeping (merge parts,\n"
          "                           cut uncommitted shard tails, remove unreferenced shards);\n"
          "                           rebuilds a lost or damaged index from the shards\n"
          "  export STORE --clip ID --out FILE.mp4 [--crf N] [--raw]\n"
          "                           rebuild a clip from its tokens as a video\n\n"
          "exit status: 0 ok; 1 fatal (bad arguments, missing or invalid store); verify: 3 when\n"
          "corruption is found.\n");
}

// ---- stats ----------------------------------------------------------------------------

#define NBINS 64
typedef struct {
  int lo_exp;            // bin b covers [2^(lo_exp+b), 2^(lo_exp+b+1))
  int64_t count[NBINS];
  int used_lo, used_hi;  // first and last non-empty bin
} histo;

static void histo_init(histo *h, int lo_exp) {
  memset(h, 0, sizeof *h);
  h->lo_exp = lo_exp;
  h->used_lo = NBINS;
  h->used_hi = -1;
}

static void histo_add(histo *h, double v) {
  // Row values are untrusted: an infinite or NaN duration must not reach the int cast.
  int b = v > 0 && isfinite(v) ? (int)floor(log2(v)) - h->lo_exp : (v > 0 ? NBINS - 1 : 0);
  if (b < 0) b = 0;
  if (b >= NBINS) b = NBINS - 1;
  h->count[b]++;
  if (b < h->used_lo) h->used_lo = b;
  if (b > h->used_hi) h->used_hi = b;
}

static double bin_lo(const histo *h, int b) { return ldexp(1.0, h->lo_exp + b); }

static void histo_print(const histo *h, const char *title, const char *unit) {
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
    printf("  [%10g, %10g) %-3s |%-40s| %lld\n", bin_lo(h, b), bin_lo(h, b + 1), unit, bar,
           (long long)h->count[b]);
  }
}

static json_t *histo_json(const histo *h) {
  json_t *a = json_array();
  for (int b = h->used_lo; b <= h->used_hi; b++)
    json_array_append_new(a, json_pack("{s:f, s:f, s:I}", "lo", bin_lo(h, b), "hi",
                                       bin_lo(h, b + 1), "count", (json_int_t)h->count[b]));
  return a;
}

typedef struct {
  histo sec, tok;
  int64_t min_tok, max_tok;
  double min_sec, max_sec;
} stats_ctx;

static int stats_clip(const store_clip_row *r, void *p) {
  stats_ctx *s = p;
  histo_add(&s->sec, r->c.duration_s);
  histo_add(&s->tok, (double)r->c.tokens);
  if (s->min_tok < 0 || r->c.tokens < s->min_tok) s->min_tok = r->c.tokens;
  if (r->c.tokens > s->max_tok) s->max_tok = r->c.tokens;
  if (s->min_sec < 0 || r->c.duration_s < s->min_sec) s->min_sec = r->c.duration_s;
  if (r->c.duration_s > s->max_sec) s->max_sec = r->c.duration_s;
  return 0;
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

static int cmd_stats(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index stats STORE [--json]\n\n"
           "Prints the store's settings, counts of sources (done, partial, failed) and clips,\n"
           "total tokens, frames and hours, histograms of clip length in seconds and in\n"
           "tokens (power-of-two bins), and every failed source with its reason.\n"
           "  --json   the same as one JSON object on stdout\n");
    return 0;
  }
  static const struct option opts[] = {{"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
  int json = 0, c;
  tsr_status st = TSR_OK;
  cli_reset();
  while (!st && (c = cli_getopt(argc, argv, opts)) != -1) st = c == 'j' ? (json = 1, TSR_OK) : TSR_EINVAL;
  if (!st) st = cli_positionals(argc, argv, 1, 1, "STORE");
  if (st) return cli_usage_error("index stats");
  const char *dir = argv[optind];
  store_index *ix = NULL;
  store_totals t;
  store_settings s;
  stats_ctx sc = {.min_tok = -1, .min_sec = -1};
  histo_init(&sc.sec, -6);  // from 1/64 s
  histo_init(&sc.tok, 0);
  json_t *failed = json ? json_array() : NULL;
  st = store_open(&ix, dir, 0, NULL);
  if (!st) st = index_settings(ix, &s);
  if (!st) st = index_totals(ix, &t);
  if (!st) st = index_foreach_clip(ix, stats_clip, &sc);
  if (!st && json) st = index_foreach_failed(ix, json_failed, failed);
  if (st) {
    index_close(&ix);
    json_decref(failed);
    return cli_error("index stats");
  }
  const char *dt = store_dtype_name(s.dtype);
  if (json) {
    json_t *o = json_pack(
        "{s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:I, s:i, s:i}, s:{s:I, s:I, s:I},"
        " s:I, s:I, s:I, s:I, s:f, s:f, s:o, s:o, s:o}",
        "store", dir, "settings", "fps_num", s.fps_num, "fps_den", s.fps_den, "short_side",
        s.short_side, "pt", s.pt, "ph", s.ph, "pw", s.pw, "channels", s.channels, "dtype", dt,
        "max_seconds", s.max_seconds, "token_bytes", (json_int_t)store_token_bytes(&s),
        "vae_t", s.vae_t, "vae_s", s.vae_s,
        "sources", "done", (json_int_t)t.sources_done, "partial", (json_int_t)t.sources_partial,
        "failed", (json_int_t)t.sources_failed, "clips", (json_int_t)t.clips, "tokens",
        (json_int_t)t.tokens, "frames", (json_int_t)t.frames, "dropped_frames",
        (json_int_t)t.dropped_frames, "seconds", t.seconds, "hours", t.seconds / 3600.0,
        "histogram_seconds", histo_json(&sc.sec), "histogram_tokens", histo_json(&sc.tok),
        "failed_sources", failed);
    failed = NULL;
    if (!o || json_dumpf(o, stdout, JSON_INDENT(2)) != 0) {
      json_decref(o);
      index_close(&ix);
      err_set(TSR_EIO, "cannot write JSON to stdout");
      return cli_error("index stats");
    }
    putchar('\n');
    json_decref(o);
    index_close(&ix);
    return 0;
  }
  printf("store %s\n", dir);
  if (store_is_latent(&s))
    printf("settings: latents of a VAE of stride %dx%dx%d, video at %d/%d fps, patch %dx%dx%d, %d "
           "channels %s, max %g s per clip\n", s.vae_t, s.vae_s, s.vae_s, s.fps_num, s.fps_den,
           s.pt, s.ph, s.pw, s.channels, dt, s.max_seconds);
  else
    printf("settings: fps %d/%d, short side %d, patch %dx%dx%d, %d channels %s, max %g s per "
           "clip\n", s.fps_num, s.fps_den, s.short_side, s.pt, s.ph, s.pw, s.channels, dt,
           s.max_seconds);
  printf("sources: %lld done (%lld partial), %lld failed\n", (long long)t.sources_done,
         (long long)t.sources_partial, (long long)t.sources_failed);
  printf("clips: %lld, tokens: %lld (%.3g GB), frames: %lld (+%lld dropped), hours: %.3f\n",
         (long long)t.clips, (long long)t.tokens,
         (double)t.tokens * (double)store_token_bytes(&s) / 1e9, (long long)t.frames,
         (long long)t.dropped_frames, t.seconds / 3600.0);
  if (t.clips)
    printf("clip length: %.3g to %.3g s, %lld to %lld tokens\n", sc.min_sec, sc.max_sec,
           (long long)sc.min_tok, (long long)sc.max_tok);
  histo_print(&sc.sec, "clip length in seconds", "s");
  histo_print(&sc.tok, "clip length in tokens", "tok");
  if (t.sources_failed) {
    printf("failed sources:\n");
    if (index_foreach_failed(ix, print_failed, NULL)) {
      index_close(&ix);
      return cli_error("index stats");
    }
  }
  index_close(&ix);
  return 0;
}

// ---- list -----------------------------------------------------------------------------

typedef struct {
  const char *label, *source;  // filters: exact label ("" = none), substring of the path
  int64_t min_tokens, max_tokens, limit, shown, matched;
  int json;                    // --json: a JSON array, written one element at a time
  int write_failed;            // a JSON element could not be made or written
} list_ctx;

// One clip as an element of the --json array on stdout, as json_dumpf(JSON_INDENT(2)) of
// the whole array wrote it, but streamed: a store of millions of clips never holds them
// all (2M clips took 3.3 GB as one array). Returns non-zero on failure.
static int list_json(list_ctx *x, const store_clip_row *r, const char *label) {
  json_t *o = json_pack("{s:I, s:s, s:i, s:f, s:f, s:i, s:i, s:i, s:I, s:s}", "id",
                        (json_int_t)r->id, "source", r->source, "clip_index", r->c.clip_index,
                        "start_s", r->c.start_s, "duration_s", r->c.duration_s, "T", r->c.T,
                        "H", r->c.H, "W", r->c.W, "tokens", (json_int_t)r->c.tokens, "label",
                        label);
  char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
  json_decref(o);
  int bad = !text || fputs(x->shown == 1 ? "[\n  " : ",\n  ", stdout) == EOF;
  for (const char *p = text; !bad && *p; p++)  // every line of the element 2 deeper
    bad = putchar(*p) == EOF || (*p == '\n' && fputs("  ", stdout) == EOF);
  free(text);
  return x->write_failed = bad;
}

static int list_clip(const store_clip_row *r, void *p) {
  list_ctx *x = p;
  const char *label = r->c.label ? r->c.label : "";
  if (x->label && strcmp(label, x->label)) return 0;
  if (x->source && !strstr(r->source, x->source)) return 0;
  if (r->c.tokens < x->min_tokens || (x->max_tokens && r->c.tokens > x->max_tokens)) return 0;
  x->matched++;
  if (x->limit && x->shown >= x->limit) return 0;
  x->shown++;
  if (x->json) return list_json(x, r, label);
  char lab[TERM_ESCAPE_SIZE(sizeof r->label_buf)], src[TERM_ESCAPE_SIZE(sizeof r->source)];
  printf("%8lld  %9.2f  %8.2f  %5dx%dx%-4d %9lld  %-12s  %s\n", (long long)r->id, r->c.start_s,
         r->c.duration_s, r->c.T, r->c.H, r->c.W, (long long)r->c.tokens,
         label[0] ? term_escape(lab, sizeof lab, label) : "-",
         term_escape(src, sizeof src, r->source));
  return 0;
}

static int cmd_list(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index list STORE [--label L] [--source TEXT] [--min-tokens N]\n"
           "                          [--max-tokens N] [--limit N] [--json]\n\n"
           "One line per clip, in id order: id, start and length in the source (seconds),\n"
           "token grid TxHxW, tokens, label and source path. The id is what\n"
           "`tessera index export STORE --clip ID` takes.\n"
           "  --label L        clips labelled L only (--label '' : clips without a label)\n"
           "  --source TEXT    clips whose source path contains TEXT\n"
           "  --min-tokens N   clips of at least N tokens\n"
           "  --max-tokens N   clips of at most N tokens\n"
           "  --limit N        the first N matching clips (the count of all is printed)\n"
           "  --json           a JSON array of {id, source, clip_index, start_s, duration_s,\n"
           "                   T, H, W, tokens, label} on stdout instead\n");
    return 0;
  }
  static const struct option opts[] = {
      {"label", required_argument, 0, 'l'}, {"source", required_argument, 0, 's'},
      {"min-tokens", required_argument, 0, 'n'}, {"max-tokens", required_argument, 0, 'x'},
      {"limit", required_argument, 0, 'k'}, {"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
  list_ctx x = {0};
  int json = 0, c;
  tsr_status st = TSR_OK;
  cli_reset();
  while (!st && (c = cli_getopt(argc, argv, opts)) != -1) {
    switch (c) {
    case 'l': x.label = optarg; break;
    case 's': x.source = optarg; break;
    case 'n': st = parse_i64("--min-tokens", optarg, 0, INT64_MAX, &x.min_tokens); break;
    case 'x': st = parse_i64("--max-tokens", optarg, 1, INT64_MAX, &x.max_tokens); break;
    case 'k': st = parse_i64("--limit", optarg, 1, INT64_MAX, &x.limit); break;
    case 'j': json = 1; break;
    default: st = TSR_EINVAL;  // cli_getopt said why
    }
  }
  if (!st) st = cli_positionals(argc, argv, 1, 1, "STORE");
  if (!st && x.max_tokens && x.max_tokens < x.min_tokens)
    st = err_set(TSR_EINVAL, "--max-tokens %lld is below --min-tokens %lld",
                 (long long)x.max_tokens, (long long)x.min_tokens);
  if (st) return cli_usage_error("index list");
  const char *dir = argv[optind];
  store_index *ix = NULL;
  x.json = json;
  if (!json)
    printf("%8s  %9s  %8s  %-12s %9s  %-12s  %s\n", "id", "start_s", "length_s", "grid TxHxW",
           "tokens", "label", "source");
  st = store_open(&ix, dir, 0, NULL);
  if (!st) st = index_foreach_clip(ix, list_clip, &x);
  index_close(&ix);
  if (!st && json && !x.write_failed && fputs(x.shown ? "\n]\n" : "[]\n", stdout) == EOF)
    x.write_failed = 1;
  if (!st && x.write_failed) st = err_set(TSR_EIO, "cannot write JSON to stdout");
  if (st) return cli_error("index list");
  fflush(stdout);  // the table before the count, on a terminal
  if (!json)
    fprintf(stderr, "index list: %lld clips match, %lld shown\n", (long long)x.matched,
            (long long)x.shown);
  return 0;
}

// ---- verify ---------------------------------------------------------------------------

static void verify_line(const char *line, int problem, void *ctx) {
  char shown[TERM_ESCAPE_SIZE(4096 + 1024)];  // names sources and shards
  printf("%s%s\n", problem ? "CORRUPT: " : "", term_escape(shown, sizeof shown, line));
}

// Commands whose only argument is STORE (verify, recover): no options.
static tsr_status store_only(int argc, char **argv, const char *what) {
  static const struct option none[] = {{0, 0, 0, 0}};
  cli_reset();
  if (cli_getopt(argc, argv, none) != -1) return TSR_EINVAL;
  return cli_positionals(argc, argv, 1, 1, what);
}

static int cmd_verify(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index verify STORE\n\n"
           "Checks every shard's header and, for every clip of the index, its block header,\n"
           "size and payload checksum (XXH3-64). Prints each problem (shard, offset, clip id,\n"
           "source) and a summary. Notes (unreferenced shards, uncommitted tails, unmerged\n"
           "parts) are tidied by `tessera index recover` and are not corruption.\n"
           "exit status: 0 clean, 3 corruption found, 1 store unreadable or bad arguments.\n");
    return 0;
  }
  if (store_only(argc, argv, "STORE")) return cli_usage_error("index verify");
  argv += optind - 1;  // argv[1] is STORE
  store_verify_result res;
  double t0 = time_now();
  char who[1024];
  // Verify takes no lock (it must not stop a writer); it says when one is active, since a
  // writer's unfinished shard tails and parts then show as notes.
  if (store_lock_holder(argv[1], who, sizeof who))
    printf("note: a writer is active on %s (%s): shard tails and parts it has not committed "
           "yet show as notes\n", argv[1], who);
  // A reader: shared reader lock while the shards are mapped (recovery cuts nothing then).
  store_lock *rlock = NULL;
  tsr_status vst = store_lock_read(&rlock, argv[1]);
  if (!vst) vst = store_verify(argv[1], verify_line, NULL, &res);
  store_lock_release(&rlock);
  if (vst) return cli_error("index verify");
  int64_t bad = res.shards_bad + res.clips_bad;
  printf("verify %s: %lld shards (%lld bad), %lld clips (%lld bad), %.3f GB checked in %.1f s; "
         "%lld unreferenced shards, %lld uncommitted bytes, %lld unmerged parts: %s\n",
         argv[1], (long long)res.shards, (long long)res.shards_bad, (long long)res.clips,
         (long long)res.clips_bad, (double)res.bytes / 1e9, time_now() - t0,
         (long long)res.orphan_shards, (long long)res.tail_bytes, (long long)res.parts,
         bad ? "CORRUPT" : "OK");
  return bad ? EXIT_CORRUPT : 0;
}

// ---- merge / recover ------------------------------------------------------------------

static int cmd_merge(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index merge OUT IN...\n\n"
           "Combines the stores IN... into OUT (created if missing; an existing OUT keeps its\n"
           "clips). All stores must have identical settings; otherwise nothing is written.\n"
           "Shard files are hard-linked into OUT/shards when on the same file system, else\n"
           "copied; sources already done in OUT are skipped. The inputs are not modified.\n"
           "exit status: 0 merged, 1 refused or failed.\n");
    return 0;
  }
  static const struct option none[] = {{0, 0, 0, 0}};
  cli_reset();
  tsr_status st = cli_getopt(argc, argv, none) != -1 ? TSR_EINVAL : TSR_OK;
  if (!st) st = cli_positionals(argc, argv, 2, argc, argc - optind == 0 ? "OUT and IN..." : "IN...");
  if (st) return cli_usage_error("index merge");
  argv += optind - 1;  // argv[1] is OUT, then the inputs
  argc -= optind - 1;
  store_merge_result res;
  if (store_merge(argv[1], argv + 2, argc - 2, &res)) return cli_error("index merge");
  printf("merge %s: %lld stores, %lld clips added, %lld sources already present, %lld shards "
         "linked, %lld copied\n", argv[1], (long long)res.stores, (long long)res.clips,
         (long long)res.skipped, (long long)res.shards_linked, (long long)res.shards_copied);
  return 0;
}

static void rebuild_line(const char *line, void *ctx) {
  char shown[TERM_ESCAPE_SIZE(4096 + 1024)];  // names sources and shards
  fprintf(stderr, "recover: %s\n", term_escape(shown, sizeof shown, line));
}

static int cmd_recover(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index recover STORE\n\n"
           "Brings a store to a consistent state after a crash (what `tessera ingest` does on\n"
           "start): merges leftover per-rank parts into the index, cuts shard bytes past the\n"
           "last committed clip, removes shards no clip points at. When the index is missing,\n"
           "empty, damaged or records no clip while the shards hold clips, it first rebuilds\n"
           "the index from the shards (every clip block carries its metadata; the old index\n"
           "is kept as index.sqlite.unusable-TIME). Failed sources cannot be recovered from\n"
           "shards (they have no block): a rerun of ingest tries them again. A damaged block\n"
           "loses its source only: the blocks after it are read on. Nothing that holds a\n"
           "complete clip block the index lacks is deleted: such shards and shard tails are\n"
           "moved into STORE/quarantine/TIME-PID/ (named in the output); after a rebuild,\n"
           "every complete block is. Takes the store's writer lock: refused while an ingest or\n"
           "merge writes to the store, and while a process reads it (train, export, verify:\n"
           "STORE/readers/), whose shards recovery could cut under it.\n");
    return 0;
  }
  if (store_only(argc, argv, "STORE")) return cli_usage_error("index recover");
  const char *dir = argv[optind];
  store_lock *lock = NULL;
  store_index *ix = NULL;
  store_recovery rep = {0};
  store_rebuild_report rb = {0};
  char why[1024] = "", readers[1024] = "";
  int rebuilt = 0;
  tsr_status st = store_lock_acquire(&lock, dir, 0);
  // Readers stay out for the whole command: recovery may cut and remove shard bytes, and
  // a process that maps them would die of SIGBUS. With readers active nothing is done.
  store_lock *guard = NULL;
  if (!st) st = store_lock_exclude_readers(&guard, dir, readers, sizeof readers);
  if (!st && !guard)
    st = err_set(TSR_EINVAL, "store %s is being read by %s; recovery may cut and remove shard "
                 "bytes such a process has mapped: wait for it to finish or stop it, then run "
                 "again. Nothing was changed", dir, readers);
  if (!st) st = store_index_state(dir, why, sizeof why);
  if (!st && why[0]) {
    fprintf(stderr, "recover: store %s has clips in its shards but %s: rebuilding the index "
            "from the shards\n", dir, why);
    st = store_rebuild(dir, rebuild_line, NULL, &rb);
    rebuilt = !st;
  }
  // After a rebuild the store was damaged: no complete block is known to be garbage.
  store_recover_opts ro = {.keep_blocks = rebuilt, .readers_excluded = 1};
  if (!st) st = store_open(&ix, dir, 0, NULL);
  if (!st) st = store_recover_with(dir, ix, &ro, &rep);
  index_close(&ix);
  store_lock_release(&guard);
  store_lock_release(&lock);
  if (st) return cli_error("index recover");
  if (rebuilt)
    printf("recover %s: index rebuilt from %lld shards (%lld of format 1, %lld unreadable and "
           "kept): %lld sources, %lld clips (%lld without their source); %lld blocks of "
           "interrupted or superseded ingests left out; failed sources are not recorded in "
           "shards and are not recovered (a rerun of ingest retries them)%s%s\n",
           dir, (long long)rb.shards, (long long)rb.shards_v1, (long long)rb.shards_unreadable,
           (long long)rb.sources, (long long)rb.clips, (long long)rb.clips_unknown_source,
           (long long)rb.blocks_left, rb.old_index_kept ? "; the old index is kept as " : "",
           rb.old_index_kept ? rb.old_index : "");
  if (rebuilt && rb.damaged_bytes)
    printf("recover %s: %lld damaged bytes inside shards were passed over; the blocks after them "
           "were recovered\n", dir, (long long)rb.damaged_bytes);
  printf("recover %s: %lld parts merged (%lld clips), %lld shard tails cut (%lld bytes), %lld "
         "shards and %lld temporary files removed\n", dir, (long long)rep.parts_merged,
         (long long)rep.clips_merged, (long long)rep.shards_truncated, (long long)rep.bytes_cut,
         (long long)rep.shards_removed, (long long)rep.tmp_removed);
  if (rep.quarantined.dir[0]) {
    char q[4 * sizeof rep.quarantined.dir];
    printf("recover %s: %lld shards and %lld shard tails (%lld bytes) it could not use were "
           "moved into the quarantine folder %s (nothing was deleted; a tail is kept as a shard "
           "file of its blocks)\n", dir, (long long)rep.quarantined.shards,
           (long long)rep.quarantined.tails, (long long)rep.quarantined.bytes,
           term_escape(q, sizeof q, rep.quarantined.dir));
  }
  return 0;
}

// ---- export ---------------------------------------------------------------------------

static int cmd_export(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index export STORE --clip ID --out FILE.mp4 [--crf N] [--raw]\n\n"
           "Rebuilds clip ID (`tessera index list STORE` lists the ids) from its\n"
           "tokens, after checking its checksum, and encodes it as H.264 at the store's frame\n"
           "rate, so you see exactly what the model will see.\n"
           "  --crf N   x264 constant rate factor, 0 = lossless         [18]\n"
           "  --raw     write raw rgb24 frames (frames, h, w, 3) instead of MP4\n");
    return 0;
  }
  static const struct option opts[] = {{"clip", required_argument, 0, 'c'},
                                       {"out", required_argument, 0, 'o'},
                                       {"crf", required_argument, 0, 'q'},
                                       {"raw", no_argument, 0, 'r'}, {0, 0, 0, 0}};
  const char *out = NULL;
  int64_t clip = -1;
  int crf = 18, raw = 0, c;
  tsr_status pst = TSR_OK;
  cli_reset();
  while (!pst && (c = cli_getopt(argc, argv, opts)) != -1) {
    switch (c) {
    case 'c': pst = parse_i64("--clip", optarg, 1, INT64_MAX, &clip); break;
    case 'o': out = optarg; break;
    case 'q': pst = parse_int("--crf", optarg, 0, 51, &crf); break;
    case 'r': raw = 1; break;
    default: pst = TSR_EINVAL;  // cli_getopt said why
    }
  }
  if (!pst) pst = cli_positionals(argc, argv, 1, 1, "STORE");
  if (!pst && clip < 0) pst = err_set(TSR_EINVAL, "missing --clip ID (`tessera index list STORE` lists them)");
  if (!pst && !out) pst = err_set(TSR_EINVAL, "missing --out FILE");
  if (pst) return cli_usage_error("index export");
  const char *dir = argv[optind];
#ifdef TESSERA_HAVE_MEDIA
  tsr_status st = raw ? export_clip_raw(dir, clip, out) : export_clip_mp4(dir, clip, out, crf);
#else
  (void)crf;
  (void)raw;
  tsr_status st = err_set(TSR_EINVAL, "this tessera was built without media (FFmpeg; cmake "
                          "-DTESSERA_MEDIA=OFF or no libav* dev files): run export on a build with "
                          "media");
#endif
  if (st) return cli_error("index export");
  printf("exported clip %lld of %s to %s\n", (long long)clip, dir, out);
  return 0;
}

int cmd_index(int argc, char **argv) {
  if (argc < 2) {
    err_set(TSR_EINVAL, "missing the subcommand (stats, list, verify, merge, recover, export)");
    return cli_usage_error("index");
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(sub, "stats")) return cmd_stats(argc - 1, argv + 1);
  if (!strcmp(sub, "list")) return cmd_list(argc - 1, argv + 1);
  if (!strcmp(sub, "verify")) return cmd_verify(argc - 1, argv + 1);
  if (!strcmp(sub, "merge")) return cmd_merge(argc - 1, argv + 1);
  if (!strcmp(sub, "recover")) return cmd_recover(argc - 1, argv + 1);
  if (!strcmp(sub, "export")) return cmd_export(argc - 1, argv + 1);
  err_set(TSR_EINVAL, "unknown subcommand '%s' (stats, list, verify, merge, recover, export)",
          sub);
  return cli_usage_error("index");
}
