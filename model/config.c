// model/config.c — [model] and [train] INI configs: one key table drives parsing,
// overrides, range checks and config_to_ini, so a key is declared exactly once.
#include "model/config.h"

#include "core/ini.h"
#include "core/num.h"
#include "sched/cost.h"
#include "sched/placement.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
  dit_config m;
  train_config t;
} both_config;

// KT_PRECISION, KT_FAMILY, KT_CPMODE (and the other KT_ names) are names stored as an enum's value (kernels_dtype,
// int, int); KT_STR a string of at most max bytes with its terminator (lora.targets).
typedef enum { KT_INT, KT_I64, KT_FLOAT, KT_PRECISION, KT_FAMILY, KT_STR, KT_CPMODE,
               KT_LORAFMT, KT_MASK, KT_PLACE } key_type;

// KT_PRECISION values: the name of each kernels_dtype, in enum order.
static const char *const PRECISION_NAMES[] = {"fp32", "bf16"};
#define NPRECISIONS ((int)(sizeof PRECISION_NAMES / sizeof PRECISION_NAMES[0]))
// KT_FAMILY values: the name of each DIT_FAMILY_*, in enum order.
static const char *const FAMILY_NAMES[] = {"tessera", "wan"};
#define NFAMILIES ((int)(sizeof FAMILY_NAMES / sizeof FAMILY_NAMES[0]))

// KT_LORAFMT values: the layouts of a LoRA file, in model/io/lora_layout.h's enum order.
static const char *const LORAFMT_NAMES[] = {"diffusers", "wan", "kohya"};
#define NLORAFMTS ((int)(sizeof LORAFMT_NAMES / sizeof LORAFMT_NAMES[0]))

// KT_MASK values: the name of each KERNELS_MASK_*, in enum order.
static const char *const MASK_NAMES[] = {"full", "block_causal", "window"};
#define NMASKS ((int)(sizeof MASK_NAMES / sizeof MASK_NAMES[0]))

const char *config_mask_name(int k) { return k >= 0 && k < NMASKS ? MASK_NAMES[k] : "?"; }

kernels_mask config_mask(const dit_config *m) {
  return (kernels_mask){.kind = m->attn_mask, .chunk = m->mask_chunk, .window = m->mask_window,
                        .wt = m->mask_wt, .wh = m->mask_wh, .ww = m->mask_ww,
                        .tile_t = m->mask_tile_t, .tile_h = m->mask_tile_h,
                        .tile_w = m->mask_tile_w};
}

cost_mask config_cost_mask(const dit_config *m, int64_t rows, int64_t cols) {
  _Static_assert((int)COST_MASK_BLOCK_CAUSAL == (int)KERNELS_MASK_BLOCK_CAUSAL &&
                     (int)COST_MASK_WINDOW == (int)KERNELS_MASK_WINDOW,
                 "the planner's mask kinds are the kernels'");
  return (cost_mask){.kind = m->attn_mask, .chunk = m->mask_chunk, .window = m->mask_window,
                     .wt = m->mask_wt, .wh = m->mask_wh, .ww = m->mask_ww,
                     .tile_t = m->mask_tile_t, .tile_h = m->mask_tile_h,
                     .tile_w = m->mask_tile_w, .rows = rows, .cols = cols};
}

// KT_CPMODE values: the name of each TRAIN_CP_*, in enum order.
static const char *const CPMODE_NAMES[] = {"auto", "ring", "ulysses", "hybrid"};
#define NCPMODES ((int)(sizeof CPMODE_NAMES / sizeof CPMODE_NAMES[0]))

const char *config_cp_mode_name(int m) { return m >= 0 && m < NCPMODES ? CPMODE_NAMES[m] : "?"; }

// KT_PLACE values: the name of each TRAIN_PLACE_*, in enum order.
static const char *const PLACE_NAMES[] = {"contiguous", "blockwise", "zigzag", "balanced",
                                          "greedy", "metis"};
#define NPLACES ((int)(sizeof PLACE_NAMES / sizeof PLACE_NAMES[0]))

const char *config_placement_name(int p) { return p >= 0 && p < NPLACES ? PLACE_NAMES[p] : "?"; }

// contiguous keeps the even price the trainer had before the key (its plans unchanged)
int config_cost_place(int place) {
  return place == TRAIN_PLACE_CONTIGUOUS ? COST_PLACE_EVEN : COST_PLACE_BLOCKWISE;
}

