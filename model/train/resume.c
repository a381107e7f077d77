// model/train/resume.c — what a resume compares with the run it continues: the store (its
// clip table's fingerprint, and RUN/store-clips.txt to say what changed) and the plan
// settings that make it bitwise (model/train/resume.h).
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "model/io/ckpt_run.h"
#include "model/train/resume.h"

#define STORE_RECORD_NAME "store-clips.txt"
enum { SHOWN_DIFFS = 5 };  // differences named in a refusal (all are counted)

void train_plan_settings(const trainer *tr, int plan_kind, char *out, size_t n) {
  static const char *const kinds[] = {"auto", "dynamic", "static", "packing"};
  const sched_cluster *c = &tr->sched.cluster;
  uint64_t h = HASH_FNV1A_INIT;
  for (int i = 0; i < COST_NKEYS; i++) {
    double v = cost_model_get(&tr->sched.cost, i);
    // ag_bw, rs_bw, coll_lat unset: the hash of the files before them
    if (i >= COST_NKEYS - 3 && v == 0) continue;
    h = hash_fnv1a(h, &v, sizeof v);
  }
  // ZeRO from stage 2 on makes waves lockstep (sched/cost.h): its sizes shape plans
  const cost_zero *z = &tr->sched.cost.zero;
  if (z->stage >= 2) {
    double zv[5] = {z->stage, z->params, z->block, z->buckets, z->blocks};
    h = hash_fnv1a(h, zv, sizeof zv);
  }
  h = hash_fnv1a(h, &tr->sched.cost.text_tokens, sizeof tr->sched.cost.text_tokens);
  // the CP modes the planner may give groups, and the heads Ulysses splits, shape plans too
  h = hash_fnv1a(h, &tr->sched.cost.cp_modes, sizeof tr->sched.cost.cp_modes);
  h = hash_fnv1a(h, &tr->sched.cost.heads, sizeof tr->sched.cost.heads);
  // ranks per node matter only with more than one rank
  int per_node = c->gpus_per_node < c->ranks ? c->gpus_per_node : c->ranks;
  snprintf(out, n, "mem_tokens %lld, ranks %d, ranks per node %d, plan %s, cost model %016llx",
           (long long)c->mem_tokens, c->ranks, per_node,
           plan_kind >= 0 && plan_kind < 4 ? kinds[plan_kind] : "?", (unsigned long long)h);
}

static tsr_status record_path(char *out, size_t n, const char *run_dir) {
  if (snprintf(out, n, "%s/%s", run_dir, STORE_RECORD_NAME) >= (int)n)
    return err_set(TSR_EINVAL, "run directory path too long: %s", run_dir);
  return TSR_OK;
}

tsr_status train_store_record(const trainer *tr, const char *run_dir, int replace) {
  char path[PATH_MAX], line[1024];
  tsr_status st = record_path(path, sizeof path, run_dir);
  if (st) return st;
  struct stat sb;
  if (!replace && stat(path, &sb) == 0) {  // a resume keeps the record of the run's start
    if (!S_ISREG(sb.st_mode)) return fs_check_regular(path);  // names what it is
    return TSR_OK;
  }
  fs_atomic a = {0};
  if ((st = fs_atomic_open(&a, path))) return st;
  FILE *f = a.f;
  fprintf(f, "# the clips of store %s when this run started (id T H W bytes checksum "
          "caption_checksum label); `tessera train --resume` compares the store with them\n",
          data_dir(tr->data));
  for (int64_t i = 0; i < data_num_clips(tr->data); i++) {
    data_clip_line(tr->data, i, line, sizeof line);
    fprintf(f, "%s\n", line);
  }
  st = ferror(f) ? err_set(TSR_EIO, "write %s: disk full?", path) : fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return st;
}

// The differences between the record (RUN/store-clips.txt) and the store, counted, the
// first SHOWN_DIFFS described into out (n bytes).
typedef struct {
  int64_t changed, gone, added;
  char *out;
  size_t n, len;
} diff_list;

static void diff_say(diff_list *dl, const char *what, const char *a, const char *b,
                     long long id) {
  int64_t k = dl->changed + dl->gone + dl->added;
  if (k > SHOWN_DIFFS || dl->len >= dl->n) return;
  if (k == SHOWN_DIFFS) {
    dl->len += (size_t)snprintf(dl->out + dl->len, dl->n - dl->len, "; ...");
    return;
  }
  dl->len += (size_t)snprintf(dl->out + dl->len, dl->n - dl->len, "%sclip %lld %s%s%s%s",
                              k ? "; " : "", id, what, a[0] ? ": " : "", a, b);
}

