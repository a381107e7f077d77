// The clip filters of `tessera index list` (store/clip_filter.h): each filter alone keeps
// exactly the rows it names, together they all must hold, the caller's predicate comes
// last (not called for a row the fields already refused), and the check refuses a token
// range no clip can pass.
#include <string.h>

#include "check.h"
#include "store/clip_filter.h"

static store_clip_row rows[4];
static int calls;

// A row of `tokens` tokens, label (NULL: none), source, manifest row.
static void row(store_clip_row *r, int64_t tokens, const char *label, const char *src,
                int64_t mrow) {
  memset(r, 0, sizeof *r);
  r->c.tokens = tokens;
  r->c.label = label;
  snprintf(r->source, sizeof r->source, "%s", src);
  r->c.manifest_row = mrow;
}

// Keeps rows of an even token count; counts its calls.
static int even(const store_clip_row *r, void *ctx) {
  calls++;
  return r->c.tokens % 2 == 0;
}

// The mask of rows (bit i: rows[i]) that f keeps.
static unsigned kept(const store_clip_filter *f) {
  unsigned m = 0;
  for (int i = 0; i < 4; i++) m |= (unsigned)store_clip_filter_match(f, &rows[i]) << i;
  return m;
}

int main(void) {
  row(&rows[0], 10, "cat", "/v/a.mp4", 0);
  row(&rows[1], 25, NULL, "/v/b.mp4", 3);
  row(&rows[2], 40, "dog", "/w/a.mp4", 3);
  row(&rows[3], 7, "", "/w/c.mp4", 1);
  CHECK(kept(&(store_clip_filter){0}) == 0xf, "no filter keeps every row");
  CHECK(kept(&(store_clip_filter){.label = "cat"}) == 0x1, "label: the exact label");
  CHECK(kept(&(store_clip_filter){.label = "ca"}) == 0, "label: no prefix match");
  CHECK(kept(&(store_clip_filter){.label = ""}) == 0xa, "label '': the rows without one");
  CHECK(kept(&(store_clip_filter){.source = "a.mp4"}) == 0x5, "source: a substring");
  CHECK(kept(&(store_clip_filter){.min_tokens = 10}) == 0x7, "min_tokens: inclusive");
  CHECK(kept(&(store_clip_filter){.max_tokens = 25}) == 0xb, "max_tokens: inclusive");
  CHECK(kept(&(store_clip_filter){.min_tokens = 10, .max_tokens = 25}) == 0x3, "a range");
  CHECK(kept(&(store_clip_filter){.row = 3}) == 0x6, "row: that manifest row only");
  CHECK(kept(&(store_clip_filter){.row = 3, .source = "/w/"}) == 0x4, "filters together");
  calls = 0;
  CHECK(kept(&(store_clip_filter){.keep = even}) == 0x5, "the predicate");
  CHECK(calls == 4, "the predicate once a row: %d", calls);
  calls = 0;
  CHECK(kept(&(store_clip_filter){.row = 3, .keep = even}) == 0x4, "predicate after fields");
  CHECK(calls == 2, "the predicate only for rows the fields keep: %d", calls);

  CHECK_OK(store_clip_filter_check(&(store_clip_filter){.min_tokens = 5, .max_tokens = 5}));
  CHECK_OK(store_clip_filter_check(&(store_clip_filter){.min_tokens = 5}));
  tsr_status st = store_clip_filter_check(&(store_clip_filter){.min_tokens = 6, .max_tokens = 5});
  CHECK(st == TSR_EINVAL && strstr(err_msg(), "--max-tokens 5 is below --min-tokens 6"), "%s",
        err_msg());
  err_clear();
  st = store_clip_filter_check(&(store_clip_filter){.row = -1});
  CHECK(st == TSR_EINVAL, "a negative row is refused");
  err_clear();
  return check_done();
}
