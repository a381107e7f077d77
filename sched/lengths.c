// sched/lengths.c — CSV length files, weighted mixes and batch sampling.
#include "sched/lengths.h"

#include "core/csv.h"
#include "core/fs.h"
#include "core/num.h"
#include "sched/cost.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

sched_rng sched_rng_seed(uint64_t seed, uint64_t stream) {
  sched_rng r = {seed ^ (stream * 0xD1B54A32D192ED03ull)};
  sched_rng_next(&r);
  return r;
}

uint64_t sched_rng_next(sched_rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double sched_rng_uniform(sched_rng *r) { return (double)(sched_rng_next(r) >> 11) * 0x1p-53; }

uint64_t sched_rng_below(sched_rng *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)sched_rng_next(r) * n) >> 64);
}

void lengths_free(lengths_set *ls) {
  for (int s = 0; s < ls->nsources; s++) free(ls->names[s]);
  free(ls->names);
  free(ls->weights);
  free(ls->offsets);
  free(ls->ids);
  free(ls->tokens);
  memset(ls, 0, sizeof *ls);
}

int64_t lengths_max(const lengths_set *ls) {
  int64_t m = 0;
  for (int64_t i = 0; i < ls->n; i++)
    if (ls->tokens[i] > m) m = ls->tokens[i];
  return m;
}

// Grows the clip arrays to hold `need` clips.
static tsr_status lengths_reserve(lengths_set *ls, int64_t need, int64_t *cap) {
  if (need <= *cap) return TSR_OK;
  int64_t c = *cap ? *cap * 2 : 1024;
  while (c < need) c *= 2;
  int64_t *ids = realloc(ls->ids, (size_t)c * sizeof *ids);
  if (!ids) return err_set(TSR_ENOMEM, "lengths: out of memory for %lld clips", (long long)c);
  ls->ids = ids;
  int64_t *tok = realloc(ls->tokens, (size_t)c * sizeof *tok);
  if (!tok) return err_set(TSR_ENOMEM, "lengths: out of memory for %lld clips", (long long)c);
  ls->tokens = tok;
  *cap = c;
  return TSR_OK;
}

// Opens a new source (name, weight); clips are appended after it by the caller.
static tsr_status lengths_begin_source(lengths_set *ls, const char *name, double weight) {
  if (!(weight >= LENGTHS_MIN_WEIGHT && weight <= LENGTHS_MAX_WEIGHT))
    return err_set(TSR_EINVAL, "%s: weight %g must be a number in [%g, %g]", name, weight,
                   LENGTHS_MIN_WEIGHT, LENGTHS_MAX_WEIGHT);
  int s = ls->nsources;
  char **names = realloc(ls->names, (size_t)(s + 1) * sizeof *names);
  if (names) ls->names = names;
  double *w = realloc(ls->weights, (size_t)(s + 1) * sizeof *w);
  if (w) ls->weights = w;
  int64_t *off = realloc(ls->offsets, (size_t)(s + 2) * sizeof *off);
  if (off) ls->offsets = off;
  if (!names || !w || !off) return err_set(TSR_ENOMEM, "lengths: out of memory");
  ls->names[s] = strdup(name);
  if (!ls->names[s]) return err_set(TSR_ENOMEM, "lengths: out of memory");
  ls->weights[s] = weight;
  ls->offsets[s] = ls->n;
  ls->offsets[s + 1] = ls->n;
  ls->nsources = s + 1;
  return TSR_OK;
}

// Removes the last source and its clips (after an error while reading it).
static void lengths_drop_source(lengths_set *ls) {
  ls->nsources--;
  ls->n = ls->offsets[ls->nsources];
  free(ls->names[ls->nsources]);
}

