// store/clip_filter.h — which clips of a store a listing keeps (`tessera index list`): an
// exact label, a substring of the source path, a token range, one manifest row, and after
// those a caller's predicate (the CLI's --where: the manifest filter's score clauses, which
// live in ingest/, above the store).
#ifndef TESSERA_STORE_CLIP_FILTER_H
#define TESSERA_STORE_CLIP_FILTER_H

#include <stdint.h>

#include "core/err.h"
#include "store/index.h"

typedef struct {
  const char *label;   // the exact label ("": clips without one); NULL: any label
  const char *source;  // a substring of the source path; NULL: any source
  int64_t min_tokens;  // at least this many tokens (0: no lower bound)
  int64_t max_tokens;  // at most this many (0: no upper bound)
  int64_t row;         // clips of this manifest row (1-based data row) only; 0: any
  // Judged after the fields above: non-zero keeps the clip (ctx: keep_ctx); NULL: none.
  int (*keep)(const store_clip_row *r, void *ctx);
  void *keep_ctx;
} store_clip_filter;

// TSR_EINVAL naming both flags when max_tokens is set and below min_tokens (no clip could
// pass), or a bound or the row is negative.
tsr_status store_clip_filter_check(const store_clip_filter *f);
// 1 when clip r passes every filter of f, else 0.
int store_clip_filter_match(const store_clip_filter *f, const store_clip_row *r);

#endif
