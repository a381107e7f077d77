// model/train/run_config.c — RUN/config.ini written at a run's start and read by a resume
// from the run alone (model/train/run_config.h).
#include "model/train/run_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/ini.h"
#include "model/train/plan_choice.h"

enum { INI_LINE_MAX = 198 };  // core/ini.h: a longer line is refused on read

static const char *const PLAN_NAMES[] = {"auto", "dynamic", "static", "packing"};

// What a resume may change (docs/train.md "Resume"): the cadences, and the memory, CP modes,
// precision and ZeRO stage, which shape the plans and the kernels' rounding but not what
// trains (plan invariance). Everything else (the model, the data split, the optimizer, the
// schedule, the noise) is the run's meaning.
static const char *const SAFE_KEYS[] = {
    "train.ckpt_every",  "train.ckpt_keep",  "train.log_every",     "train.tensorboard",
    "train.mem_tokens",  "train.cp_mode",    "train.ulysses_chunks", "train.precision",
    "train.zero",        "train.val_every",  "train.sample_every",  "train.sample_steps",
    "train.sample_cfg",  "train.sample_prompts", "train.placement"};

int run_config_key_safe(const char *key) {
  for (size_t i = 0; i < sizeof SAFE_KEYS / sizeof SAFE_KEYS[0]; i++)
    if (!strcmp(key, SAFE_KEYS[i])) return 1;
  return 0;
}

// The next line of *p (without its '\n') into line (n bytes); *p moves past it.
static void next_line(const char **p, char *line, size_t n) {
  size_t len = strcspn(*p, "\n");
  snprintf(line, n, "%.*s", (int)len, *p);
  *p += len + ((*p)[len] == '\n');
}

// "name = value" into name (nn bytes) and value (nv bytes); 0 for a section line or a
// blank one. (config_to_ini's lines: a value is at most CONFIG_*_MAX characters.)
static int split_key(const char *line, char *name, size_t nn, char *value, size_t nv) {
  const char *eq = strstr(line, " = ");
  if (line[0] == '[' || !eq) return 0;
  snprintf(name, nn, "%.*s", (int)(eq - line), line);
  snprintf(value, nv, "%s", eq + 3);
  return 1;
}

int run_config_unsafe_diff(const dit_config *m0, const train_config *t0, const dit_config *m1,
                           const train_config *t1, char *key, char *was, char *now, size_t n) {
  char *a = config_to_ini(m0, t0), *b = config_to_ini(m1, t1);
  int found = 0;
  const char *p = a, *q = b;
  char section[32] = "", la[512], lb[512], na[128], nb[128], va[384], vb[384];
  while (a && b && *p && *q && !found) {  // config_to_ini writes the same keys in order
    next_line(&p, la, sizeof la);
    next_line(&q, lb, sizeof lb);
    if (la[0] == '[') snprintf(section, sizeof section, "%.*s", (int)strcspn(la + 1, "]"), la + 1);
    if (!strcmp(la, lb) || !split_key(la, na, sizeof na, va, sizeof va) ||
        !split_key(lb, nb, sizeof nb, vb, sizeof vb))
      continue;
    char full[192];
    snprintf(full, sizeof full, "%s.%s", section, na);
    if (run_config_key_safe(full)) continue;
    snprintf(key, n, "%s", full);
    snprintf(was, n, "%s", va);
    snprintf(now, n, "%s", vb);
    found = 1;
  }
  if (!a || !b) {  // out of memory: every change counts as unsafe, said as such
    snprintf(key, n, "(the config: out of memory comparing it)");
    was[0] = now[0] = '\0';
    found = 1;
  }
  free(a);
  free(b);
  return found;
}

// ---- reading ----

typedef struct {
  run_config *rc;
  const char *path;
  char *text;            // the [model], [train], [lora] lines, for config_from_ini
  size_t len, cap;
  char section[32];      // of the last line appended to text
} read_ctx;

static tsr_status append(read_ctx *x, const char *s) {
  size_t n = strlen(s);
  if (x->len + n + 1 > x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 4096;
    while (cap < x->len + n + 1) cap *= 2;
    char *g = realloc(x->text, cap);
    if (!g) return err_set(TSR_ENOMEM, "%s: out of memory", x->path);
    x->text = g, x->cap = cap;
  }
  memcpy(x->text + x->len, s, n + 1);
  x->len += n;
  return TSR_OK;
}

