// model/train/run_config.h — RUN/config.ini: what a run was started with, readable by a
// person and by `tessera train --resume RUN` (docs/train.md "Resume from the run alone").
//
// The file holds a [run] section (the store, the config file and the --set overrides as
// given, --steps, --plan, --cost, --skip-bad-clips) and the effective config as
// config_to_ini writes it ([model], [train], [lora]: every key with its value). Rank 0
// writes it atomically at every start, once the inputs are checked; a resume appends its
// own overrides to the list, so the file always describes the run as it now continues.
#ifndef TESSERA_MODEL_TRAIN_RUN_CONFIG_H
#define TESSERA_MODEL_TRAIN_RUN_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "model/config.h"
#include "model/train/options.h"

#define RUN_CONFIG_NAME "config.ini"

// RUN/config.ini as read back. sets: (n_sets) malloc'd strings, "section.key=value".
typedef struct {
  int found;                   // the file exists (0: a run from before it, or no RUN)
  char data[PATH_MAX];         // the store
  char config[PATH_MAX];       // the --config file ("" if none was given)
  char cost[PATH_MAX];         // --cost ("" if none)
  int64_t steps;               // --steps (0: train.steps)
  int plan_kind;               // TRAIN_PLAN_*
  int skip_bad_clips;
  char **sets;
  int n_sets;
  dit_config mc;               // the effective config
  train_config tc;
} run_config;

// Reads RUN/config.ini into *rc (rc->found = 0 and TSR_OK when it does not exist); a file
// that does not parse is refused naming it and its line.
tsr_status run_config_read(const char *run_dir, run_config *rc);
void run_config_free(run_config *rc);

// The options and config of a run: a --resume without --config takes the store, --steps,
// --plan, --cost, --skip-bad-clips and the config from RUN/config.ini (options given now
// win) and applies this start's --set on top, refusing one that would change what the run
// trains (TSR_EMISMATCH naming the key); otherwise the config is --config with --set, as
// config_load. eff: *o with the run's values filled in (its strings point into rc or o);
// rc: RUN/config.ini as read (found = 0 when not read); defaults: as config_load's.
tsr_status run_config_resolve(const train_options *o, train_options *eff, run_config *rc,
                              dit_config *m, train_config *t, char **defaults);

// Writes RUN/config.ini (rank 0): the effective options *o (data, --steps, ...), the
// overrides of the run's earlier starts (prev, may be NULL or not found) followed by this
// start's, and the config (m, t) as loaded (train.mem_tokens = 0 stays 0: each start
// derives it; mem_tokens_now says what this one took).
tsr_status run_config_write(const char *run_dir, const train_options *o, const run_config *prev,
                            const dit_config *m, const train_config *t, int64_t mem_tokens_now);

// A fresh run's schedule: --steps N (o->stop_step) sets train.lr_schedule_steps = N unless
// the config or a --set gives lr_schedule_steps, or a --set gives train.steps (the
// schedule then spans those). 1 if it set it.
int run_config_schedule(const train_options *o, train_config *t);

// The text run_config_write writes, into f (a dry run prints it).
tsr_status run_config_print(FILE *f, const train_options *o, const run_config *prev,
                            const dit_config *m, const train_config *t, int64_t mem_tokens_now);

// 1 if a resume may change key ("train.log_every") without changing what the run trains:
// the cadences (checkpoints, logs, validation, samples) and what shapes plans and memory.
int run_config_key_safe(const char *key);
// The first key of config (m1, t1) that differs from (m0, t0) and that a resume may not
// change: 1 and key ("train.lr"), was and now (its two values, n bytes each); 0 if none.
int run_config_unsafe_diff(const dit_config *m0, const train_config *t0, const dit_config *m1,
                           const train_config *t1, char *key, char *was, char *now, size_t n);

#endif
