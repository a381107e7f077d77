// tools/cmd_index.c — `tessera index verify|merge|recover|export`: inspect and maintain a
// token store (store/store.h, store/verify.h, store/merge.h, store/recover.h,
// ingest/export.h); `stats` and `list` are tools/cmd_index_read.c's.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/term.h"
#ifdef TESSERA_HAVE_MEDIA
#include "ingest/export.h"
#endif
#include "store/index.h"
#include "store/merge.h"
#include "store/recover.h"
#include "store/settings.h"
#include "store/store.h"
#include "store/verify.h"
#include "tools/cli.h"
#include "tools/cmd_index_read.h"
#include "tools/commands.h"
#include "tools/opt.h"
#include "tools/parse.h"

#define EXIT_CORRUPT 3

static void usage(FILE *f) {
  fprintf(f,
          "usage: tessera index <subcommand> [options]   (tessera index <subcommand> --help)\n\n"
          "Inspects and maintains a token store made by `tessera ingest`.\n\n"
          "subcommands:\n"
          "  stats STORE [--json]     counts, tokens, hours, length histograms, failed sources\n"
          "  list STORE [filters]     one line per clip: id, source, start, length, tokens,\n"
          "                           label, manifest row and span, scores (the ids\n"
          "                           `export --clip` takes)\n"
          "  verify STORE             check every shard header and clip checksum\n"
          "  merge IN... --out OUT    combine stores with identical settings into OUT\n"
          "  recover STORE            finish an interrupted ingest's bookkeeping (merge parts,\n"
          "                           cut uncommitted shard tails, remove unreferenced shards);\n"
          "                           rebuilds a lost or damaged index from the shards\n"
          "  export STORE --clip ID --out FILE.mp4 [--crf N] [--raw]\n"
          "                           rebuild a clip from its tokens as a video\n\n"
          "exit status: 0 ok; 1 fatal (bad arguments, missing or invalid store); verify: 3 when\n"
          "corruption is found.\n");
}

// ---- verify ---------------------------------------------------------------------------

static void verify_line(const char *line, int problem, void *ctx) {
  char shown[TERM_ESCAPE_SIZE(4096 + 1024)];  // names sources and shards
  printf("%s%s\n", problem ? "CORRUPT: " : "", term_escape(shown, sizeof shown, line));
}

// Commands whose only argument is STORE (verify, recover): no options.
static tsr_status store_only(int argc, char **argv, const char *what) {
  static const opt_def none[] = {OPT_END};
  opt_parser op;
  opt_begin(&op, none, argc, argv);
  if (opt_next(&op) != -1) return TSR_EINVAL;
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
  tsr_status st = store_verify_as_reader(argv[1], verify_line, NULL, &res);
  if (st) return cli_error("index verify");
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

static const opt_def merge_opts[] = {
    OPT("out", "OUT", 'o', NULL,
        "the store to merge into (required; the older spelling\n"
        "`index merge OUT IN...` is accepted for one release)"),
    OPT_END};

static int cmd_merge(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index merge IN... --out OUT\n\n"
           "Combines the stores IN... into OUT (created if missing; an existing OUT keeps its\n"
           "clips). All stores must have identical settings; otherwise nothing is written.\n"
           "Shard files are hard-linked into OUT/shards when on the same file system, else\n"
           "copied; sources already done in OUT are skipped. The inputs are not modified.\n");
    opt_help(stdout, merge_opts, 12);
    printf("exit status: 0 merged, 1 refused or failed.\n");
    return 0;
  }
  const char *out = NULL;
  opt_parser op;
  opt_begin(&op, merge_opts, argc, argv);
  tsr_status st = TSR_OK;
  int c;
  while (!st && (c = opt_next(&op)) != -1) st = c == 'o' ? (out = optarg, TSR_OK) : TSR_EINVAL;
  // the older spelling: OUT first among the arguments
  int first = out ? 0 : 1;
  if (!st)
    st = cli_positionals(argc, argv, first + 1, argc,
                         argc - optind == 0 ? (out ? "IN..." : "IN... and --out OUT") : "IN...");
  if (st) return cli_usage_error("index merge");
  if (!out) {
    out = argv[optind];
    log_warn("index merge OUT IN...: deprecated order, accepted for one release: use "
             "`tessera index merge IN... --out %s`", out);
  }
  char **in = argv + optind + first;
  int nin = argc - optind - first;
  store_merge_result res;
  if (store_merge(out, in, nin, &res)) return cli_error("index merge");
  printf("merge %s: %lld stores, %lld clips added, %lld sources already present, %lld shards "
         "linked, %lld copied\n", out, (long long)res.stores, (long long)res.clips,
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
  store_repair_report done;
  if (store_repair(dir, rebuild_line, NULL, &done)) return cli_error("index recover");
  const store_rebuild_report *rb = &done.rebuild;
  const store_recovery *rep = &done.recovery;
  int rebuilt = done.rebuilt;
  if (rebuilt)
    printf("recover %s: index rebuilt from %lld shards (%lld of format 1, %lld unreadable and "
           "kept): %lld sources, %lld clips (%lld without their source); %lld blocks of "
           "interrupted or superseded ingests left out; failed sources are not recorded in "
           "shards and are not recovered (a rerun of ingest retries them)%s%s\n",
           dir, (long long)rb->shards, (long long)rb->shards_v1, (long long)rb->shards_unreadable,
           (long long)rb->sources, (long long)rb->clips, (long long)rb->clips_unknown_source,
           (long long)rb->blocks_left, rb->old_index_kept ? "; the old index is kept as " : "",
           rb->old_index_kept ? rb->old_index : "");
  if (rebuilt && rb->damaged_bytes)
    printf("recover %s: %lld damaged bytes inside shards were passed over; the blocks after them "
           "were recovered\n", dir, (long long)rb->damaged_bytes);
  printf("recover %s: %lld parts merged (%lld clips), %lld shard tails cut (%lld bytes), %lld "
         "shards and %lld temporary files removed\n", dir, (long long)rep->parts_merged,
         (long long)rep->clips_merged, (long long)rep->shards_truncated, (long long)rep->bytes_cut,
         (long long)rep->shards_removed, (long long)rep->tmp_removed);
  if (rep->quarantined.dir[0]) {
    char q[4 * sizeof rep->quarantined.dir];
    printf("recover %s: %lld shards and %lld shard tails (%lld bytes) it could not use were "
           "moved into the quarantine folder %s (nothing was deleted; a tail is kept as a shard "
           "file of its blocks)\n", dir, (long long)rep->quarantined.shards,
           (long long)rep->quarantined.tails, (long long)rep->quarantined.bytes,
           term_escape(q, sizeof q, rep->quarantined.dir));
  }
  return 0;
}