// a pinned kind's name is its place_kind's (sched/placement.h)
int config_cost_pin(int place) {
  return place > TRAIN_PLACE_BLOCKWISE && place < NPLACES ? place_kind_parse(PLACE_NAMES[place]) + 1
                                                          : 0;
}

int config_cost_modes(int cp_mode) {
  return cp_mode == TRAIN_CP_RING      ? COST_MODES_RING
         : cp_mode == TRAIN_CP_ULYSSES ? COST_MODES_ULYSSES
         : cp_mode == TRAIN_CP_HYBRID  ? COST_MODES_HYBRID
                                       : COST_MODES_AUTO;
}

const char *config_precision_name(kernels_dtype p) {
  return (int)p >= 0 && (int)p < NPRECISIONS ? PRECISION_NAMES[p] : "?";
}
const char *config_family_name(int f) { return f >= 0 && f < NFAMILIES ? FAMILY_NAMES[f] : "?"; }

// The names of a name-valued key's values (*n of them), or NULL for a number.
static const char *const *value_names(key_type t, int *n) {
  if (t == KT_PRECISION) return *n = NPRECISIONS, PRECISION_NAMES;
  if (t == KT_FAMILY) return *n = NFAMILIES, FAMILY_NAMES;
  if (t == KT_CPMODE) return *n = NCPMODES, CPMODE_NAMES;
  if (t == KT_LORAFMT) return *n = NLORAFMTS, LORAFMT_NAMES;
  if (t == KT_MASK) return *n = NMASKS, MASK_NAMES;
  if (t == KT_PLACE) return *n = NPLACES, PLACE_NAMES;
  return *n = 0, NULL;
}

tsr_status backend_for_precision(const backend_choice *c, kernels_dtype precision,
                                 const kernels_backend **kb) {
  *kb = NULL;
  if (!c) return err_set(TSR_EINVAL, "no compute backend was given (a tool chooses it: --backend)");
  if ((int)precision < 0 || (int)precision >= NPRECISIONS || !c->table[precision])
    return err_set(TSR_EINVAL, "backend %s has no %s kernels: set train.precision=%s, or choose "
                   "another --backend", c->device, config_precision_name(precision),
                   c->table[KERNELS_F32] ? "fp32" : "bf16");
  *kb = c->table[precision];
  return TSR_OK;
}

typedef struct {
  const char *section, *name;
  key_type type;
  size_t offset;  // into both_config
  double min, max;
  const char *def;   // the default, as a file would write it (config_defaults parses it)
  const char *help;
  int late;       // 1: added after checkpoints existed; a checkpoint config without it has
                  // its default (config_from_ini), which is what those checkpoints ran with
} config_key;

