// store/merge.c — `tessera index merge`: combine stores with identical settings
// (store/merge.h). Order of operations: check everything, place shards (link or copy +
// fsync), then one index transaction per input; recovery removes leftovers of a crash.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/merge.h"

#include "core/fs.h"
#include "core/log.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/layout.h"
#include "store/lock.h"
#include "store/rebuild.h"
#include "store/recover.h"
#include "store/settings.h"
#include "store/shard.h"
#include "store/store.h"

// Copies `from` to `to` atomically (core/fs.h fs_atomic: to.tmp, fsync, rename).
static tsr_status copy_file(const char *from, const char *to) {
  int in = -1;
  tsr_status st = fs_open_regular(from, &in);  // a FIFO would block the merge
  if (st) return st;
  fs_atomic a;
  st = fs_atomic_open(&a, to);
  if (st) {
    close(in);
    return st;
  }
  size_t cap = 1 << 20;
  char *buf = malloc(cap);
  if (!buf) st = err_set(TSR_ENOMEM, "out of memory copying %s", from);
  while (!st) {
    ssize_t k = read(in, buf, cap);
    if (k < 0) {
      if (errno == EINTR) continue;
      st = err_set(TSR_EIO, "read %s: %s", from, strerror(errno));
      break;
    }
    if (k == 0) break;
    if (fwrite(buf, 1, (size_t)k, a.f) != (size_t)k)
      st = err_set(TSR_EIO, "write %s: %s", a.tmp, strerror(errno));
  }
  free(buf);
  close(in);
  if (!st) st = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return st;
}

typedef struct {
  char **v;
  int n, cap;
  tsr_status err;
  const store_settings *settings;  // the input's, to check its rows against
  const char *store;               // the input store, for messages
} shard_names;

static int collect_shard(const store_clip_row *row, void *ctx) {
  shard_names *s = ctx;
  // The rows are copied into OUT as they are: an inconsistent one stops the merge here.
  if (store_clip_check(s->settings, &row->c) != TSR_OK) {
    s->err = err_wrap(TSR_EFORMAT, "store %s: clip %lld: ", s->store, (long long)row->id);
    return 1;
  }
  for (int i = s->n - 1; i >= 0 && i >= s->n - 8; i--)  // rows of a shard come together
    if (!strcmp(s->v[i], row->c.shard)) return 0;
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->v[i], row->c.shard)) return 0;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    char **v = realloc(s->v, sizeof *v * (size_t)cap);
    if (!v) {
      s->err = err_set(TSR_ENOMEM, "out of memory");
      return 1;
    }
    s->v = v;
    s->cap = cap;
  }
  if (!(s->v[s->n] = strdup(row->c.shard))) {
    s->err = err_set(TSR_ENOMEM, "out of memory");
    return 1;
  }
  s->n++;
  return 0;
}

static void names_free(shard_names *s) {
  for (int i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  *s = (shard_names){0};
}

static int has_parts(const char *dir) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", dir, STORE_PARTS_DIR);
  DIR *d = opendir(p);
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n > 7 && !strcmp(e->d_name + n - 7, ".sqlite")) found = 1;
  }
  closedir(d);
  return found;
}

static int same_file(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// Places the shards of input `in` into OUT/shards under `prefix`.
static tsr_status place_shards(const char *out, const char *in, const char *prefix,
                               store_merge_result *res) {
  store_index *ix = NULL;
  tsr_status st = store_open(&ix, in, 0, NULL);
  if (st) return st;
  store_settings settings;
  index_settings(ix, &settings);
  shard_names names = {.settings = &settings, .store = in};
  st = index_foreach_clip(ix, collect_shard, &names);
  index_close(&ix);
  if (!st) st = names.err;
  char src[PATH_MAX], dst[PATH_MAX];
  const size_t plen = strlen(STORE_SHARD_DIR);
  for (int i = 0; i < names.n && !st; i++) {
    const char *name = names.v[i];
    if ((st = store_shard_path(in, name, src, sizeof src))) {
      err_wrap(st, "store %s: ", in);
      break;
    }
    if (snprintf(dst, sizeof dst, "%s/%s/%s%s", out, STORE_SHARD_DIR, prefix, name + plen + 1) >=
        (int)sizeof dst) {
      st = err_set(TSR_EINVAL, "path too long: %s", dst);
      break;
    }
    if (link(src, dst) == 0) {
      res->shards_linked++;
      continue;
    }
    if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP) {
      st = err_set(TSR_EIO, "link shard %s to %s: %s", src, dst, strerror(errno));
      break;
    }
    if ((st = copy_file(src, dst))) break;
    res->shards_copied++;
  }
  names_free(&names);
  if (!st) {
    snprintf(dst, sizeof dst, "%s/%s", out, STORE_SHARD_DIR);
    st = fs_fsync_dir(dst);
  }
  return st;
}

