// store/clip.c — checks of what an index row claims before anything trusts it: a
// clip row's sizes (store_clip_check) and its shard path (store_shard_path); store/clip.h.
// Index files can be edited by anyone with write access to the store, so the readers
// (train, verify, export, merge, recovery) treat rows as untrusted input.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "store/clip.h"

#include "store/json_cols.h"
#include "store/layout.h"
#include "store/settings.h"
#include "store/shard_format.h"

#define SHARD_NAME_MAX 200

// The manifest fields and scores of store_clip_check.
static tsr_status check_manifest(const store_clip *c) {
  if (c->manifest_row < 0)
    return err_set(TSR_EFORMAT, "manifest row %lld is negative", (long long)c->manifest_row);
  if (c->manifest_row > 0) {
    double a = c->span_start, b = c->span_end;
    if (c->manifest_span < 0)
      return err_set(TSR_EFORMAT, "manifest row %lld: span %d is negative",
                     (long long)c->manifest_row, c->manifest_span);
    if ((!isnan(a) && !(isfinite(a) && a >= 0)) || (!isnan(b) && !isfinite(b)) ||
        (!isnan(a) && !isnan(b) && !(b > a)))
      return err_set(TSR_EFORMAT, "manifest row %lld span %d: [%g, %g) s is not a span (start "
                     ">= 0 before the end; NaN: open)", (long long)c->manifest_row,
                     c->manifest_span, a, b);
    if (c->span_cut != 0 && c->span_cut != 1)
      return err_set(TSR_EFORMAT, "manifest row %lld span %d: span_cut %d is not 0 or 1",
                     (long long)c->manifest_row, c->manifest_span, c->span_cut);
  }
  return c->scores ? store_scores_check(c->scores) : TSR_OK;
}

tsr_status store_clip_check(const store_settings *s, const store_clip *c) {
  int64_t tb = store_token_bytes(s), tokens, bytes, frames;
  if (tb <= 0) return err_set(TSR_EFORMAT, "the store's token geometry is invalid");
  if (c->T <= 0 || c->H <= 0 || c->W <= 0 || c->T > STORE_MAX_GRID || c->H > STORE_MAX_GRID ||
      c->W > STORE_MAX_GRID)
    return err_set(TSR_EFORMAT, "token grid %dx%dx%d is outside 1..%d", c->T, c->H, c->W,
                   STORE_MAX_GRID);
  // T, H, W < 2^24, so T*H*W < 2^72 can still overflow: check every product.
  if (__builtin_mul_overflow((int64_t)c->T, (int64_t)c->H, &tokens) ||
      __builtin_mul_overflow(tokens, (int64_t)c->W, &tokens) ||
      __builtin_mul_overflow(tokens, tb, &bytes) || bytes > STORE_MAX_CLIP_BYTES)
    return err_set(TSR_EFORMAT, "token grid %dx%dx%d of %lld-byte tokens is larger than %lld "
                   "bytes", c->T, c->H, c->W, (long long)tb, (long long)STORE_MAX_CLIP_BYTES);
  if (c->tokens != tokens || c->bytes != bytes)
    return err_set(TSR_EFORMAT, "grid %dx%dx%d gives %lld tokens (%lld bytes), the row says %lld "
                   "tokens (%lld bytes)", c->T, c->H, c->W, (long long)tokens, (long long)bytes,
                   (long long)c->tokens, (long long)c->bytes);
  frames = (int64_t)c->T * s->pt;  // T < 2^24, pt <= 4096 (shard.c): no overflow
  if (c->frames != frames || c->dropped_frames < 0 || c->decoded_frames < 0)
    return err_set(TSR_EFORMAT, "%lld frames (%lld dropped, %lld decoded) for T=%d at %d frames "
                   "per tubelet (want %lld)", (long long)c->frames, (long long)c->dropped_frames,
                   (long long)c->decoded_frames, c->T, s->pt, (long long)frames);
  if (c->offset < SHARD_HEADER_BYTES || c->offset % SHARD_ALIGN != 0 || c->offset > (1LL << 62))
    return err_set(TSR_EFORMAT, "offset %lld is not a block offset (a multiple of %d past the "
                   "shard header)", (long long)c->offset, SHARD_ALIGN);
  if (c->caption_offset &&
      (c->caption_offset < SHARD_HEADER_BYTES || c->caption_offset % SHARD_ALIGN != 0 ||
       c->caption_offset >= c->offset || c->caption_tokens < 1 ||
       c->caption_tokens > STORE_MAX_CAPTION_TOKENS || c->caption_dim < 1 ||
       c->caption_dim > STORE_MAX_CAPTION_DIM))
    return err_set(TSR_EFORMAT, "caption at offset %lld (%d tokens of %d values) is not a caption "
                   "block before the clip's block at %lld", (long long)c->caption_offset,
                   c->caption_tokens, c->caption_dim, (long long)c->offset);
  return check_manifest(c);
}

tsr_status store_shard_path(const char *dir, const char *rel, char *out, size_t n) {
  static const char pre[] = STORE_SHARD_DIR "/", suf[] = ".tshard";
  const size_t lp = sizeof pre - 1, ls = sizeof suf - 1;
  if (n) out[0] = 0;
  if (!rel) return err_set(TSR_EFORMAT, "clip has no shard path");
  size_t len = strnlen(rel, lp + SHARD_NAME_MAX + 1);
  const char *name = rel + lp;
  const char *why = NULL;
  if (len < lp || memcmp(rel, pre, lp) != 0) why = "it is not under " STORE_SHARD_DIR "/";
  else if (len - lp > SHARD_NAME_MAX) why = "its name is too long";
  else if (len - lp <= ls || strcmp(rel + len - ls, suf) != 0) why = "it does not end in .tshard";
  else if (name[0] == '.') why = "its name starts with '.'";
  else
    for (const char *p = name; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '.' || *p == '_' || *p == '-')) {
        why = "its name has characters other than letters, digits, '.', '_' and '-'";
        break;
      }
  if (why) {
    char shown[64];
    snprintf(shown, sizeof shown, "%.60s%s", rel, len > 60 ? "..." : "");
    return err_set(TSR_EFORMAT, "shard path '%s' is not a shard inside the store (%s); the "
                   "index is damaged or was edited: run `tessera index verify`", shown, why);
  }
  int k = snprintf(out, n, "%s/%s", dir, rel);
  if (k < 0 || (size_t)k >= n) return err_set(TSR_EINVAL, "path too long: %s/%s", dir, rel);
  return TSR_OK;
}