#define MK(n, ty, lo, hi, def, h) {"model", #n, ty, offsetof(both_config, m.n), lo, hi, def, h, 0}
#define TK(n, ty, lo, hi, def, h) {"train", #n, ty, offsetof(both_config, t.n), lo, hi, def, h, 0}
#define MK_LATE(n, ty, lo, hi, def, h) {"model", #n, ty, offsetof(both_config, m.n), lo, hi, def, h, 1}
#define TK_LATE(n, ty, lo, hi, def, h) {"train", #n, ty, offsetof(both_config, t.n), lo, hi, def, h, 1}
#define LK_LATE(n, ty, lo, hi, def, h) {"lora", #n, ty, offsetof(both_config, t.lora_##n), lo, hi, def, h, 1}
static const config_key KEYS[] = {
    MK(hidden, KT_INT, 2, 1 << 16, "64", "hidden size D"),
    MK(depth, KT_INT, 1, 1024, "2", "number of DiT blocks"),
    MK(heads, KT_INT, 1, 1024, "4", "attention heads (hidden / heads even)"),
    MK(mlp_ratio, KT_INT, 1, 64, "4", "MLP hidden = mlp_ratio * hidden"),
    MK(pt, KT_INT, 1, 64, "2", "tubelet frames"),
    MK(ph, KT_INT, 1, 1024, "16", "tubelet height"),
    MK(pw, KT_INT, 1, 1024, "16", "tubelet width"),
    MK(channels, KT_INT, 1, 1024, "3", "values per pixel"),
    MK(freq_dim, KT_INT, 2, 1 << 16, "256", "sinusoidal timestep embedding size (even)"),
    MK(num_classes, KT_INT, 0, 1 << 24, "0", "class labels (0: unconditional)"),
    MK(rope_theta, KT_FLOAT, 1.0, 1e9, "10000", "RoPE base"),
    MK(ln_eps, KT_FLOAT, 1e-12, 1.0, "1e-6", "LayerNorm epsilon"),
    MK(rms_eps, KT_FLOAT, 1e-12, 1.0, "1e-6", "QK RMSNorm epsilon"),
    MK(recompute, KT_INT, 0, 2, "0", "backward recomputes: 0 nothing, 1 whole blocks, 2 the cheap token-local layers"),
    MK_LATE(text_dim, KT_INT, 0, 1 << 16, "0", "caption embedding width (0: no captions)"),
    MK_LATE(text_len, KT_INT, 0, 1 << 16, "0", "most caption tokens of a clip"),
    MK_LATE(family, KT_FAMILY, 0, NFAMILIES - 1, "tessera", "the network: tessera or wan"),
    MK_LATE(ffn_dim, KT_INT, 0, 1 << 20, "0", "MLP hidden width (0: mlp_ratio * hidden)"),
    MK_LATE(text_pad, KT_INT, 0, 1, "0", "1: captions padded with zero rows to text_len (Wan)"),
    MK_LATE(attn_mask, KT_MASK, 0, NMASKS - 1, "full", "attention mask: full, block_causal or window"),
    MK_LATE(mask_chunk, KT_INT, 1, 1 << 20, "1", "block_causal: latent frames per chunk"),
    MK_LATE(mask_window, KT_INT, 0, 1 << 20, "0", "block_causal: chunks back besides its own (0: all)"),
    MK_LATE(mask_wt, KT_INT, 0, 1 << 20, "1", "window: radius in tiles along time"),
    MK_LATE(mask_wh, KT_INT, 0, 1 << 20, "1", "window: radius in tiles along rows"),
    MK_LATE(mask_ww, KT_INT, 0, 1 << 20, "1", "window: radius in tiles along columns"),
    MK_LATE(mask_tile_t, KT_INT, 1, 1 << 20, "1", "window: a tile's latent frames"),
    MK_LATE(mask_tile_h, KT_INT, 1, 1 << 20, "1", "window: a tile's token rows"),
    MK_LATE(mask_tile_w, KT_INT, 1, 1 << 20, "1", "window: a tile's token columns"),
    TK(global_batch, KT_I64, 1, SCHED_MAX_BATCH, "8", "clips per step"),
    TK(steps, KT_I64, 1, 1e15, "2000", "total steps of the schedule"),
    TK(warmup, KT_I64, 0, 1e15, "100", "linear warmup steps"),
    TK_LATE(lr_schedule_steps, KT_I64, 0, 1e15, "0",
            "steps the LR schedule spans (0: train.steps, or a fresh run's --steps)"),
    TK(lr, KT_FLOAT, 0.0, 10.0, "1e-3", "peak learning rate"),
    TK(min_lr, KT_FLOAT, 0.0, 10.0, "1e-4", "final learning rate"),
    TK(beta1, KT_FLOAT, 0.0, 0.999999, "0.9", "Adam beta1"),
    TK(beta2, KT_FLOAT, 0.0, 0.999999, "0.99", "Adam beta2"),
    // > 0: with 0 a gradient of exactly 0 gives 0 / 0 and the first step is NaN; below
    // 1e-20 a gradient whose square underflows divides by almost nothing
    TK(adam_eps, KT_FLOAT, 1e-20, 1.0, "1e-8", "Adam epsilon (0 makes the first step NaN)"),
    TK(weight_decay, KT_FLOAT, 0.0, 10.0, "0", "AdamW weight decay"),
    TK(grad_clip, KT_FLOAT, -1.0, 1e9, "1", "max gradient norm (<= 0: off)"),
    TK(ema_decay, KT_FLOAT, 0.0, 1.0, "0.999", "EMA decay"),
    TK(class_dropout, KT_FLOAT, 0.0, 1.0, "0.1", "label dropout probability"),
    TK_LATE(caption_dropout, KT_FLOAT, 0.0, 1.0, "0.1", "caption dropout probability"),
    TK_LATE(null_caption, KT_STR, 0, CONFIG_NULL_CAPTION_MAX, "",
            "caption file of dropped and absent captions, e.g. the empty prompt's (empty: none)"),
    TK(t_logit_mean, KT_FLOAT, -10.0, 10.0, "0", "logit-normal mean of t"),
    TK(t_logit_std, KT_FLOAT, 0.0, 10.0, "1", "logit-normal std of t"),
    TK(t_shift_tokens, KT_I64, 0, 1e15, "1024", "length shift reference tokens (0: off)"),
    TK_LATE(t_min, KT_FLOAT, 0.0, 1.0, "0", "lowest noise level drawn (flow time; 0: all)"),
    TK_LATE(t_max, KT_FLOAT, 0.0, 1.0, "1", "highest noise level drawn (flow time; 1: all)"),
    TK_LATE(noise_per_chunk, KT_INT, 0, 1, "0", "1: each block_causal chunk of a clip draws its own noise level (diffusion forcing)"),
    TK(mem_tokens, KT_I64, 0, (double)SCHED_MAX_TOKENS, "32768",
       "most tokens per rank per microbatch (0: the most that fit the memory)"),
    TK(seed, KT_I64, 0, 9.2e18, "0", "random seed"),
    TK_LATE(zero, KT_INT, 0, 3, "0", "ZeRO stage: 0 none, 1 optimizer state, masters and EMA sharded over the ranks, 2 also gradients, 3 also the working weights (gathered block by block)"),
    TK(ckpt_every, KT_INT, 1, 1e9, "200", "steps between checkpoints"),
    TK(ckpt_keep, KT_INT, 1, 1e6, "3", "checkpoints kept"),
    TK(log_every, KT_INT, 1, 1e9, "10", "steps between metric lines"),
    TK_LATE(tensorboard, KT_INT, 0, 1, "0", "1: the metrics also as TensorBoard event files in RUN/tensorboard/"),
    TK_LATE(precision, KT_PRECISION, 0, NPRECISIONS - 1, "fp32", "activation dtype: fp32 or bf16"),
    TK_LATE(val_clips, KT_I64, 0, SCHED_MAX_BATCH, "0", "clips held out for validation (0: none)"),
    TK_LATE(val_every, KT_INT, 1, 1e9, "100", "steps between validations"),
    TK_LATE(sample_every, KT_INT, 0, 1e9, "0", "steps between sample videos (0: none)"),
    TK_LATE(sample_steps, KT_INT, 1, 100000, "32", "Euler steps of the samples"),
    TK_LATE(sample_cfg, KT_FLOAT, 0.0, 100.0, "1", "guidance scale of the samples (1: none)"),
    TK_LATE(sample_prompts, KT_STR, 0, CONFIG_SAMPLE_PROMPTS_MAX, "",
            "text file of the samples' prompts, one a line (empty: labels or seeds)"),
    TK_LATE(act_bytes_token, KT_I64, 0, 1e12, "0",
            "measured device bytes per token of a step (0: the memory model's own count)"),
    TK_LATE(cp_mode, KT_CPMODE, 0, NCPMODES - 1, "auto",
            "how a CP group splits attention: auto (the planner picks per microbatch), ring, ulysses, hybrid"),
    TK_LATE(ulysses_chunks, KT_INT, 1, 64, "2",
            "head chunks a Ulysses group pipelines its all-to-alls over, each chunk's transfer hidden behind another's attention (1: blocking)"),
    TK_LATE(placement, KT_PLACE, 0, NPLACES - 1, "contiguous",
            "how a ring group holds a masked clip: contiguous (chunks), blockwise (the planner's choice per clip, sched/placement.h) or one kind: zigzag, balanced, greedy, metis (builds with libmetis)"),
    LK_LATE(rank, KT_INT, 0, CONFIG_LORA_RANK_MAX, "0", "LoRA rank r (0: off, the whole model trains)"),
    LK_LATE(alpha, KT_FLOAT, CONFIG_LORA_ALPHA_MIN, CONFIG_LORA_ALPHA_MAX, "8",
            "LoRA alpha: the adapters' scale is alpha / rank"),
    LK_LATE(format, KT_LORAFMT, 0, NLORAFMTS - 1, "diffusers",
            "layout of the run's adapter files: diffusers, wan or kohya (ComfyUI's keys)"),
    LK_LATE(targets, KT_STR, 0, CONFIG_LORA_TARGETS_MAX, "to_q,to_k,to_v,to_out.0",
            "LoRA target modules, comma-separated PEFT names (to_q,to_k,to_v,to_out.0)"),
};
#define NKEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