// Closes the last source: it must hold at least one clip, else it is removed.
static tsr_status lengths_end_source(lengths_set *ls) {
  int s = ls->nsources - 1;
  ls->offsets[s + 1] = ls->n;
  if (ls->n > ls->offsets[s]) return TSR_OK;
  tsr_status st = err_set(TSR_EFORMAT,
                          "%s: no clips (no rows after the header, or every row shorter than "
                          "one tubelet)", ls->names[s]);
  lengths_drop_source(ls);
  return st;
}

static int64_t lengths_cap(const lengths_opts *o, int64_t tokens, lengths_set *ls) {
  if (o && o->cap_tokens > 0 && tokens > o->cap_tokens) {
    ls->capped++;
    return o->cap_tokens;
  }
  return tokens;
}

tsr_status lengths_add(lengths_set *ls, const char *name, const int64_t *ids,
                       const int64_t *tokens, int64_t n, double weight, const lengths_opts *o) {
  int64_t cap = ls->n;
  tsr_status st = lengths_begin_source(ls, name, weight);
  if (st) return st;
  st = lengths_reserve(ls, ls->n + n, &cap);
  for (int64_t i = 0; !st && i < n; i++) {
    if (tokens[i] <= 0 || tokens[i] > SCHED_MAX_TOKENS) {
      st = err_set(TSR_EINVAL, "%s: clip %lld has %lld tokens; lengths must be in [1, 2^38]",
                   name, (long long)(ids ? ids[i] : i), (long long)tokens[i]);
      break;
    }
    ls->ids[ls->n] = ids ? ids[i] : ls->n;
    ls->tokens[ls->n] = lengths_cap(o, tokens[i], ls);
    ls->n++;
  }
  if (st) {
    lengths_drop_source(ls);
    return st;
  }
  return lengths_end_source(ls);
}

// Longest duration a row may give: 1e9 s (31 years) is no clip; the bound keeps
// duration * fps far from overflow before the token range check.
#define LENGTHS_MAX_SECONDS 1e9

static int lengths_has_geometry(const lengths_opts *o) {
  return o && (o->tokens_per_second > 0 ||
               (o->fps > 0 && o->pt > 0 && o->ph > 0 && o->pw > 0 && o->height >= o->ph &&
                o->width >= o->pw));
}

// Tokens of a clip of `d` seconds under the geometry of `o` (duration already capped),
// in double: the caller range-checks it before converting (it may exceed int64).
static double lengths_duration_tokens(const lengths_opts *o, double d) {
  // The small epsilon keeps exact products (9.04 s * 25 fps = 226 frames) from
  // flooring one below through binary rounding.
  if (o->tokens_per_second > 0) return floor(d * o->tokens_per_second + 1e-9);
  double t = floor(d * o->fps / o->pt + 1e-9);
  return t * (double)(o->height / o->ph) * (double)(o->width / o->pw);
}

// Why a record of the CSV reader (core/csv.h) cannot be read: its problem, or NULL.
static const char *record_problem(const mcsv_record *r) {
  return r->problem == MCSV_AFTER_QUOTE ? "text after a closing quote"
       : r->problem == MCSV_OPEN_QUOTE  ? "a quoted field is never closed"
       : r->problem == MCSV_TOO_LONG    ? "a record of more than 1 MiB"
                                        : NULL;
}

