// sched/lengths.h — clip lengths for the scheduler: CSV files, weighted mixes of them,
// and deterministic sampling of global batches.
//
// A CSV file has a header line and one clip per line, plain comma-separated fields (no
// quoting). It needs a `tokens` column (integer > 0), or a `duration_s` column
// (seconds > 0) converted with the run's token geometry:
//   tokens = floor(duration * fps / pt) * (height / ph) * (width / pw)
// or, with tokens_per_second set, tokens = floor(duration * tokens_per_second).
// A `tokens` column wins when both are present. Durations are capped at max_seconds
// and tokens at cap_tokens when those are > 0. Rows whose duration is shorter than one
// tubelet (0 tokens) are skipped and counted. Limits (core/num.h parses every number):
// tokens whole in [1, SCHED_MAX_TOKENS = 2^38], durations in (0, 1e9] s, a clip after
// conversion and caps at most 2^38 tokens; sampling weights in [1e-9, 1e9].
//
// Clip ids: a CSV clip's id is its row number (0-based, header excluded) counted across
// the sources in the order they were added; a store's clips keep the store's ids.
// Ownership: a lengths_set owns its arrays; free with lengths_free.
#ifndef TESSERA_SCHED_LENGTHS_H
#define TESSERA_SCHED_LENGTHS_H

#include <stdint.h>
#include "core/err.h"

#define LENGTHS_MIN_WEIGHT 1e-9
#define LENGTHS_MAX_WEIGHT 1e9

typedef struct {
  double fps;               // frames per second of the run (0: no geometry)
  int height, width;        // pixels after resize/crop
  int pt, ph, pw;           // tubelet: frames x pixels x pixels
  double tokens_per_second; // alternative to the geometry (0: unused)
  double max_seconds;       // cap on a clip's duration (0: none)
  int64_t cap_tokens;       // cap on a clip's tokens (0: none)
} lengths_opts;

typedef struct {
  int64_t n;          // clips over all sources
  int64_t *ids;       // (n) clip ids
  int64_t *tokens;    // (n) tokens per clip, > 0
  int nsources;
  char **names;       // (nsources) file or store path
  double *weights;    // (nsources) sampling weight, > 0
  int64_t *offsets;   // (nsources + 1) source s holds clips [offsets[s], offsets[s+1])
  int64_t skipped;    // rows dropped for giving 0 tokens
  int64_t capped;     // clips shortened by max_seconds / cap_tokens
} lengths_set;

// Appends the clips of CSV file `path` as one source with sampling weight `weight`.
// Errors (TSR_EIO, TSR_EFORMAT, TSR_EINVAL) name the file and line (and quote the field):
// missing file, empty file, no tokens/duration_s column, a short row, a non-number (NaN,
// inf), a value <= 0 or above its limit, a fractional token count, a duration giving
// more than 2^38 tokens, a duration file without geometry, no clips at all.
tsr_status lengths_load_csv(lengths_set *ls, const char *path, double weight,
                            const lengths_opts *o);
// Loads a mix "FILE[:WEIGHT],FILE[:WEIGHT]..." (weight defaults to 1; weights are
// relative). A ':' is taken as a weight separator only when what follows is a number.
tsr_status lengths_load_mix(lengths_set *ls, const char *spec, const lengths_opts *o);
// Appends n clips given in memory (e.g. from a token store) as one source named `name`;
// ids may be NULL (then ids are row numbers). Applies cap_tokens of `o` (may be NULL);
// tokens must be in [1, 2^38].
tsr_status lengths_add(lengths_set *ls, const char *name, const int64_t *ids,
                       const int64_t *tokens, int64_t n, double weight, const lengths_opts *o);
void lengths_free(lengths_set *ls);

// Longest clip over all sources (0 if empty).
int64_t lengths_max(const lengths_set *ls);

// Draws global batch `step` of B clips: each clip picks a source with probability
// weight / total weight, then a clip of it uniformly; a clip already in the batch is
// drawn again (up to 64 times, so a source smaller than the batch repeats clips).
// Deterministic for (seed, step). ids, tokens: (B) outputs.
tsr_status lengths_sample(const lengths_set *ls, uint64_t seed, int64_t step, int B,
                          int64_t *ids, int64_t *tokens);

// Random numbers for the scheduler and its tests: splitmix64.
typedef struct { uint64_t s; } sched_rng;
sched_rng sched_rng_seed(uint64_t seed, uint64_t stream);
uint64_t sched_rng_next(sched_rng *r);
double sched_rng_uniform(sched_rng *r);                // [0, 1)
uint64_t sched_rng_below(sched_rng *r, uint64_t n);    // [0, n), n >= 1

#endif
