// ingest/manifest_jobs.h — the units of a manifest ingest (ingest/manifest_units.h) handed
// to the workers of one rank, leaving out those done before.
//
// Every rank reads the whole manifest (streaming) and takes units k with k mod world = rank
// (k counts the manifest's units from 0), so the ranks share the work without a list in
// memory. A unit is skipped when the index records its video as done with the same file
// (size, mtime) and the same manifest key (its rows, spans, captions, scores and filter
// unchanged; ingest/manifest_units.h, and the same caption files of its spans), or as
// failed with the same file unless retry_failed: a rerun after a crash resumes by row, and
// a changed row, or a caption file added since, is taken again.
#ifndef TESSERA_INGEST_MANIFEST_JOBS_H
#define TESSERA_INGEST_MANIFEST_JOBS_H

#include <stdint.h>

#include "core/err.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"
#include "ingest/manifest_units.h"
#include "ingest/sources.h"
#include "store/index.h"

typedef struct manifest_jobs manifest_jobs;

// Opens the manifest `path` (read with o, spans kept by f) for this rank. `embeddings`: the
// folder of the spans' caption files (NULL: none). `done` is the index that says what is done
// (read under the caller's lock, the same lock as its commits). Only rank 0 logs the
// manifest's bad rows (every rank reads them all).
tsr_status manifest_jobs_open(manifest_jobs **j, const char *path, const manifest_opts *o,
                              const manifest_filter *f, const char *embeddings, int rank,
                              int world, store_index *done, int retry_failed);
// The next unit of this rank still to do into *unit, its video's file into *sf (sf->error
// set when it cannot be read: the reader records it as a failed source); *got = 0 at the
// end. Not thread-safe: callers hold one lock around it. sf->path points into unit.
tsr_status manifest_jobs_next(manifest_jobs *j, manifest_unit *unit, source_file *sf, int *got);
// Units of this rank: taken, skipped as done, skipped as failed before (kept).
typedef struct {
  int64_t taken, skipped, failed_kept;
} manifest_jobs_counts;
// This rank's unit counts into *c; the manifest's counts (the caller may move the tallies
// out, as manifest_units_stats_of says).
manifest_units_stats *manifest_jobs_stats(manifest_jobs *j, manifest_jobs_counts *c);
void manifest_jobs_close(manifest_jobs **j);

#endif