int config_key_doc_at(int i, config_key_doc *out) {
  if (i < 0 || i >= NKEYS) return 0;
  *out = (config_key_doc){KEYS[i].section, KEYS[i].name, KEYS[i].def, KEYS[i].help};
  return 1;
}

static const config_key *find_key(const char *section, const char *name) {
  for (int i = 0; i < NKEYS; i++)
    if (!strcmp(KEYS[i].section, section) && !strcmp(KEYS[i].name, name)) return &KEYS[i];
  return NULL;
}

// Parses `value` into the key's field; `where` names the file and line (or the --set)
// for messages.
static tsr_status set_key(both_config *c, const config_key *k, const char *value,
                          const char *where) {
  char *f = (char *)c + k->offset;
  if (k->type == KT_STR) {
    if (strlen(value) >= (size_t)k->max)
      return err_set(TSR_EINVAL, "%s: %s.%s is %zu bytes, at most %d (%s)", where, k->section,
                     k->name, strlen(value), (int)k->max - 1, k->help);
    snprintf(f, (size_t)k->max, "%s", value);
    return TSR_OK;
  }
  int nn;
  const char *const *names = value_names(k->type, &nn);
  kernels_dtype kd;
  if (k->type == KT_PRECISION && kernels_dtype_parse(value, &kd, NULL)) {
    *(kernels_dtype *)f = kd;  // fp32, float32, f32, bf16, bfloat16: one voice with the CLI
    return TSR_OK;
  }
  if (names) {
    for (int i = 0; i < nn; i++)
      if (!strcasecmp(value, names[i])) {
        if (k->type == KT_PRECISION) *(kernels_dtype *)f = (kernels_dtype)i;
        else *(int *)f = i;
        return TSR_OK;
      }
    char list[128] = "";
    for (int i = 0; i < nn; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
               i == 0 ? "" : i + 1 == nn ? " or " : ", ", names[i]);
    return err_set(TSR_EINVAL, "%s: %s.%s = '%s': use %s (%s)", where, k->section, k->name,
                   value, list, k->help);
  }
  double d = 0;
  int64_t v = 0;
  num_result r = k->type == KT_FLOAT ? num_parse_double(value, k->min, k->max, &d)
                                     : num_parse_i64(value, (int64_t)k->min, (int64_t)k->max, &v);
  if (r == NUM_SYNTAX)
    return err_set(TSR_EINVAL, "%s: %s.%s = '%s' is not a %s", where, k->section, k->name, value,
                   k->type == KT_FLOAT ? "number" : "whole number");
  if (r == NUM_RANGE)
    return err_set(TSR_EINVAL, "%s: %s.%s = %s is out of range [%g, %g] (%s)", where, k->section,
                   k->name, value, k->min, k->max, k->help);
  if (k->type == KT_FLOAT) *(float *)f = (float)d;
  else if (k->type == KT_INT) *(int *)f = (int)v;
  else *(int64_t *)f = v;
  return TSR_OK;
}

