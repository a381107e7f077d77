// ingest/manifest_jobs.c — a manifest's units shared among ranks and workers
// (ingest/manifest_jobs.h).
#include "ingest/manifest_jobs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

struct manifest_jobs {
  manifest_units *units;
  int rank, world, retry_failed;
  const char *embeddings;
  store_index *done;
  int64_t seq;                      // units read so far, every rank's
  int64_t taken, skipped, failed_kept;
  char err[512];                    // the current unit's file error, if any
};

tsr_status manifest_jobs_open(manifest_jobs **out, const char *path, const manifest_opts *o,
                              const manifest_filter *f, const char *embeddings, int rank,
                              int world, store_index *done, int retry_failed) {
  *out = NULL;
  manifest_jobs *j = calloc(1, sizeof *j);
  if (!j) return err_set(TSR_ENOMEM, "out of memory");
  *j = (manifest_jobs){.rank = rank, .world = world > 0 ? world : 1, .done = done,
                       .retry_failed = retry_failed, .embeddings = embeddings};
  tsr_status st = manifest_units_open(&j->units, path, o, f, rank == 0);
  if (st) {
    free(j);
    return st;
  }
  *out = j;
  return TSR_OK;
}

// The unit's key with its spans' caption files in it (which exist, their size and mtime),
// so that embeddings made after a unit was ingested take it again.
static void key_with_captions(const manifest_jobs *j, manifest_unit *u) {
  if (!j->embeddings) return;
  XXH64_hash_t h = XXH3_64bits(u->key, strlen(u->key));
  for (int i = 0; i < u->n; i++) {
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%lld-%d.caption.safetensors", j->embeddings,
             (long long)u->spans[i].row, u->spans[i].span);
    int64_t v[4] = {i, -1, 0, 0};
    if (stat(path, &sb) == 0)
      v[1] = (int64_t)sb.st_size, v[2] = (int64_t)sb.st_mtim.tv_sec, v[3] = sb.st_mtim.tv_nsec;
    h = XXH3_64bits_withSeed(v, sizeof v, h);
  }
  snprintf(u->key, sizeof u->key, "%016llx", (unsigned long long)h);
}

// The file of the unit's video: size and mtime, or why it cannot be read.
static void stat_source(manifest_jobs *j, const manifest_unit *u, source_file *sf) {
  struct stat sb;
  *sf = (source_file){.path = u->path};
  j->err[0] = 0;
  if (stat(u->path, &sb) != 0)
    snprintf(j->err, sizeof j->err, "cannot read the video of manifest rows %lld-%lld: %s",
             (long long)u->first_row, (long long)u->last_row, strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    snprintf(j->err, sizeof j->err, "the video of manifest rows %lld-%lld is not a regular file",
             (long long)u->first_row, (long long)u->last_row);
  if (j->err[0]) {
    sf->error = j->err;
    return;
  }
  sf->size = (int64_t)sb.st_size;
  sf->mtime = (int64_t)sb.st_mtime;
  sf->dev = (uint64_t)sb.st_dev;
  sf->ino = (uint64_t)sb.st_ino;
}

// 1 if the index records the unit as done (or failed, kept) with the same file and rows.
static tsr_status is_done(manifest_jobs *j, const manifest_unit *u, const source_file *sf,
                          int *skip) {
  *skip = 0;
  if (sf->error) return TSR_OK;
  source_status ss;
  int same = 0;
  tsr_status st = index_source_lookup(j->done, u->path, sf->size, sf->mtime, &ss, &same);
  if (st || !same) return st;
  char key[64];
  if ((st = index_source_manifest_key(j->done, u->path, key, sizeof key))) return st;
  if (strcmp(key, u->key) != 0) return TSR_OK;  // its rows changed: taken again
  if (ss == SOURCE_DONE) *skip = 1, j->skipped++;
  else if (ss == SOURCE_FAILED && !j->retry_failed) *skip = 1, j->failed_kept++;
  return TSR_OK;
}

tsr_status manifest_jobs_next(manifest_jobs *j, manifest_unit *unit, source_file *sf, int *got) {
  for (;;) {
    tsr_status st = manifest_units_next(j->units, unit, got);
    if (st || !*got) return st;
    if (j->seq++ % j->world != j->rank) continue;
    key_with_captions(j, unit);
    stat_source(j, unit, sf);
    int skip;
    if ((st = is_done(j, unit, sf, &skip))) return st;
    if (skip) continue;
    j->taken++;
    return TSR_OK;
  }
}

manifest_units_stats *manifest_jobs_stats(manifest_jobs *j, manifest_jobs_counts *c) {
  *c = (manifest_jobs_counts){j->taken, j->skipped, j->failed_kept};
  return manifest_units_stats_of(j->units);
}

void manifest_jobs_close(manifest_jobs **pj) {
  manifest_jobs *j = *pj;
  if (!j) return;
  manifest_units_close(&j->units);
  free(j);
  *pj = NULL;
}