static tsr_status copy_value(char *dst, size_t cap, const char *value, const char *where,
                             const char *key) {
  if ((size_t)snprintf(dst, cap, "%s", value) >= cap)
    return err_set(TSR_EFORMAT, "%s: %s is too long", where, key);
  return TSR_OK;
}

static tsr_status run_key(read_ctx *x, const char *key, const char *value, const char *where) {
  run_config *rc = x->rc;
  if (!strcmp(key, "data")) return copy_value(rc->data, sizeof rc->data, value, where, key);
  if (!strcmp(key, "config")) return copy_value(rc->config, sizeof rc->config, value, where, key);
  if (!strcmp(key, "cost")) return copy_value(rc->cost, sizeof rc->cost, value, where, key);
  if (!strcmp(key, "steps") || !strcmp(key, "skip_bad_clips")) {
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end || v < 0)
      return err_set(TSR_EFORMAT, "%s: %s = '%s' is not a count", where, key, value);
    if (!strcmp(key, "steps")) rc->steps = v;
    else rc->skip_bad_clips = v != 0;
    return TSR_OK;
  }
  if (!strcmp(key, "plan")) {
    for (int k = 0; k < 4; k++)
      if (!strcmp(value, PLAN_NAMES[k])) return rc->plan_kind = k, TSR_OK;
    return err_set(TSR_EFORMAT, "%s: plan = '%s': auto, dynamic, static or packing", where, value);
  }
  if (!strcmp(key, "set")) {
    char **g = realloc(rc->sets, sizeof *g * (size_t)(rc->n_sets + 1));
    if (!g) return err_set(TSR_ENOMEM, "%s: out of memory", x->path);
    rc->sets = g;
    if (!(g[rc->n_sets] = strdup(value))) return err_set(TSR_ENOMEM, "%s: out of memory", x->path);
    rc->n_sets++;
    return TSR_OK;
  }
  return err_set(TSR_EFORMAT, "%s: unknown key [run] %s (data, config, cost, steps, plan, "
                 "skip_bad_clips, set)", where, key);
}

static tsr_status read_key(void *user, const char *section, const char *key, const char *value,
                           int line) {
  read_ctx *x = user;
  char where[PATH_MAX + 32];
  snprintf(where, sizeof where, "%s:%d", x->path, line);
  if (!strcmp(section, "run")) return run_key(x, key, value, where);
  if (strcmp(section, "model") && strcmp(section, "train") && strcmp(section, "lora"))
    return err_set(TSR_EFORMAT, "%s: key '%s' outside the [run], [model], [train] and [lora] "
                   "sections", where, key);
  char buf[512];
  tsr_status st = TSR_OK;
  if (strcmp(x->section, section)) {
    snprintf(x->section, sizeof x->section, "%s", section);
    snprintf(buf, sizeof buf, "[%s]\n", section);
    st = append(x, buf);
  }
  snprintf(buf, sizeof buf, "%s = %s\n", key, value);
  return st ? st : append(x, buf);
}

tsr_status run_config_read(const char *run_dir, run_config *rc) {
  *rc = (run_config){0};
  char path[PATH_MAX];
  tsr_status st = fs_join(path, sizeof path, run_dir, RUN_CONFIG_NAME);
  struct stat sb;
  if (st || stat(path, &sb) != 0) return st;  // absent: a run from before the file
  if ((st = fs_check_regular(path))) return st;
  read_ctx x = {.rc = rc, .path = path};
  st = ini_read(path, NULL, read_key, &x);
  if (!st && !rc->data[0])
    st = err_set(TSR_EFORMAT, "%s: [run] has no data = STORE (was the file edited?)", path);
  if (!st && !x.text)
    st = err_set(TSR_EFORMAT, "%s: no [model] and [train] sections (was the file edited?)", path);
  if (!st && (st = config_from_ini(x.text, &rc->mc, &rc->tc)))
    st = err_wrap(st, "%s (the run's effective config): ", path);
  free(x.text);
  if (st) run_config_free(rc);
  else rc->found = 1;
  return st;
}

void run_config_free(run_config *rc) {
  for (int i = 0; i < rc->n_sets; i++) free(rc->sets[i]);
  free(rc->sets);
  rc->sets = NULL, rc->n_sets = 0, rc->found = 0;
}

// ---- a resume's config ----

