// fuzz_manifest: the clip manifest reader (ingest/manifest.h) and the filter's canonical text
// (ingest/manifest_filter.h). The first input byte picks what the rest is: bit 7 set, a
// filter text (read back, written, read and written again: the same text); else a manifest
// whose preset is bits 0-1 and syntax bits 2-3 (CSV, TSV, JSONL), read to its end. Every row
// must hold what the header promises: an absolute path, spans in order with start >= 0 and
// end > start when both are given, finite scores; every error a reason and a message.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"

static void check_row(const manifest_row *r) {
  if (r->row < 1 || r->nspans < 1 || r->path[0] != '/') abort();
  for (int k = 0; k < r->nspans; k++) {
    const manifest_span *s = &r->spans[k];
    if (k && s->index <= r->spans[k - 1].index) abort();
    if ((s->has_start && !(s->start >= 0)) || (s->has_end && !(s->end >= 0))) abort();
    if (s->has_start && s->has_end && !(s->end > s->start)) abort();
    for (int i = 0; i < s->nscores; i++)
      if (!isfinite(s->scores[i].value) || !s->scores[i].name) abort();
  }
}

static void filter_round_trip(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1), a[4096], b[4096];
  memcpy(text, data, size);
  text[size] = 0;
  manifest_filter f, g;
  if (manifest_filter_parse(text, &f) == TSR_OK && manifest_filter_format(&f, a, sizeof a) == TSR_OK) {
    if (manifest_filter_parse(a, &g) != TSR_OK || manifest_filter_format(&g, b, sizeof b) != TSR_OK ||
        strcmp(a, b))
      abort();
  }
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 0x80) {
    filter_round_trip(data + 1, size - 1);
    return 0;
  }
  static const manifest_syntax syntax[] = {MANIFEST_SYNTAX_CSV, MANIFEST_SYNTAX_TSV,
                                           MANIFEST_SYNTAX_JSONL, MANIFEST_SYNTAX_CSV};
  const char *path = fuzz_scratch_path(".manifest");
  fuzz_write_file(path, data + 1, size - 1);
  manifest_opts o = {.preset = (manifest_preset)(data[0] & 3), .syntax = syntax[(data[0] >> 2) & 3],
                     .root = "/"};
  manifest *m = NULL;
  if (manifest_open(&m, path, &o) == TSR_OK) {
    const manifest_record *r;
    while (manifest_next(m, &r) == TSR_OK && r->kind != MANIFEST_EOF) {
      if (r->kind == MANIFEST_ROW) check_row(&r->row);
      else if (!r->error.reason || !r->error.message || r->error.row < 1) abort();
    }
  }
  manifest_close(&m);
  unlink(path);
  return 0;
}