void config_defaults(dit_config *m, train_config *t) {
  both_config c;
  memset(&c, 0, sizeof c);  // shard_ranks and padding: not keys
  for (int i = 0; i < NKEYS; i++)
    if (set_key(&c, &KEYS[i], KEYS[i].def, "default"))  // tests/model/test_config.c: never
      abort();
  *m = c.m, *t = c.t;
}

// Where each key's value came from: 0 the defaults, > 0 that line of the file, -1 - i
// override i.
typedef struct {
  int from[NKEYS];
} key_origin;

typedef struct {
  both_config *c;
  const char *path;
  key_origin *o;
} parse_ctx;

static tsr_status config_key_fn(void *user, const char *section, const char *name,
                                const char *value, int line) {
  parse_ctx *p = user;
  if (!*section)
    return err_set(TSR_EINVAL, "%s:%d: key '%s' before any [model], [train] or [lora] section", p->path,
                   line, name);
  const config_key *k = find_key(section, name);
  if (!k)
    return err_set(TSR_EINVAL, "%s:%d: unknown key [%s] %s (docs/config.md lists the keys)",
                   p->path, line, section, name);
  int i = (int)(k - KEYS);
  if (p->o->from[i])
    return err_set(TSR_EINVAL, "%s:%d: %s.%s given twice (lines %d and %d); keep one", p->path,
                   line, section, name, p->o->from[i], line);
  char where[4200];
  snprintf(where, sizeof where, "%s:%d", p->path, line);
  tsr_status st = set_key(p->c, k, value, where);
  if (!st) p->o->from[i] = line;
  return st;
}

static tsr_status parse_ini(both_config *c, const char *path, const char *text, key_origin *o) {
  parse_ctx p = {c, path, o};
  return ini_read(path, text, config_key_fn, &p);
}