// The run's effective config (rc) with this start's overrides applied: every key of rc as
// an override, then the new ones, so the later win (config_load).
static tsr_status apply_resume_sets(const train_options *o, const run_config *rc, dit_config *m,
                                    train_config *t) {
  char *ini = config_to_ini(&rc->mc, &rc->tc);
  if (!ini) return err_set(TSR_ENOMEM, "out of memory (config)");
  size_t lines = 1;
  for (const char *s = ini; *s; s++) lines += *s == '\n';
  char **list = calloc(lines + (size_t)o->n_overrides, sizeof *list);
  char *store = malloc(strlen(ini) * 2 + lines * 64);  // "section.key=value" of every line
  tsr_status st = list && store ? TSR_OK : err_set(TSR_ENOMEM, "out of memory (config)");
  int n = 0;
  char section[32] = "", line[512], name[128], value[384];
  size_t used = 0;
  for (const char *p = ini; !st && *p;) {
    next_line(&p, line, sizeof line);
    if (line[0] == '[') snprintf(section, sizeof section, "%.*s", (int)strcspn(line + 1, "]"), line + 1);
    if (!split_key(line, name, sizeof name, value, sizeof value)) continue;
    list[n++] = store + used;
    used += (size_t)sprintf(store + used, "%s.%s=%s", section, name, value) + 1;
  }
  for (int i = 0; !st && i < o->n_overrides; i++) list[n++] = o->overrides[i];
  if (!st) st = config_load(NULL, list, n, m, t, NULL);
  free(list), free(store), free(ini);
  if (st) return st;
  char key[384], was[384], now[384];
  if (run_config_unsafe_diff(&rc->mc, &rc->tc, m, t, key, was, now, sizeof key))
    return err_set(TSR_EMISMATCH, "--resume %s: --set %s would change what the run trains (%s "
                   "in %s/%s, %s asked): a resume may change only the cadences and what shapes "
                   "the plans (train.ckpt_every, ckpt_keep, log_every, tensorboard, mem_tokens, "
                   "cp_mode, ulysses_chunks, precision, zero, val_every, sample_every, "
                   "sample_steps, sample_cfg); to train with another %s start a new run from its "
                   "weights (--init RUN/ckpt-STEP.safetensors)", o->run_dir, key, was, o->run_dir,
                   RUN_CONFIG_NAME, now, key);
  return TSR_OK;
}

tsr_status run_config_resolve(const train_options *o, train_options *eff, run_config *rc,
                              dit_config *m, train_config *t, char **defaults) {
  *eff = *o;
  *rc = (run_config){0};
  if (defaults) *defaults = NULL;
  tsr_status st = o->resume ? run_config_read(o->run_dir, rc) : TSR_OK;
  if (st) return st;
  if (rc->found) {  // what this start does not give, the run's start did
    if (!eff->data_dir) eff->data_dir = rc->data;
    if (!eff->stop_step) eff->stop_step = rc->steps;
    if (eff->plan_kind < 0) eff->plan_kind = rc->plan_kind;
    if (!eff->cost_path && rc->cost[0]) eff->cost_path = rc->cost;
    eff->skip_bad_clips |= rc->skip_bad_clips;
  }
  if (eff->plan_kind < 0) eff->plan_kind = TRAIN_PLAN_AUTO;
  if (!eff->config_path && o->resume && !rc->found)
    return err_set(TSR_EINVAL, "--resume %s: no %s there (a run started before tessera wrote "
                   "it): give the --config, --data and --set the run started with", o->run_dir,
                   RUN_CONFIG_NAME);
  if (!eff->config_path && !rc->found) return err_set(TSR_EINVAL, "missing --config FILE");
  if (!eff->data_dir) return err_set(TSR_EINVAL, "missing --data STORE");
  if (eff->config_path) return config_load(eff->config_path, o->overrides, o->n_overrides, m, t,
                                           defaults);
  return apply_resume_sets(o, rc, m, t);
}

int run_config_schedule(const train_options *o, train_config *t) {
  if (o->resume || o->stop_step <= 0 || t->lr_schedule_steps > 0) return 0;
  for (int i = 0; i < o->n_overrides; i++)
    if (!strncmp(o->overrides[i], "train.steps=", 12)) return 0;
  t->lr_schedule_steps = o->stop_step;
  return 1;
}

// ---- writing ----