// A clip whose record line (after its id) differs from the store's: which fields.
static void diff_fields(diff_list *dl, long long id, const char *was, const char *now) {
  char w[7][128] = {{0}}, n[7][128] = {{0}};  // a field longer than 127 bytes is cut
  static const char *const names[] = {"grid", "grid", "grid", "bytes", "checksum",
                                      "caption", "label"};
  sscanf(was, "%127s %127s %127s %127s %127s %127s %127[^\n]", w[0], w[1], w[2], w[3], w[4],
         w[5], w[6]);
  sscanf(now, "%127s %127s %127s %127s %127s %127s %127[^\n]", n[0], n[1], n[2], n[3], n[4],
         n[5], n[6]);
  char what[64] = "", ab[800] = "";
  for (int f = 0; f < 7; f++)
    if (strcmp(w[f], n[f])) {
      snprintf(what, sizeof what, "%s changed", names[f]);
      if (f < 3)
        snprintf(ab, sizeof ab, "%sx%sx%s -> %sx%sx%s", w[0], w[1], w[2], n[0], n[1], n[2]);
      else
        snprintf(ab, sizeof ab, "'%.127s' -> '%.127s'", w[f], n[f]);
      break;
    }
  diff_say(dl, what[0] ? what : "changed", ab, "", id);
  dl->changed++;
}

// Merge-join of the record and the store's clips (both in id order).
static tsr_status store_diff(const trainer *tr, const char *run_dir, diff_list *dl) {
  char path[PATH_MAX], line[1200], now[1024];
  tsr_status st = record_path(path, sizeof path, run_dir);
  if (st) return st;
  int fd = -1;  // a regular file only (core/fs.h): a FIFO would hang the resume
  if (fs_open_regular(path, &fd)) return err_wrap(TSR_EIO, "the run's record of its store: ");
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return err_set(TSR_EIO, "%s: %s", path, strerror(errno));
  }
  int64_t i = 0, n = data_num_clips(tr->data);
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\n")] = 0;
    char *rest;
    long long id = strtoll(line, &rest, 10);
    rest += *rest == ' ';
    for (; i < n && data_clip_at(tr->data, i)->id < id; i++, dl->added++)
      diff_say(dl, "is new", "", "", (long long)data_clip_at(tr->data, i)->id);
    if (i >= n || data_clip_at(tr->data, i)->id > id) {
      diff_say(dl, "is gone", "", "", id);
      dl->gone++;
      continue;
    }
    data_clip_line(tr->data, i++, now, sizeof now);
    const char *nrest = strchr(now, ' ');
    if (strcmp(rest, nrest ? nrest + 1 : "")) diff_fields(dl, id, rest, nrest ? nrest + 1 : "");
  }
  for (; i < n; i++, dl->added++)
    diff_say(dl, "is new", "", "", (long long)data_clip_at(tr->data, i)->id);
  fclose(f);
  return TSR_OK;
}

tsr_status train_resume_check_store(const ckpt_meta *cm, const trainer *tr, const char *path,
                                    const char *run_dir) {
  const char *dir = data_dir(tr->data);
  char diff[512];
  if (store_settings_diff(&cm->store, data_settings(tr->data), diff, sizeof diff))
    return err_set(TSR_EMISMATCH, "--resume: store %s's settings differ from those checkpoint %s "
                   "was trained on: %s", dir, path, diff);
  if (!cm->has_fingerprint) {  // a checkpoint from before the fingerprint: its clip count
    if (cm->clips != data_num_clips(tr->data))
      return err_set(TSR_EMISMATCH, "--resume: store %s has %lld clips, checkpoint %s was trained "
                     "on %lld: the sampler's order would change; resume on the same store or "
                     "fine-tune with --init", dir, (long long)data_num_clips(tr->data), path,
                     (long long)cm->clips);
    return TSR_OK;
  }
  uint64_t fp = data_fingerprint(tr->data);
  if (fp == cm->store_fingerprint) return TSR_OK;
  char what[2048] = "";
  diff_list dl = {.out = what, .n = sizeof what};
  char counts[160] = "";
  if (store_diff(tr, run_dir, &dl)) {
    snprintf(what, sizeof what, "%s, which would say what changed", err_msg());
    err_clear();
  } else {
    snprintf(counts, sizeof counts, " (%lld clips changed, %lld gone, %lld new)",
             (long long)dl.changed, (long long)dl.gone, (long long)dl.added);
  }
  return err_set(TSR_EMISMATCH, "--resume: store %s is not the store this run started with: its "
                 "clips (ids, lengths, checksums, labels) have fingerprint %016llx, checkpoint %s "
                 "was trained on %016llx%s: %s. The batches and the noise of every clip would "
                 "change: resume on the store the run started with, or start a new run from "
                 "these weights with --init %s", dir, (unsigned long long)fp, path,
                 (unsigned long long)cm->store_fingerprint, counts, what[0] ? what
                 : data_num_parts(tr->data) ? "no clip differs from RUN/store-clips.txt: the "
                 "mix's stores, weights, repeats, frame rates or sizes changed" : "no clip "
                 "differs from RUN/store-clips.txt (was it rewritten?)", path);
}

