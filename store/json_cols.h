// store/json_cols.h — the index's JSON-valued columns and the manifest key: a clip's
// scores (clips.scores), a source's scene cuts (sources.scene_cuts) and its manifest key
// (sources.manifest_key); their limits, their checks, and the one canonical text each is
// stored as, so that an index rebuilt from the shards' trailers (store/clip_meta.h) holds
// the same bytes as the one ingest wrote.
//
// Canonical text: compact JSON (no spaces). A number is the shortest of %.15g, %.16g and
// %.17g that reads back as the same double (4.7, not 4.7000000000000002). Scores keep
// their keys in the order given; a key is written as it is but for '"', '\' and the
// control characters, escaped as \", \\ and \u00XX.
#ifndef TESSERA_STORE_JSON_COLS_H
#define TESSERA_STORE_JSON_COLS_H

#include <stddef.h>

#include "core/err.h"

// Limits. Every clip's trailer holds its scores, and a source's last clip its scene cuts,
// next to its path (4 KiB) and note (2 KiB), in at most 64 KiB (SHARD_META_MAX): 4 KiB of
// scores is a manifest's dozen score columns many times over, and 40 KiB of cut times is
// about 2,000 cuts at 17 digits (a feature film has 1,000 to 2,000 shots).
#define STORE_MAX_SCORES 64               // keys of one clip's scores
#define STORE_MAX_SCORE_NAME 128          // bytes of a score's name
#define STORE_MAX_SCORES_BYTES 4096       // canonical text of one clip's scores
#define STORE_MAX_SCENE_CUTS_BYTES 40960  // canonical text of one source's cut times
#define STORE_MAX_MANIFEST_KEY 128        // bytes of a manifest key

// Scores: a JSON object of at most STORE_MAX_SCORES keys, each of 1..STORE_MAX_SCORE_NAME
// bytes (no NUL), each value a finite number; "{}" is allowed. Writes its canonical text
// into out (n >= STORE_MAX_SCORES_BYTES + 1 bytes). TSR_EFORMAT saying what is wrong and
// naming the key (a canonical text past STORE_MAX_SCORES_BYTES names the key it reaches the
// limit at); TSR_EINVAL when n is too small.
tsr_status store_scores_canon(const char *text, char *out, size_t n);
// store_scores_canon's checks alone.
tsr_status store_scores_check(const char *text);
// The canonical text of the scores names[i] = values[i], i < n (the same checks, and a
// name given twice is refused), into out (n >= STORE_MAX_SCORES_BYTES + 1 bytes): what an
// ingest puts in store_clip.scores.
tsr_status store_scores_format(const char *const *names, const double *values, int count,
                               char *out, size_t n);
// Calls fn(name, value, ctx) for each score of `text` in order until fn returns non-zero.
// TSR_EFORMAT (nothing called) when text fails store_scores_check.
tsr_status store_scores_each(const char *text, int (*fn)(const char *name, double v, void *ctx),
                             void *ctx);

// Scene cuts: cut times in seconds within the source, each finite and >= 0, strictly
// ascending. The canonical text of cuts[0..n) (n >= 0: "[]" when none) in *text
// (malloc'ed, caller frees); TSR_EINVAL naming the first cut that breaks a rule, or when the
// text would pass STORE_MAX_SCENE_CUTS_BYTES.
tsr_status store_scene_cuts_format(const double *cuts, int n, char **text);
// Parses such text (canonical or not) into *cuts (malloc'ed, caller frees; NULL when
// *n = 0), with the same rules. TSR_EFORMAT saying what is wrong.
tsr_status store_scene_cuts_parse(const char *text, double **cuts, int *n);

// A manifest key (an opaque hash the ingest computes over a manifest unit's rows, spans and
// filters): 1..STORE_MAX_MANIFEST_KEY bytes of printable ASCII without spaces (0x21..0x7e),
// which the hex and base64 digests of every hash are. TSR_EINVAL otherwise.
tsr_status store_manifest_key_check(const char *key);

#endif
