// ingest/manifest_value.h — the values inside manifest cells (ingest/manifest.h): times,
// list cells written as Python or JSON literals, and score names. Private to the manifest
// reader (manifest.c, manifest_row.c) and its filters (manifest_filter.c: score names).
#ifndef TESSERA_INGEST_MANIFEST_VALUE_H
#define TESSERA_INGEST_MANIFEST_VALUE_H

#include <jansson.h>
#include <stddef.h>

typedef enum {
  MV_OK = 0,
  MV_SYNTAX,    // not a time
  MV_NEGATIVE,  // a time before 0
} mv_result;

// Seconds from a time cell, spaces around it allowed:
//   a decimal number of seconds                 "12.5", "0", "3e1"
//   H:MM:SS[.fff] (H any digits, MM and SS < 60) "0:00:05.005", "01:02:03"
//   M:SS[.fff]    (SS < 60)                      "2:03.5"
// so H:MM:SS.fff is H * 3600 + MM * 60 + SS.fff. A leading '-' is MV_NEGATIVE.
mv_result mv_parse_time(const char *s, double *out);

// Parses a list cell into a JSON array (*out, a new reference): JSON ("[[0.0, 5.0]]") or a
// Python literal as pandas writes lists into CSV cells ("[['0:00:00.000', '0:00:05.005']]",
// "['a man\'s hat', \"it's\"]"): strings in single or double quotes with Python's escapes,
// tuples, None, True, False. `tmp` (*tmp of *cap bytes, grown as needed) holds the
// translated text. Returns 0, or -1 with why it is not a list in `why`; -2 out of memory.
int mv_parse_list(const char *text, char **tmp, size_t *cap, json_t **out, char *why, size_t n);

// `src` with leading and trailing spaces removed and inner runs of spaces or tabs turned to
// one '_' ("aesthetic score" -> "aesthetic_score"), into dst (n bytes, cut if longer).
void mv_score_name(char *dst, size_t n, const char *src);

#endif
