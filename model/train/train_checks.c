// model/train/train_checks.c — the checks of a run's start that need the store, the config
// and the options together (model/train/train_checks.h).
#include "model/train/train_checks.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/safetensors.h"

// The store must hold what the config's model reads: same tubelet and channels (uint8
// pixels or bf16/f32 latents alike), labels that fit num_classes, clips that fit one
// rank's memory.
tsr_status train_check_store(const trainer *tr, int ranks) {
  const store_settings *s = data_settings(tr->data);
  const dit_config *m = &tr->mc;
  const char *dir = data_dir(tr->data);
  if (s->pt != m->pt || s->ph != m->ph || s->pw != m->pw)
    return err_set(TSR_EMISMATCH,
                   "store %s has patch %dx%dx%d but the config's model.pt/ph/pw is %dx%dx%d: "
                   "set the config (--set model.pt=%d --set model.ph=%d --set model.pw=%d) or "
                   "ingest with --patch %dx%dx%d", dir, s->pt, s->ph, s->pw, m->pt, m->ph, m->pw,
                   s->pt, s->ph, s->pw, m->pt, m->ph, m->pw);
  if (s->channels != m->channels)
    return err_set(TSR_EMISMATCH, "store %s has %d channels but model.channels is %d", dir,
                   s->channels, m->channels);
  // captions: the model's width, at most text_len tokens (a longer one is refused naming it)
  if (m->text_dim > 0 && data_num_captions(tr->data) > 0) {
    for (int64_t i = 0; i < data_num_clips(tr->data); i++) {
      const data_clip *c = data_clip_at(tr->data, i);
      if (c->caption_offset && (c->caption_dim != m->text_dim || c->caption_tokens > m->text_len))
        return err_set(TSR_EMISMATCH, "clip %lld of store %s has a caption of %d tokens of width "
                       "%d; the model takes model.text_dim = %d and at most model.text_len = %d "
                       "tokens", (long long)c->id, dir, c->caption_tokens, c->caption_dim,
                       m->text_dim, m->text_len);
    }
  }
  // Wan has no learned null token: its unconditional input is the empty prompt's embedding
  if (m->text_dim > 0 && m->family == DIT_FAMILY_WAN && tr->tc.caption_dropout > 0 &&
      !tr->tc.null_caption[0] && comm_rank() == 0)
    log_warn("train: train.caption_dropout = %g with model.family = wan and no "
             "train.null_caption: dropped captions get zero rows, which Wan's pipeline never "
             "gives; set train.null_caption to the empty prompt's embedding (docs/train.md)",
             (double)tr->tc.caption_dropout);
  if (m->text_dim > 0 && data_num_captions(tr->data) == 0 && comm_rank() == 0)
    log_warn("train: store %s has no captions: the text model sees only its null token", dir);
  if (m->text_dim == 0 && data_num_captions(tr->data) > 0 && comm_rank() == 0)
    log_warn("train: store %s has %lld captioned clips but model.text_dim = 0: captions are not "
             "used (set model.text_dim = %d and model.text_len >= %d to train on them)", dir,
             (long long)data_num_captions(tr->data), data_caption_dim(tr->data),
             data_caption_max_tokens(tr->data));
  if (m->num_classes > 0 && data_num_labels(tr->data) > m->num_classes)
    return err_set(TSR_EMISMATCH, "store %s has %d labels but model.num_classes is %d: set "
                   "model.num_classes >= %d (or 0 for an unconditional model)", dir,
                   data_num_labels(tr->data), m->num_classes, data_num_labels(tr->data));
  int64_t mem = tr->tc.mem_tokens;
  for (int64_t i = 0; i < data_num_clips(tr->data); i++) {
    const data_clip *c = data_clip_at(tr->data, i);
    if ((c->tokens + ranks - 1) / ranks > mem)  // even split over every rank does not fit
      return err_set(TSR_EINVAL,
                     "clip %lld of store %s has %lld tokens: split over all %d rank%s a chunk "
                     "is %lld tokens, more than train.mem_tokens = %lld: raise "
                     "train.mem_tokens, launch more ranks, or re-ingest with --max-seconds to "
                     "cut long videos", (long long)c->id, dir, (long long)c->tokens, ranks,
                     ranks == 1 ? "" : "s", (long long)((c->tokens + ranks - 1) / ranks),
                     (long long)mem);
  }
  return TSR_OK;
}