// The value of the row's length column (a tokens count or a duration) as tokens into *t;
// *t = 0 for a clip shorter than one tubelet (skipped).
static tsr_status row_tokens(lengths_set *ls, const char *path, int64_t line, const char *field,
                             int is_tokens, const lengths_opts *o, double *t) {
  const char *what = is_tokens ? "tokens" : "duration_s";
  double v;
  num_result r = num_parse_double(field, 0, is_tokens ? (double)SCHED_MAX_TOKENS
                                                      : LENGTHS_MAX_SECONDS, &v);
  if (r == NUM_SYNTAX)
    return err_set(TSR_EFORMAT, "%s:%lld: %s '%s' is not a number", path, (long long)line,
                   what, field);
  if (r == NUM_RANGE || v <= 0 || (is_tokens && v != floor(v)))
    return err_set(TSR_EFORMAT, "%s:%lld: %s = %s; clip lengths must be %s", path,
                   (long long)line, what, field,
                   is_tokens ? "whole numbers > 0 and at most 2^38 = 274877906944"
                             : "> 0 s and at most 1e9 s");
  *t = v;
  if (!is_tokens) {
    if (o->max_seconds > 0 && v > o->max_seconds) {
      v = o->max_seconds;
      ls->capped++;
    }
    *t = lengths_duration_tokens(o, v);
    if (*t < 1) {
      ls->skipped++;
      *t = 0;
      return TSR_OK;
    }
  }
  if (o && o->cap_tokens > 0 && *t > (double)o->cap_tokens) {
    *t = (double)o->cap_tokens;
    ls->capped++;
  }
  if (!(*t <= (double)SCHED_MAX_TOKENS))  // also NaN from a broken geometry
    return err_set(TSR_EFORMAT,
                   "%s:%lld: duration_s = '%s' gives %g tokens, more than the limit 2^38; cap "
                   "clips with --max-seconds or --cap-tokens",
                   path, (long long)line, field, *t);
  return TSR_OK;
}

// The column of the lengths (*col; *is_tokens: a 'tokens' column, else 'duration_s') from
// the header record h.
static tsr_status header_column(const mcsv_record *h, const char *path, const lengths_opts *o,
                                int *col, int *is_tokens) {
  *col = -1, *is_tokens = 0;
  for (int i = 0; i < h->n; i++) {
    const char *f = h->data + h->start[i];
    while (*f == ' ') f++;
    if (!strcmp(f, "tokens")) *col = i, *is_tokens = 1;
    else if (!strcmp(f, "duration_s") && !*is_tokens) *col = i;
  }
  if (*col < 0)
    return err_set(TSR_EFORMAT, "%s:%lld: no 'tokens' or 'duration_s' column in the header",
                   path, (long long)h->first_line);
  if (!*is_tokens && !lengths_has_geometry(o))
    return err_set(TSR_EINVAL, "%s has durations (duration_s) but no token geometry: give "
                   "--fps, --size and --patch, or --tokens-per-second", path);
  return TSR_OK;
}

tsr_status lengths_load_csv(lengths_set *ls, const char *path, double weight,
                            const lengths_opts *o) {
  int fd = -1;  // a regular file or a pipe (core/fs.h): a named FIFO would hang the command
  tsr_status st = fs_open_input(path, FS_PIPE_OK, &fd);
  if (st) return err_wrap(st, "lengths file: ");
  mcsv_lines l;
  mcsv_record r = {.delim = ','};
  if ((st = mcsv_lines_init(&l, fd))) return st;  // which closed fd
  int64_t cap = ls->n;
  int col = -1, is_tokens = 0, got = 0, header = 1, begun = 0;
  while (!st && !(st = mcsv_next_record(&l, path, &r, &got)) && got) {
    const char *bad = record_problem(&r);
    if (bad) {
      st = err_set(TSR_EFORMAT, "%s:%lld: %s", path, (long long)r.problem_line, bad);
      break;
    }
    if (header) {
      header = 0;
      if (!(st = header_column(&r, path, o, &col, &is_tokens)))
        begun = !(st = lengths_begin_source(ls, path, weight));
      continue;
    }
    if (r.n == 1 && r.data[r.start[0] + strspn(r.data + r.start[0], " ")] == '\0')
      continue;  // a line of spaces
    if (r.n <= col) {
      st = err_set(TSR_EFORMAT, "%s:%lld: %d field(s), the %s column is field %d", path,
                   (long long)r.first_line, r.n, is_tokens ? "tokens" : "duration_s", col + 1);
      break;
    }
    double t = 0;
    if ((st = row_tokens(ls, path, r.first_line, r.data + r.start[col], is_tokens, o, &t)) || !t)
      continue;
    if ((st = lengths_reserve(ls, ls->n + 1, &cap))) break;
    ls->ids[ls->n] = ls->n;
    ls->tokens[ls->n] = (int64_t)t;
    ls->n++;
  }
  if (!st && header)
    st = err_set(TSR_EFORMAT, "%s: empty file; expected a header line with a 'tokens' or "
                              "'duration_s' column", path);
  if (st && begun) lengths_drop_source(ls);
  else if (!st) st = lengths_end_source(ls);
  mcsv_record_free(&r);
  mcsv_lines_free(&l);
  return st;
}

