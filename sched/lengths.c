// sched/lengths.c — CSV length files, weighted mixes and batch sampling.
#include "sched/lengths.h"

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

// Splits `line` in place at commas (and strips the line end); returns the field count.
static int csv_split(char *line, char **fields, int max) {
  line[strcspn(line, "\r\n")] = '\0';
  int n = 0;
  for (char *p = line;;) {
    if (n < max) fields[n] = p;
    n++;
    char *c = strchr(p, ',');
    if (!c) break;
    *c = '\0';
    p = c + 1;
  }
  return n;
}

enum { CSV_MAX_FIELDS = 64 };

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

tsr_status lengths_load_csv(lengths_set *ls, const char *path, double weight,
                            const lengths_opts *o) {
  int fd = -1;  // a regular file or a pipe (core/fs.h): a named FIFO would hang the command
  tsr_status opened = fs_open_input(path, FS_PIPE_OK, &fd);
  if (opened) return err_wrap(opened, "lengths file: ");
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return err_set(TSR_EIO, "lengths file %s: cannot open (%s)", path, strerror(errno));
  }
  char *line = NULL;
  size_t linecap = 0;
  char *fields[CSV_MAX_FIELDS];
  tsr_status st = TSR_OK;
  int64_t cap = ls->n, lineno = 1;
  int col = -1, is_tokens = 0, ncols = 0;
  if (getline(&line, &linecap, f) < 0) {
    st = err_set(TSR_EFORMAT, "%s: empty file; expected a header line with a 'tokens' or "
                              "'duration_s' column", path);
    goto done;
  }
  ncols = csv_split(line, fields, CSV_MAX_FIELDS);
  for (int i = 0; i < ncols && i < CSV_MAX_FIELDS; i++) {
    const char *h = fields[i];
    while (*h == ' ') h++;
    if (!strcmp(h, "tokens")) col = i, is_tokens = 1;
    else if (!strcmp(h, "duration_s") && !is_tokens) col = i;
  }
  if (col < 0) {
    st = err_set(TSR_EFORMAT, "%s:1: no 'tokens' or 'duration_s' column in the header", path);
    goto done;
  }
  if (!is_tokens && !lengths_has_geometry(o)) {
    st = err_set(TSR_EINVAL,
                 "%s has durations (duration_s) but no token geometry: give --fps, --size "
                 "and --patch, or --tokens-per-second", path);
    goto done;
  }
  if ((st = lengths_begin_source(ls, path, weight))) goto done;
  while (getline(&line, &linecap, f) >= 0) {
    lineno++;
    if (line[strspn(line, " \r\n")] == '\0') continue;  // blank line
    int nf = csv_split(line, fields, CSV_MAX_FIELDS);
    if (nf <= col) {
      st = err_set(TSR_EFORMAT, "%s:%lld: %d field(s), the %s column is field %d", path,
                   (long long)lineno, nf, is_tokens ? "tokens" : "duration_s", col + 1);
      break;
    }
    const char *what = is_tokens ? "tokens" : "duration_s";
    double v;
    num_result r = num_parse_double(fields[col], 0, is_tokens ? (double)SCHED_MAX_TOKENS
                                                              : LENGTHS_MAX_SECONDS, &v);
    if (r == NUM_SYNTAX) {
      st = err_set(TSR_EFORMAT, "%s:%lld: %s '%s' is not a number", path, (long long)lineno,
                   what, fields[col]);
      break;
    }
    if (r == NUM_RANGE || v <= 0 || (is_tokens && v != floor(v))) {
      st = err_set(TSR_EFORMAT, "%s:%lld: %s = %s; clip lengths must be %s", path,
                   (long long)lineno, what, fields[col],
                   is_tokens ? "whole numbers > 0 and at most 2^38 = 274877906944"
                             : "> 0 s and at most 1e9 s");
      break;
    }
    double t = v;
    if (!is_tokens) {
      if (o->max_seconds > 0 && v > o->max_seconds) {
        v = o->max_seconds;
        ls->capped++;
      }
      t = lengths_duration_tokens(o, v);
      if (t < 1) {
        ls->skipped++;
        continue;
      }
    }
    if (o && o->cap_tokens > 0 && t > (double)o->cap_tokens) {
      t = (double)o->cap_tokens;
      ls->capped++;
    }
    if (!(t <= (double)SCHED_MAX_TOKENS)) {  // also NaN from a broken geometry
      st = err_set(TSR_EFORMAT,
                   "%s:%lld: duration_s = '%s' gives %g tokens, more than the limit 2^38; cap "
                   "clips with --max-seconds or --cap-tokens",
                   path, (long long)lineno, fields[col], t);
      break;
    }
    if ((st = lengths_reserve(ls, ls->n + 1, &cap))) break;
    ls->ids[ls->n] = ls->n;
    ls->tokens[ls->n] = (int64_t)t;
    ls->n++;
  }
  if (!st && ferror(f)) st = err_set(TSR_EIO, "%s: read error", path);
  if (st)
    lengths_drop_source(ls);
  else
    st = lengths_end_source(ls);
done:
  free(line);
  fclose(f);
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