static tsr_status apply_override(both_config *c, const char *ov, int i, key_origin *o) {
  const char *dot = strchr(ov, '.'), *eq = strchr(ov, '=');
  if (!dot || !eq || dot > eq)
    return err_set(TSR_EINVAL, "--set '%s': expected section.key=value (e.g. model.hidden=64)", ov);
  char section[32], name[64];
  size_t ls = (size_t)(dot - ov), ln = (size_t)(eq - dot - 1);
  if (ls >= sizeof section || ln >= sizeof name)
    return err_set(TSR_EINVAL, "--set '%s': unknown key", ov);
  memcpy(section, ov, ls), section[ls] = 0;
  memcpy(name, dot + 1, ln), name[ln] = 0;
  const config_key *k = find_key(section, name);
  if (!k) return err_set(TSR_EINVAL, "--set '%s': unknown key %s.%s", ov, section, name);
  // A key given by several --set takes the last, as later options override earlier ones:
  // scripts keep a base list of --set and append the one a run changes
  // (tests/dist/train_ranks.sh). Unlike a repeat inside one file, that is not a mistake.
  tsr_status st = set_key(c, k, eq + 1, "--set");
  if (!st) o->from[k - KEYS] = -1 - i;
  return st;
}

// Keys a config file must give (or --set): the model's shape and tubelet decide what is
// trained and which stores fit it, so a default there would silently train another
// model than the one meant. The rest have the tiny preset's values as defaults.
static const char *const REQUIRED[] = {"model.hidden", "model.depth", "model.heads", "model.pt",
                                       "model.ph", "model.pw", "model.channels"};

static int key_is(const config_key *k, const char *full) {
  size_t n = strlen(k->section);
  return !strncmp(full, k->section, n) && full[n] == '.' && !strcmp(full + n + 1, k->name);
}

// "model.x, train.y" of the keys with from == 0 (required ones only if `required`), or
// NULL if none; *oom set when the string cannot be allocated.
static char *key_list(const key_origin *o, int required, int *oom) {
  size_t cap = 1, len = 0;
  for (int i = 0; i < NKEYS; i++) cap += strlen(KEYS[i].section) + strlen(KEYS[i].name) + 3;
  char *s = malloc(cap);
  if (!s) return *oom = 1, NULL;
  s[0] = '\0';
  for (int i = 0; i < NKEYS; i++) {
    if (o->from[i]) continue;
    int req = 0;
    for (size_t r = 0; r < sizeof REQUIRED / sizeof REQUIRED[0]; r++) req |= key_is(&KEYS[i], REQUIRED[r]);
    if (required && !req) continue;
    len += (size_t)snprintf(s + len, cap - len, "%s%s.%s", len ? ", " : "", KEYS[i].section,
                            KEYS[i].name);
  }
  if (!len) free(s), s = NULL;
  return s;
}

tsr_status config_load(const char *path, char *const *overrides, int n_overrides, dit_config *m,
                       train_config *t, char **defaults_used) {
  if (defaults_used) *defaults_used = NULL;
  both_config c;
  key_origin o = {{0}};
  config_defaults(&c.m, &c.t);
  tsr_status st = TSR_OK;
  if (path && (st = parse_ini(&c, path, NULL, &o)))  // the message names file and line
    return st == TSR_EIO ? err_wrap(st, "config file ") : st;
  for (int i = 0; !st && i < n_overrides; i++) st = apply_override(&c, overrides[i], i, &o);
  int oom = 0;
  if (!st && path) {
    char *missing = key_list(&o, 1, &oom);
    if (missing)
      st = err_set(TSR_EINVAL, "missing %s: the model's shape and tubelet must be given "
                   "(configs/model/*.conf, or --set)", missing);
    free(missing);
  }
  if (!st) st = config_validate(&c.m, &c.t);
  char *defaults = NULL;
  if (!st && defaults_used && !(defaults = key_list(&o, 0, &oom)) && oom)
    st = err_set(TSR_ENOMEM, "config: out of memory");
  if (!st && oom) st = err_set(TSR_ENOMEM, "config: out of memory");
  if (st) {
    free(defaults);
    return path ? err_wrap(st, "config %s: ", path) : st;
  }
  *m = c.m, *t = c.t;
  if (defaults_used) *defaults_used = defaults;
  return TSR_OK;
}

int config_list_count(const char *list) {
  if (!list || !*list) return 0;
  int n = 1;
  for (const char *p = list; (p = strchr(p, ',')); p++) n++;
  return n;
}

