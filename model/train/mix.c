// model/train/mix.c — dataset mixes: the DATASET.ini reader, epoch quotas and held-out
// counts (model/train/mix.h).
#include "model/train/mix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/ini.h"
#include "core/num.h"

int mix_is_spec(const char *path) {
  struct stat st;
  return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void mix_free(mix_spec *m) {
  free(m->store);
  m->store = NULL;
  m->n = 0;
}

typedef struct {
  mix_spec *m;
  char dir[PATH_MAX];    // the INI's folder, "" when it has none
  int cur;               // the store of the section being read, -1 before any
  unsigned seen[MIX_MAX_STORES];  // keys met in each store's section (bits: path, weight, repeat)
} read_ctx;

enum { SEEN_PATH = 1, SEEN_WEIGHT = 2, SEEN_REPEAT = 4 };

static tsr_status new_store(read_ctx *x, const char *section, int line) {
  mix_spec *m = x->m;
  const char *name = section + 6;  // after "store."
  if (strncmp(section, "store.", 6) || !name[0])
    return err_set(TSR_EFORMAT, "%s:%d: section [%s]: a dataset mix has only [store.NAME] "
                   "sections, one a store", m->path, line, section);
  if (strlen(name) >= MIX_NAME_MAX)
    return err_set(TSR_EFORMAT, "%s:%d: store name '%.32s...' is longer than %d bytes", m->path,
                   line, name, MIX_NAME_MAX - 1);
  for (int s = 0; s < m->n; s++)
    if (!strcmp(m->store[s].name, name))
      return err_set(TSR_EFORMAT, "%s:%d: store '%s' is listed twice (give each [store.NAME] "
                     "once)", m->path, line, name);
  if (m->n == MIX_MAX_STORES)
    return err_set(TSR_EFORMAT, "%s:%d: more than %d stores in one mix", m->path, line,
                   MIX_MAX_STORES);
  x->cur = m->n++;
  mix_store *ms = &m->store[x->cur];
  memset(ms, 0, sizeof *ms);
  snprintf(ms->name, sizeof ms->name, "%s", name);
  return TSR_OK;
}

static tsr_status set_path(read_ctx *x, mix_store *ms, const char *value, int line) {
  if (!value[0])
    return err_set(TSR_EFORMAT, "%s:%d: store '%s': empty path", x->m->path, line, ms->name);
  int n = value[0] == '/' || !x->dir[0]
              ? snprintf(ms->path, sizeof ms->path, "%s", value)
              : snprintf(ms->path, sizeof ms->path, "%s/%s", x->dir, value);
  if (n < 0 || (size_t)n >= sizeof ms->path)
    return err_set(TSR_EINVAL, "%s:%d: store '%s': path too long", x->m->path, line, ms->name);
  return TSR_OK;
}

static tsr_status on_key(void *user, const char *section, const char *key, const char *value,
                         int line) {
  read_ctx *x = user;
  mix_spec *m = x->m;
  if (!section[0])
    return err_set(TSR_EFORMAT, "%s:%d: key '%s' before any [store.NAME] section", m->path,
                   line, key);
  if (x->cur < 0 || strncmp(section, "store.", 6) || strcmp(section + 6, m->store[x->cur].name)) {
    tsr_status st = new_store(x, section, line);
    if (st) return st;
  }
  mix_store *ms = &m->store[x->cur];
  unsigned bit = !strcmp(key, "path") ? SEEN_PATH : !strcmp(key, "weight") ? SEEN_WEIGHT
                 : !strcmp(key, "repeat") ? SEEN_REPEAT : 0;
  if (!bit)
    return err_set(TSR_EFORMAT, "%s:%d: store '%s': unknown key '%s' (path, weight, repeat)",
                   m->path, line, ms->name, key);
  if (x->seen[x->cur] & bit)
    return err_set(TSR_EFORMAT, "%s:%d: store '%s': key '%s' given twice", m->path, line,
                   ms->name, key);
  x->seen[x->cur] |= bit;
  if ((x->seen[x->cur] & (SEEN_WEIGHT | SEEN_REPEAT)) == (SEEN_WEIGHT | SEEN_REPEAT))
    return err_set(TSR_EFORMAT, "%s:%d: store '%s' has both weight and repeat: give one (a "
                   "weight shares the draws, a repeat counts passes over the store)", m->path,
                   line, ms->name);
  if (bit == SEEN_PATH) return set_path(x, ms, value, line);
  if (bit == SEEN_WEIGHT) {
    if (num_parse_double(value, 0, 1e12, &ms->weight) || !(ms->weight > 0))
      return err_set(TSR_EFORMAT, "%s:%d: store '%s': weight '%s' is not a number > 0",
                     m->path, line, ms->name, value);
    return TSR_OK;
  }
  if (num_parse_i64(value, 1, MIX_MAX_REPEAT, &ms->repeat))
    return err_set(TSR_EFORMAT, "%s:%d: store '%s': repeat '%s' is not an integer in 1..%d",
                   m->path, line, ms->name, value, MIX_MAX_REPEAT);
  return TSR_OK;
}

tsr_status mix_read(const char *path, mix_spec *out) {
  memset(out, 0, sizeof *out);
  if (snprintf(out->path, sizeof out->path, "%s", path) >= (int)sizeof out->path)
    return err_set(TSR_EINVAL, "dataset mix path too long");
  read_ctx *x = calloc(1, sizeof *x);
  out->store = calloc(MIX_MAX_STORES, sizeof *out->store);
  if (!x || !out->store) {
    free(x);
    mix_free(out);
    return err_set(TSR_ENOMEM, "out of memory reading %s", path);
  }
  x->m = out;
  x->cur = -1;
  const char *slash = strrchr(path, '/');
  if (slash) snprintf(x->dir, sizeof x->dir, "%.*s", (int)(slash - path), path);
  if (slash == path) snprintf(x->dir, sizeof x->dir, "/");
  tsr_status st = ini_read(path, NULL, on_key, x);
  for (int s = 0; !st && s < out->n; s++) {
    if (!(x->seen[s] & SEEN_PATH))
      st = err_set(TSR_EFORMAT, "%s: store '%s' has no path (path = STORE_DIR)", path,
                   out->store[s].name);
    else if (!(x->seen[s] & (SEEN_WEIGHT | SEEN_REPEAT)))
      out->store[s].repeat = 1;
  }
  if (!st && out->n == 0)
    st = err_set(TSR_EFORMAT, "%s lists no store: give one [store.NAME] section with a "
                 "`path = STORE_DIR` line for each store of the mix", path);
  free(x);
  if (st) mix_free(out);
  return st;
}

// Splits `total` into n parts in proportion to share (n, >= 0, some > 0): floors, then one
// more to the largest remainders (ties: the earlier part). out: (n)
static void apportion(int64_t total, int n, const double *share, int64_t *out) {
  double sum = 0;
  for (int s = 0; s < n; s++) sum += share[s];
  int64_t given = 0;
  for (int s = 0; s < n; s++) {
    out[s] = sum > 0 ? (int64_t)floor((double)total * share[s] / sum) : 0;
    given += out[s];
  }
  while (given < total) {  // at most n rounds: every remainder is < 1
    int best = -1;
    double best_rem = -1;
    for (int s = 0; s < n; s++) {
      if (share[s] <= 0) continue;
      double rem = (double)total * share[s] / sum - (double)out[s];
      if (rem > best_rem) best = s, best_rem = rem;
    }
    if (best < 0) break;
    out[best]++;
    given++;
  }
}

tsr_status mix_quotas(const mix_spec *m, const int64_t *clips, int64_t *quota) {
  double share[MIX_MAX_STORES] = {0};
  int64_t weighted = 0;
  for (int s = 0; s < m->n; s++) {
    share[s] = m->store[s].repeat ? 0 : m->store[s].weight;
    if (!m->store[s].repeat) weighted += clips[s];
  }
  int64_t w_quota[MIX_MAX_STORES];
  apportion(weighted, m->n, share, w_quota);
  int64_t total = 0;
  for (int s = 0; s < m->n; s++) {
    const mix_store *ms = &m->store[s];
    if (ms->repeat && clips[s] > INT64_MAX / 4 / ms->repeat)
      return err_set(TSR_EINVAL, "%s: store '%s': repeat %lld of its %lld clips overflows",
                     m->path, ms->name, (long long)ms->repeat, (long long)clips[s]);
    quota[s] = ms->repeat ? ms->repeat * clips[s] : w_quota[s];
    if (quota[s] < 1)
      return err_set(TSR_EINVAL, "%s: store '%s' (weight %g) gets no draw in an epoch of the "
                     "mix (%lld draws of weighted stores): raise its weight", m->path, ms->name,
                     ms->weight, (long long)weighted);
    if (quota[s] > INT64_MAX / 4 - total)
      return err_set(TSR_EINVAL, "%s: an epoch of the mix overflows", m->path);
    total += quota[s];
  }
  return TSR_OK;
}

tsr_status mix_val_counts(const mix_spec *m, const int64_t *clips, int64_t n_val, int64_t *val) {
  int64_t quota[MIX_MAX_STORES];
  tsr_status st = mix_quotas(m, clips, quota);
  if (st) return st;
  double share[MIX_MAX_STORES] = {0};
  for (int s = 0; s < m->n; s++) share[s] = (double)quota[s];
  int base = n_val >= m->n;  // one each first
  apportion(n_val - (base ? m->n : 0), m->n, share, val);
  for (int s = 0; s < m->n; s++) val[s] += base;
  return TSR_OK;
}

tsr_status mix_epoch_draws(const mix_spec *m, const int64_t *clips, int64_t *quota,
                           int64_t *draws) {
  for (int s = 0; s < m->n; s++)
    if (clips[s] < 1)
      return err_set(TSR_EINVAL, "mix %s: store '%s' (%s) has no clips", m->path,
                     m->store[s].name, m->store[s].path);
  TSR_TRY(mix_quotas(m, clips, quota));
  *draws = 0;
  for (int s = 0; s < m->n; s++) *draws += quota[s];  // mix_quotas bounds the sum
  return TSR_OK;
}