// ---- export ---------------------------------------------------------------------------

// --clip and --out are in the usage line only (what they take is said there).
static const opt_def export_opts[] = {
    OPT("clip", "ID", 'c', NULL, NULL),
    OPT("out", "FILE.mp4", 'o', NULL, NULL),
    OPT("crf", "N", 'q', NULL, "x264 constant rate factor, 0 = lossless         [18]"),
    OPT("raw", NULL, 'r', NULL, "write raw rgb24 frames (frames, h, w, 3) instead of MP4"),
    OPT_END};

static int cmd_export(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    printf("usage: tessera index export STORE --clip ID --out FILE.mp4 [--crf N] [--raw]\n\n"
           "Rebuilds clip ID (`tessera index list STORE` lists the ids) from its\n"
           "tokens, after checking its checksum, and encodes it as H.264 at the store's frame\n"
           "rate, so you see exactly what the model will see.\n");
    opt_help(stdout, export_opts, 10);
    return 0;
  }
  const char *out = NULL;
  int64_t clip = -1;
  int crf = 18, raw = 0, c;
  tsr_status pst = TSR_OK;
  opt_parser op;
  opt_begin(&op, export_opts, argc, argv);
  while (!pst && (c = opt_next(&op)) != -1) {
    switch (c) {
    case 'c': pst = parse_i64("--clip", optarg, 1, INT64_MAX, &clip); break;
    case 'o': out = optarg; break;
    case 'q': pst = parse_int("--crf", optarg, 0, 51, &crf); break;
    case 'r': raw = 1; break;
    default: pst = TSR_EINVAL;  // opt_next said why
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
  if (!strcmp(sub, "stats")) return cmd_index_stats(argc - 1, argv + 1);
  if (!strcmp(sub, "list")) return cmd_index_list(argc - 1, argv + 1);
  if (!strcmp(sub, "verify")) return cmd_verify(argc - 1, argv + 1);
  if (!strcmp(sub, "merge")) return cmd_merge(argc - 1, argv + 1);
  if (!strcmp(sub, "recover")) return cmd_recover(argc - 1, argv + 1);
  if (!strcmp(sub, "export")) return cmd_export(argc - 1, argv + 1);
  err_set(TSR_EINVAL, "unknown subcommand '%s' (stats, list, verify, merge, recover, export)",
          sub);
  return cli_usage_error("index");
}