tsr_status config_validate(const dit_config *m, const train_config *t) {
  both_config c = {*m, *t};
  char buf[64];
  for (int i = 0; i < NKEYS; i++) {  // ranges (values may come from code, not a file)
    const config_key *k = &KEYS[i];
    const char *f = (const char *)&c + k->offset;
    if (k->type == KT_STR) continue;  // its length is bounded by the field
    double d = k->type == KT_FLOAT       ? *(const float *)f
             : k->type == KT_INT || k->type == KT_FAMILY || k->type == KT_CPMODE ||
                       k->type == KT_LORAFMT || k->type == KT_MASK || k->type == KT_PLACE
                 ? *(const int *)f
             : k->type == KT_PRECISION   ? (double)*(const kernels_dtype *)f
                                         : (double)*(const int64_t *)f;
    // a float key's bounds as floats: the value a file writes as 1e-20 is the float nearest
    // to it, which may lie just below the double 1e-20
    double lo = k->type == KT_FLOAT ? (float)k->min : k->min;
    double hi = k->type == KT_FLOAT ? (float)k->max : k->max;
    if (!(d >= lo && d <= hi)) {
      snprintf(buf, sizeof buf, "%g", d);
      return err_set(TSR_EINVAL, "%s.%s = %s is out of range [%g, %g] (%s)", k->section, k->name,
                     buf, k->min, k->max, k->help);
    }
  }
  if (m->hidden % m->heads)
    return err_set(TSR_EINVAL, "model.hidden = %d is not divisible by model.heads = %d", m->hidden,
                   m->heads);
  int dh = m->hidden / m->heads;
  if (dh % 2 || dh < 6)
    return err_set(TSR_EINVAL,
                   "model.hidden / model.heads = %d: the head dimension must be even and >= 6 "
                   "(3D RoPE splits it between time, height and width)", dh);
  if (m->freq_dim % 2)
    return err_set(TSR_EINVAL, "model.freq_dim = %d must be even", m->freq_dim);
  if (m->text_dim > 0 && m->text_len < 1)
    return err_set(TSR_EINVAL, "model.text_dim = %d needs model.text_len >= 1 (the most caption "
                   "tokens of a clip)", m->text_dim);
  if (m->text_pad && m->text_dim < 1)
    return err_set(TSR_EINVAL, "model.text_pad = 1 pads captions: it needs model.text_dim > 0");
  if (m->family == DIT_FAMILY_WAN && (m->text_dim < 1 || m->num_classes))
    return err_set(TSR_EINVAL, "model.family = wan: Wan is conditioned on captions only (set "
                   "model.text_dim > 0 and model.num_classes = 0; they are %d and %d)",
                   m->text_dim, m->num_classes);
  if (t->zero >= 2 && t->sample_every > 0)
    return err_set(TSR_EINVAL, "train.zero = %d with train.sample_every = %d: stages 2 and 3 keep "
                   "no whole gradient buffer to put the EMA together in for samples; set "
                   "train.sample_every = 0 (`tessera sample` reads the checkpoints) or "
                   "train.zero = 1", t->zero, t->sample_every);
  if (t->sample_prompts[0] && m->text_dim < 1)
    return err_set(TSR_EINVAL, "train.sample_prompts = %s: the model has no captions "
                   "(model.text_dim = 0): prompts need a caption model", t->sample_prompts);
  if (t->zero > 2 && t->lora_rank > 0)
    return err_set(TSR_EINVAL, "train.zero = %d with lora.rank = %d: a LoRA run shards the "
                   "adapters' optimizer state (stages 1 and 2); its frozen base stays whole; set "
                   "train.zero = 1 or 2", t->zero, t->lora_rank);
  if (t->lora_rank > 0 && !t->lora_targets[strspn(t->lora_targets, " ,")])
    return err_set(TSR_EINVAL, "lora.rank = %d needs lora.targets (PEFT module names, e.g. "
                   "to_q,to_k,to_v,to_out.0)", t->lora_rank);
  if (t->min_lr > t->lr)
    return err_set(TSR_EINVAL, "train.min_lr = %g is above train.lr = %g", t->min_lr, t->lr);
  if (!(t->t_min < t->t_max))
    return err_set(TSR_EINVAL, "train.t_min = %g is not below train.t_max = %g (the range of "
                   "noise levels drawn)", t->t_min, t->t_max);
  if (t->noise_per_chunk && m->attn_mask != KERNELS_MASK_BLOCK_CAUSAL)
    return err_set(TSR_EINVAL, "train.noise_per_chunk = 1 draws a noise level per chunk of "
                   "model.mask_chunk frames, which needs model.attn_mask = block_causal (it is %s): "
                   "set the mask or train.noise_per_chunk = 0", config_mask_name(m->attn_mask));
  if (t->placement == TRAIN_PLACE_METIS && PLACE_NKINDS <= PLACE_METIS)
    return err_set(TSR_EINVAL, "train.placement = metis: this build has " PLACE_METIS_MISSING
                   ", or pin zigzag, balanced or greedy, or let blockwise choose");
  if (t->warmup > t->steps)
    return err_set(TSR_EINVAL, "train.warmup = %lld is above train.steps = %lld",
                   (long long)t->warmup, (long long)t->steps);
  // AdamW's decay multiplies every decayed weight by 1 - lr * weight_decay each step: at 1
  // or more the weights flip sign (or vanish) every step and grow without bound
  if ((double)t->lr * t->weight_decay >= 1.0)
    return err_set(TSR_EINVAL, "train.lr * train.weight_decay = %g * %g = %g: the decay would "
                   "multiply the weights by %g each step (at 1 or more they flip sign and "
                   "grow); keep the product well below 1", t->lr, t->weight_decay,
                   (double)t->lr * t->weight_decay, 1.0 - (double)t->lr * t->weight_decay);
  return TSR_OK;
}

