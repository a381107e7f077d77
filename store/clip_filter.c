// store/clip_filter.c — the clip filters of a listing (store/clip_filter.h).
#include "store/clip_filter.h"

#include <string.h>

tsr_status store_clip_filter_check(const store_clip_filter *f) {
  if (f->min_tokens < 0 || f->max_tokens < 0 || f->row < 0)
    return err_set(TSR_EINVAL, "clip filter: negative --min-tokens %lld, --max-tokens %lld or "
                   "--row %lld", (long long)f->min_tokens, (long long)f->max_tokens,
                   (long long)f->row);
  if (f->max_tokens && f->max_tokens < f->min_tokens)
    return err_set(TSR_EINVAL, "--max-tokens %lld is below --min-tokens %lld",
                   (long long)f->max_tokens, (long long)f->min_tokens);
  return TSR_OK;
}

int store_clip_filter_match(const store_clip_filter *f, const store_clip_row *r) {
  const char *label = r->c.label ? r->c.label : "";
  if (f->label && strcmp(label, f->label)) return 0;
  if (f->source && !strstr(r->source, f->source)) return 0;
  if (r->c.tokens < f->min_tokens || (f->max_tokens && r->c.tokens > f->max_tokens)) return 0;
  if (f->row && r->c.manifest_row != f->row) return 0;
  return !f->keep || f->keep(r, f->keep_ctx);
}