// What the checks of store_merge learn of the inputs: the settings of the first, and the
// filters that inputs record (all that record some must record the same: index_merge_from).
typedef struct {
  store_settings s0;
  int have_filters;
  char filters[STORE_MAX_FILTERS_BYTES + 1];
  const char *filters_of;  // the first input that records them
} merge_inputs;

// Appends a problem line to problems (4096 bytes).
static void problem(char *problems, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(char *problems, const char *fmt, ...) {
  size_t u = strlen(problems);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(problems + u, 4096 - u, fmt, ap);
  va_end(ap);
}

// Checks input i (settings, filters, parts, not the output, not given twice).
static tsr_status check_input(const char *out, char *const *ins, int i, merge_inputs *mi,
                              char *problems) {
  store_index *ix = NULL;
  store_settings s;
  char line[1024], *f = malloc(STORE_MAX_FILTERS_BYTES + 1);
  int recorded = 0;
  tsr_status st = f ? store_open(&ix, ins[i], 0, NULL) : err_set(TSR_ENOMEM, "out of memory");
  if (!st) {
    index_settings(ix, i == 0 ? &mi->s0 : &s);
    st = index_filters(ix, f, STORE_MAX_FILTERS_BYTES + 1, &recorded);
  }
  index_close(&ix);
  if (st) {
    free(f);
    return err_wrap(st, "merge: input %d: ", i + 1);
  }
  if (i > 0 && store_settings_diff(&mi->s0, &s, line, sizeof line))
    problem(problems, "\n  %s differs from %s: %s", ins[i], ins[0], line);
  if (recorded && mi->have_filters && strcmp(f, mi->filters) != 0)
    problem(problems, "\n  %s differs from %s: filters '%s' vs '%s'", ins[i], mi->filters_of, f,
            mi->filters);
  else if (recorded && !mi->have_filters) {
    mi->have_filters = 1;
    mi->filters_of = ins[i];
    snprintf(mi->filters, sizeof mi->filters, "%s", f);
  }
  free(f);
  if (has_parts(ins[i]))
    problem(problems, "\n  %s has unmerged parts of an interrupted ingest: run `tessera index "
            "recover %s` first", ins[i], ins[i]);
  if (same_file(ins[i], out)) problem(problems, "\n  %s is the output store", ins[i]);
  for (int j = 0; j < i; j++)
    if (same_file(ins[i], ins[j])) problem(problems, "\n  %s is given twice", ins[i]);
  return TSR_OK;
}

static tsr_status merge_locked(const char *out, char *const *ins, int n,
                               const merge_inputs *mi, store_merge_result *res);

tsr_status store_merge(const char *out, char *const *ins, int n, store_merge_result *res) {
  memset(res, 0, sizeof *res);
  if (n < 1) return err_set(TSR_EINVAL, "merge into %s: no input stores given", out);
  char problems[4096] = "";
  merge_inputs *mi = calloc(1, sizeof *mi);
  if (!mi) return err_set(TSR_ENOMEM, "merge into %s: out of memory", out);
  tsr_status st = TSR_OK;
  // 1. Check every input (and the output) before writing anything.
  for (int i = 0; i < n && !st; i++) st = check_input(out, ins, i, mi, problems);
  if (!st && problems[0]) {
    int mismatch = strstr(problems, "differs") != NULL;
    st = err_set(mismatch ? TSR_EMISMATCH : TSR_EINVAL, "merge into %s refused, nothing "
                 "written:%s", out, problems);
  }
  // The inputs are read (their shards linked or copied): readers of them, so no recovery
  // of an input removes a shard under the merge.
  store_lock **in_locks = st ? NULL : calloc((size_t)n, sizeof *in_locks);
  if (!st && !in_locks) st = err_set(TSR_ENOMEM, "merge into %s: out of memory", out);
  for (int i = 0; i < n && !st; i++) st = store_lock_read(&in_locks[i], ins[i]);
  if (!st) st = merge_locked(out, ins, n, mi, res);
  for (int i = 0; in_locks && i < n; i++) store_lock_release(&in_locks[i]);
  free(in_locks);
  free(mi);
  return st;
}

// The output's filters against the inputs' (an existing output may record others).
static tsr_status check_output_filters(store_index *ox, const char *out, const merge_inputs *mi) {
  char *f = malloc(STORE_MAX_FILTERS_BYTES + 1);
  int recorded = 0;
  tsr_status st = f ? index_filters(ox, f, STORE_MAX_FILTERS_BYTES + 1, &recorded)
                    : err_set(TSR_ENOMEM, "out of memory");
  if (!st && recorded && mi->have_filters && strcmp(f, mi->filters) != 0)
    st = err_set(TSR_EMISMATCH, "merge into %s refused, nothing written: its filters '%s' differ "
                 "from the filters '%s' of %s", out, f, mi->filters, mi->filters_of);
  free(f);
  return st;
}

// store_merge once its inputs are checked and read-locked: the output's part.
static tsr_status merge_locked(const char *out, char *const *ins, int n,
                               const merge_inputs *mi, store_merge_result *res) {
  store_settings s0 = mi->s0;
  char why[1024];
  tsr_status st;
  // The output is written: one writer at a time, and never "recovered" (shards deleted)
  // when its index is lost.
  store_lock *lock = NULL;
  store_index *ox = NULL;
  if ((st = store_lock_acquire(&lock, out, 1))) return err_wrap(st, "merge: output: ");
  if (!(st = store_index_state(out, why, sizeof why)) && why[0])
    st = err_set(TSR_EFORMAT, "merge: output store %s has clips in its shards but %s; nothing "
                 "was written. Run `tessera index recover %s` first", out, why, out);
  if (st || (st = store_open(&ox, out, 1, &s0))) {
    store_lock_release(&lock);
    return err_wrap(st, "merge: output: ");
  }
  if ((st = check_output_filters(ox, out, mi)) || (st = store_recover(out, ox))) goto done;

  // 2. Per input: shards, then the index rows (one transaction).
  char prefix[64];
  static int seq;  // distinct prefixes for merges in one process within the same second
  unsigned long run = (unsigned long)time(NULL);
  int me = __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < n && !st; i++) {
    snprintf(prefix, sizeof prefix, "m%lx-%x-%d-%d-", run, (unsigned)getpid(), me, i);
    if ((st = place_shards(out, ins[i], prefix, res))) break;
    char idx[PATH_MAX];
    snprintf(idx, sizeof idx, "%s/%s", ins[i], STORE_INDEX_NAME);
    int64_t clips = 0, skipped = 0;
    if ((st = index_merge_from(ox, idx, prefix, &clips, &skipped))) break;
    res->stores++;
    res->clips += clips;
    res->skipped += skipped;
    log_info("merge: %s: %lld clips added, %lld sources already in %s", ins[i], (long long)clips,
             (long long)skipped, out);
  }
  // 3. The merged clips numbered as one ingest of their sources would (index_order_settle);
  // shards of skipped sources are referenced by nothing: remove them.
  if (!st) st = index_order_settle(ox, NULL);
  if (!st) st = store_recover(out, ox);
done:
  index_close(&ox);
  store_lock_release(&lock);
  return st;
}
