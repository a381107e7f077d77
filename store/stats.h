// store/stats.h — what the clips of a store add up to (`tessera index stats`): its settings,
// the index's totals and, over the clips a predicate keeps, their totals, lengths (extremes
// and power-of-two histograms in seconds and in tokens), how many came from a manifest and
// were cut at their video's end, and each score's count, min, sum and max.
//
// Row values are untrusted: a damaged row must not overflow a sum, reach an undefined cast
// or make the score sums quadratic (see the limits below).
#ifndef TESSERA_STORE_STATS_H
#define TESSERA_STORE_STATS_H

#include <stdint.h>

#include "core/err.h"
#include "store/index.h"
#include "store/json_cols.h"
#include "store/settings.h"

#define STORE_HISTO_BINS 64
typedef struct {
  int lo_exp;                       // bin b covers [2^(lo_exp+b), 2^(lo_exp+b+1))
  int64_t count[STORE_HISTO_BINS];  // a value below bin 0 counts in it, one above the last
                                    // bin (or infinite) in the last
  int used_lo, used_hi;             // first and last non-empty bin (used_hi < 0: none)
} store_histo;

// The lower edge of bin b of h, 2^(lo_exp + b).
double store_histo_lo(const store_histo *h, int b);

// A score's sums over the clips that have it.
typedef struct {
  char name[STORE_MAX_SCORE_NAME + 1];
  int64_t count;
  double min, max, sum;
} store_score_sum;

// Distinct score names summed (a manifest has a handful); the scores of names past this
// are counted in other_names, not summed, so a store of crafted names cannot make stats
// quadratic.
#define STORE_STATS_MAX_SCORE_NAMES 256

typedef struct {
  store_settings s;
  store_totals t;         // the index's totals; with a predicate, the clip totals (clips,
                          // tokens, frames, dropped frames, seconds) are the kept clips'
  int64_t store_clips;    // every clip of the store
  store_histo sec, tok;   // the kept clips' lengths in seconds (from 1/64 s) and in tokens
  int64_t min_tok, max_tok;
  double min_sec, max_sec;           // extremes of the kept clips (-1 when none)
  int64_t manifest_clips, span_cut;  // kept clips from a manifest; of them, cut at the end
  int64_t bad_scores, other_names;   // clips whose scores do not parse; scores not summed
  store_score_sum *scores;           // (nscores), in the order the names first appear
  int nscores;
} store_stats;

// The stats of the store `dir` whose index ix is open, over the clips that keep(row, ctx)
// keeps (keep NULL: every clip, and t is the index's totals as they are). TSR_EFORMAT naming
// dir when the kept clips' tokens or frames add up past int64 (a damaged clip row: run
// `tessera index verify`); TSR_ENOMEM. Free *out with store_stats_free, also after an error.
tsr_status store_stats_collect(store_index *ix, const char *dir,
                               int (*keep)(const store_clip_row *r, void *ctx), void *ctx,
                               store_stats *out);
void store_stats_free(store_stats *s);

#endif