// A value the reader gives back as written: one line, no inline comment (core/ini.h).
static tsr_status check_value(const char *path, const char *key, const char *v) {
  int bad = strchr(v, '\n') != NULL || strchr(v, '\r') != NULL;
  for (const char *s = v; *s && !bad; s++) bad = (*s == ';' || *s == '#') && s > v && (s[-1] == ' ' || s[-1] == '\t');
  if (bad)
    return err_set(TSR_EINVAL, "%s: %s '%s' holds a line break or a blank before ';' or '#', "
                   "which the config reader would cut: give it without", path, key, v);
  if (strlen(key) + 3 + strlen(v) > INI_LINE_MAX)
    return err_set(TSR_EINVAL, "%s: '%s = %s' is longer than the config reader's %d "
                   "characters a line: give a shorter path", path, key, v, INI_LINE_MAX);
  return TSR_OK;
}

// An absolute path for `given` (a resume may start in another directory).
static void absolute(const char *given, char *out, size_t n) {
  char buf[PATH_MAX];
  if (given[0] == '/' || !realpath(given, buf)) snprintf(out, n, "%s", given);
  else snprintf(out, n, "%s", buf);
}

// The file's text into f (named `name` in messages), after checking that it reads back.
static tsr_status emit(FILE *f, const char *name, const train_options *o, const run_config *prev,
                       const dit_config *m, const train_config *t, int64_t mem_tokens_now) {
  char data[PATH_MAX], conf[PATH_MAX] = "", cost[PATH_MAX] = "", steps[32];
  absolute(o->data_dir, data, sizeof data);
  if (o->config_path) absolute(o->config_path, conf, sizeof conf);
  else if (prev && prev->found) snprintf(conf, sizeof conf, "%s", prev->config);
  if (o->cost_path) absolute(o->cost_path, cost, sizeof cost);
  snprintf(steps, sizeof steps, "%lld", (long long)o->stop_step);
  const char *run_keys[][2] = {{"data", data}, {"config", conf}, {"cost", cost},
                               {"steps", steps}, {"plan", PLAN_NAMES[o->plan_kind & 3]},
                               {"skip_bad_clips", o->skip_bad_clips ? "1" : "0"}};
  // a resume given --config repeats the whole command line: its --set replace the earlier
  const int n_prev = prev && prev->found && !o->config_path ? prev->n_sets : 0;
  tsr_status st = TSR_OK;
  for (int i = 0; !st && i < 6; i++) st = check_value(name, run_keys[i][0], run_keys[i][1]);
  for (int i = 0; !st && i < n_prev; i++) st = check_value(name, "set", prev->sets[i]);
  for (int i = 0; !st && i < o->n_overrides; i++) st = check_value(name, "set", o->overrides[i]);
  char *ini = st ? NULL : config_to_ini(m, t);
  if (!st && !ini) st = err_set(TSR_ENOMEM, "out of memory (config)");
  if (st) return st;
  fprintf(f, "# The run in this directory as tessera train started it (rewritten at each "
          "resume).\n# `tessera train --resume RUN` reads it: no --config, --data or --set "
          "needed.\n# [run]: the store, the config file, --steps (0: train.steps), --plan, "
          "--cost,\n# --skip-bad-clips and every --set as given, in order (a resume's "
          "appended);\n# [model], [train], [lora]: the effective config, every key.\n[run]\n");
  for (int i = 0; i < 6; i++) fprintf(f, "%s = %s\n", run_keys[i][0], run_keys[i][1]);
  for (int i = 0; i < n_prev; i++) fprintf(f, "set = %s\n", prev->sets[i]);
  for (int i = 0; i < o->n_overrides; i++) fprintf(f, "set = %s\n", o->overrides[i]);
  if (t->mem_tokens == 0)
    fprintf(f, "\n# train.mem_tokens = 0: each start derives it from the memory (this one: "
            "%lld)", (long long)mem_tokens_now);
  fprintf(f, "\n%s", ini);
  free(ini);
  return TSR_OK;
}

tsr_status run_config_print(FILE *f, const train_options *o, const run_config *prev,
                            const dit_config *m, const train_config *t, int64_t mem_tokens_now) {
  return emit(f, RUN_CONFIG_NAME, o, prev, m, t, mem_tokens_now);
}

tsr_status run_config_write(const char *run_dir, const train_options *o, const run_config *prev,
                            const dit_config *m, const train_config *t, int64_t mem_tokens_now) {
  char path[PATH_MAX];
  tsr_status st = fs_join(path, sizeof path, run_dir, RUN_CONFIG_NAME);
  fs_atomic a = {0};
  if (!st) st = fs_atomic_open(&a, path);
  if (!st) st = emit(a.f, path, o, prev, m, t, mem_tokens_now);
  if (!st) st = ferror((FILE *)a.f) ? err_set(TSR_EIO, "write %s: disk full?", path) : fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return st;
}