// The identity of --init's weights for the launch check: the weights-set checksum the
// checkpoint records (the same file wherever a node keeps it), or "" without --init.
static void init_identity(const char *path, char *out, size_t cap) {
  st_reader *r = NULL;
  const char *sum = NULL;
  out[0] = '\0';
  if (!path) return;
  if (!st_open(&r, path)) sum = st_meta(r, "xxh3_weights");
  snprintf(out, cap, "%s", sum ? sum : path);  // unreadable: its path (the load says why)
  st_close(&r);
  err_clear();
}

// Every rank must train the same model on the same data, the same way: a launch whose ranks
// were given different configs (or stores, or options that shape the run) stops here,
// before any collective of the step, naming what differs. With --steps differing, the rank
// that stopped first would leave the others in a collective until the comm timeout.
tsr_status train_check_ranks_agree(const trainer *tr, const train_options *o) {
  if (comm_size() == 1) return TSR_OK;
  enum { N_WHAT = 5 };
  static const char *const what[N_WHAT] = {
      "configs or stores (--config, --set, --data)", "--init checkpoints",
      "--steps or --resume", "planner options (--plan, --planners, --cost, --gpus-per-node, "
      "--mem-bytes)", "--skip-bad-clips"};
  uint64_t h[N_WHAT];
  char *ini = config_to_ini(&tr->mc, &tr->tc);  // the LoRA and ZeRO settings among its keys
  if (!ini) return err_set(TSR_ENOMEM, "out of memory");
  // FNV-1a of the config text and the store's clip table (its fingerprint)
  h[0] = hash_fnv1a(HASH_FNV1A_INIT, ini, strlen(ini));
  free(ini);
  uint64_t fp = data_fingerprint(tr->data);
  h[0] = hash_fnv1a(h[0], &fp, sizeof fp);
  char init[PATH_MAX];
  init_identity(o->init_ckpt, init, sizeof init);
  h[1] = hash_fnv1a(HASH_FNV1A_INIT, init, strlen(init));
  int64_t run[2] = {o->stop_step, o->resume};
  h[2] = hash_fnv1a(HASH_FNV1A_INIT, run, sizeof run);
  // the planner's inputs as the planner gets them: the cost file's values, not its path
  h[3] = hash_fnv1a(HASH_FNV1A_INIT, &tr->sched.cluster, sizeof tr->sched.cluster);
  for (int k = 0; k < COST_NKEYS; k++) {
    double c = cost_model_get(&tr->sched.cost, k);
    h[3] = hash_fnv1a(h[3], &c, sizeof c);
  }
  int64_t plan[3] = {o->plan_kind, o->planners, o->mem_bytes};
  h[3] = hash_fnv1a(h[3], plan, sizeof plan);
  h[4] = hash_fnv1a(HASH_FNV1A_INIT, &o->skip_bad_clips, sizeof o->skip_bad_clips);
  int64_t v[2 * N_WHAT];  // max and -min of each in one reduction
  for (int k = 0; k < N_WHAT; k++) v[2 * k] = (int64_t)(h[k] >> 1), v[2 * k + 1] = -v[2 * k];
  tsr_status st = comm_allreduce_max_i64(v, 2 * N_WHAT);
  for (int k = 0; !st && k < N_WHAT; k++)
    if (v[2 * k] != -v[2 * k + 1])
      return err_set(TSR_EMISMATCH, "the ranks of this launch were given different %s (rank "
                     "%d's differ from another rank's): launch every rank with the same "
                     "--config, --set, --data, --init, --steps, --resume and planner options",
                     what[k], comm_rank());
  return st;
}