tsr_status lengths_load_mix(lengths_set *ls, const char *spec, const lengths_opts *o) {
  char *copy = strdup(spec);
  if (!copy) return err_set(TSR_ENOMEM, "lengths: out of memory");
  tsr_status st = TSR_OK;
  int nitems = 0;
  for (char *save = NULL, *item = strtok_r(copy, ",", &save); item && !st;
       item = strtok_r(NULL, ",", &save)) {
    nitems++;
    double w = 1.0;
    char *colon = strrchr(item, ':');
    if (colon) {  // FILE:WEIGHT, unless what follows the ':' is no number at all
      num_result r = num_parse_double(colon + 1, LENGTHS_MIN_WEIGHT, LENGTHS_MAX_WEIGHT, &w);
      if (r != NUM_SYNTAX) *colon = '\0';
      if (r == NUM_RANGE)
        st = err_set(TSR_EINVAL, "--lengths %s: weight '%s' of %s must be a number in [%g, %g]",
                     spec, colon + 1, item, LENGTHS_MIN_WEIGHT, LENGTHS_MAX_WEIGHT);
    }
    if (!st) st = lengths_load_csv(ls, item, w, o);
  }
  if (!st && nitems == 0)
    st = err_set(TSR_EINVAL, "--lengths '%s': no file given (FILE[:WEIGHT],...)", spec);
  free(copy);
  return st;
}

tsr_status lengths_sample(const lengths_set *ls, uint64_t seed, int64_t step, int B,
                          int64_t *ids, int64_t *tokens) {
  if (ls->nsources == 0 || ls->n == 0)
    return err_set(TSR_EINVAL, "no clip lengths loaded: give --lengths or --data");
  if (B < 1) return err_set(TSR_EINVAL, "global batch %d: must be >= 1", B);
  double total = 0;
  for (int s = 0; s < ls->nsources; s++) total += ls->weights[s];
  // Rows drawn so far in this batch (open addressing, row + 1; 0 = empty), so that a
  // batch holds distinct clips unless a source is too small for that.
  size_t cap = 16;
  while (cap < 2 * (size_t)B) cap *= 2;
  int64_t *used = calloc(cap, sizeof *used);
  if (!used) return err_set(TSR_ENOMEM, "lengths_sample: out of memory");
  sched_rng r = sched_rng_seed(seed, (uint64_t)step);
  for (int i = 0; i < B; i++) {
    int s = 0;
    if (ls->nsources > 1) {
      double u = sched_rng_uniform(&r) * total, acc = 0;
      for (s = 0; s < ls->nsources - 1; s++) {
        acc += ls->weights[s];
        if (u < acc) break;
      }
    }
    int64_t lo = ls->offsets[s], n = ls->offsets[s + 1] - lo, j = lo;
    for (int tries = 0; tries < 64; tries++) {
      j = lo + (int64_t)sched_rng_below(&r, (uint64_t)n);
      size_t h = (size_t)(((uint64_t)j * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
      while (used[h] && used[h] != j + 1) h = (h + 1) & (cap - 1);
      if (!used[h]) {
        used[h] = j + 1;
        break;
      }
    }
    ids[i] = ls->ids[j];
    tokens[i] = ls->tokens[j];
  }
  free(used);
  return TSR_OK;
}