void train_resume_check_plan(const ckpt_meta *cm, const trainer *tr, int plan_kind,
                             const char *path) {
  if (tr->rank != 0) return;
  char now[256];
  train_plan_settings(tr, plan_kind, now, sizeof now);
  if (!cm->plan_settings[0])
    log_info("train: checkpoint %s records no plan settings (an older file): this resume is "
             "bitwise only if they are those of the run that wrote it (now: %s)", path, now);
  else if (strcmp(cm->plan_settings, now))
    log_warn("train: --resume changes the plan settings ('%s' in checkpoint %s, '%s' now): the "
             "batches are packed into other microbatches, so this resume is NOT bitwise (its "
             "losses agree with an uninterrupted run to rounding only); resume with the run's "
             "settings for the same bits", cm->plan_settings, path, now);
  else
    log_info("train: resuming bitwise: the plan settings are the run's (%s)", now);
}

tsr_status train_resume_base(trainer *tr, const ckpt_meta *cm, const char *path, const char *init,
                             char *base, size_t cap) {
  const char *from = init ? init : cm->base_model;
  const char *how = init ? "given with --init" : "recorded in the checkpoint";
  struct stat sb;
  if (!from[0] || stat(from, &sb))
    return err_set(TSR_EIO, "--resume: the LoRA run's frozen base '%s' (%s %s) cannot be read: "
                   "%s; give the base checkpoint it trained on with --init BASE (its weights "
                   "are checked against the checksums %s records)", from, how, path,
                   from[0] ? strerror(errno) : "no path", path);
  ckpt_state cs = {.model = tr->model};  // the base's weights only (not adapters)
  tsr_status st = ckpt_load(from, &cs, CKPT_LOAD_WEIGHTS);
  if (st) return err_wrap(st, "--resume: the LoRA run's base %s (%s): ", from, how);
  if ((st = ckpt_check_base(path, tr->model))) {
    char why[2048];
    snprintf(why, sizeof why, "%s", err_msg());
    return err_set(st, "--resume: base %s (%s) is not the one this LoRA run trained on: %s; give "
                   "that base with --init BASE", from, how, why);
  }
  if ((size_t)snprintf(base, cap, "%s", from) >= cap)
    return err_set(TSR_EINVAL, "--resume: the base's path %s is too long", from);
  if (tr->rank == 0)
    log_info("train: LoRA resume: base %s (%s) matches the checksums of every tensor %s "
             "records", from, how, path);
  return TSR_OK;
}

// train.mem_tokens of the newest checkpoint of run_dir (what its run derived), 0 if none.
static int64_t checkpoint_mem_tokens(const char *run_dir) {
  char path[PATH_MAX];
  int64_t step;
  ckpt_meta cm = {0};
  int64_t m = 0;
  if (!ckpt_latest(run_dir, path, sizeof path, &step) && !ckpt_read_meta(path, &cm)) {
    m = cm.tc.mem_tokens;
    ckpt_meta_free(&cm);
  }
  err_clear();  // the resume reports a missing or bad checkpoint itself
  return m;
}

tsr_status train_memory_limit_run(trainer *tr, const train_options *o, int value_bytes,
                                  train_memory *m, size_t *capacity, const char **source) {
  int64_t kept = o->resume && tr->tc.mem_tokens == 0 ? checkpoint_mem_tokens(o->run_dir) : 0;
  // the CPU's derived limit is at most what a batch holds (train_memory_limit)
  int64_t batch = train_batch_tokens(tr->data, tr->tc.global_batch);
  if (!kept)
    return train_memory_limit(&tr->tc, &tr->mc, tr->kb, value_bytes, o->mem_bytes, batch, m,
                              capacity, source);
  tr->tc.mem_tokens = kept;
  tsr_status st = train_memory_limit(&tr->tc, &tr->mc, tr->kb, value_bytes, o->mem_bytes, batch,
                                     m, capacity, source);
  int64_t bad = st != TSR_OK;  // every rank keeps it or none does
  tsr_status cst = comm_size() > 1 ? comm_allreduce_max_i64(&bad, 1) : TSR_OK;
  if (cst) return cst;
  if (!bad) {
    if (comm_rank() == 0)
      log_info("train: train.mem_tokens = 0: keeping the resumed run's %lld tokens (they fit "
               "here), so its plans are the run's", (long long)kept);
    return TSR_OK;
  }
  err_clear();
  tr->tc.mem_tokens = 0;
  st = train_memory_limit(&tr->tc, &tr->mc, tr->kb, value_bytes, o->mem_bytes, batch, m,
                          capacity, source);
  if (!st && comm_rank() == 0)
    log_warn("train: the resumed run's train.mem_tokens = %lld does not fit here (%s): %lld "
             "derived instead, so this resume is not bitwise", (long long)kept, *source,
             (long long)tr->tc.mem_tokens);
  return st;
}