char *config_to_ini(const dit_config *m, const train_config *t) {
  both_config c = {*m, *t};
  size_t cap = 4096, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  const char *section = "";
  for (int i = 0; i < NKEYS; i++) {
    const config_key *k = &KEYS[i];
    const char *f = (const char *)&c + k->offset;
    char line[CONFIG_LORA_TARGETS_MAX + 160];  // a name and its longest value
    int n = 0, nv;
    const char *const *names = value_names(k->type, &nv);  // NULL: a number or a string
    if (strcmp(section, k->section))
      n += snprintf(line, sizeof line, "%s[%s]\n", len ? "\n" : "", k->section);
    section = k->section;
    if (k->type == KT_FLOAT) {  // the shortest %g that reads back as the same float
      float v = *(const float *)f;   // (%.9g always does; 2e-3, not 0.00200000009)
      int prec = 6;
      char num[32];
      do snprintf(num, sizeof num, "%.*g", prec, v);
      while (strtof(num, NULL) != v && ++prec < 9);
      if (strtof(num, NULL) != v) snprintf(num, sizeof num, "%.9g", v);
      n += snprintf(line + n, sizeof line - n, "%s = %s\n", k->name, num);
    }
    else if (k->type == KT_INT)
      n += snprintf(line + n, sizeof line - n, "%s = %d\n", k->name, *(const int *)f);
    else if (names) {  // an enum's value, written as its name
      int v = k->type == KT_PRECISION ? (int)*(const kernels_dtype *)f : *(const int *)f;
      n += snprintf(line + n, sizeof line - n, "%s = %s\n", k->name,
                    v >= 0 && v < nv ? names[v] : "?");
    } else if (k->type == KT_STR)
      n += snprintf(line + n, sizeof line - n, "%s = %s\n", k->name, f);
    else
      n += snprintf(line + n, sizeof line - n, "%s = %lld\n", k->name, (long long)*(const int64_t *)f);
    if (len + (size_t)n + 1 > cap) {
      char *g = realloc(s, cap *= 2);
      if (!g) return free(s), NULL;
      s = g;
    }
    memcpy(s + len, line, (size_t)n + 1);
    len += (size_t)n;
  }
  return s;
}

tsr_status config_from_ini(const char *text, dit_config *m, train_config *t) {
  both_config c;
  key_origin o = {{0}};
  config_defaults(&c.m, &c.t);
  tsr_status st = parse_ini(&c, "checkpoint config", text, &o);
  for (int i = 0; !st && i < NKEYS; i++)  // config_to_ini wrote them all
    // ... but the late keys only since they exist: an older checkpoint ran with their
    // defaults (fp32, no captions, no validation or samples)
    if (!o.from[i] && !KEYS[i].late)
      st = err_set(TSR_EFORMAT, "checkpoint config: key %s.%s missing (config_to_ini writes "
                   "every key: a damaged checkpoint, or one from another version)",
                   KEYS[i].section, KEYS[i].name);
  if (!st) st = config_validate(&c.m, &c.t);
  if (st) return st;
  *m = c.m, *t = c.t;
  return TSR_OK;
}
