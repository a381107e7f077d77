// model/train/options.h — what the caller of a training run chooses: config, store, run
// directory, resume or fine-tuning, plan, devices, and how samples are written.
#ifndef TESSERA_MODEL_TRAIN_OPTIONS_H
#define TESSERA_MODEL_TRAIN_OPTIONS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/err.h"
#include "model/sample/sample.h"

// train.sample_prompts embedded: prompt i's text and its caption embedding, as `tessera
// sample --caption` reads one (store/latent_file.h caption_file_read). Freed by
// train_prompts_free (model/train/samples.h).
typedef struct {
  int n;
  char **text;     // (n) UTF-8
  float **emb;     // (n) each (tokens[i], model.text_dim)
  int *tokens;     // (n)
} train_prompts;

typedef struct {
  const char *config_path;       // config file; NULL with resume: RUN/config.ini's
                                 // (model/train/run_config.h), as data_dir, stop_step, ...
  char *const *overrides;        // "section.key=value" (n_overrides)
  int n_overrides;
  const char *data_dir;          // token store
  const char *run_dir;           // RUN: checkpoints and metrics.jsonl
  int64_t stop_step;             // stop once this many steps are done (0: train.steps)
  int resume;                    // continue from RUN's latest checkpoint
  const char *init_ckpt;         // weights to start from (fine-tuning), or NULL
  const char *cost_path;         // cost model for the planner (tessera calibrate), or NULL:
                                 // the built-in CPU numbers
  int gpus_per_node;             // ranks per node for the cost model (0: all ranks)
  int plan_kind;                 // TRAIN_PLAN_*: which plan each step runs (-1: a resume's
                                 // RUN/config.ini's, else auto)
  int planners;                  // ranks that plan, in turn, and broadcast each plan (capped
                                 // at the world size); 0: every rank plans every batch
  int64_t mem_bytes;             // memory per rank for the memory model (0: the backend's
                                 // free memory; model/train/memory.h)
  const comm_backend *comm;      // communication backend (comm/comm.h), chosen by the caller
  int skip_bad_clips;            // 1: leave out clips whose checksum fails (else stop)
  int dry_run;                   // 1: the start's checks and a report on stdout, no run
                                 // (model/train/dry_run.h); run_dir may then be NULL
  const backend_choice *backend; // compute device, chosen by the caller (tools/backend.h);
                                 // train.precision picks its table
  // A signal handler's flag (tools/train_signal.h): 0, or the number of a signal asking the
  // run to stop. Polled after every step and max-reduced over the ranks, so that all stop
  // after the same step and write its checkpoint. NULL: no polling (and no collective).
  const volatile sig_atomic_t *stop_signal;
  int *stopped;                  // non-NULL: set to the signal's number when one stopped
                                 // the run before its last step (else left alone)
  // Writes a sample (train.sample_every) as a video at path_noext plus the extension it
  // picks, the full path into written (cap bytes): MP4, or Y4M in a build without media.
  // The caller's (tools/video.h: model/ encodes no video); NULL: samples are refused.
  tsr_status (*write_video)(const char *path_noext, const sample_result *s, char *written,
                            size_t cap);
  // Embeds the prompts of train.sample_prompts' file `file` with the text encoder whose
  // record (store/caption_encoder.h) the store holds (`encoder`, "" when it records none;
  // `store` names it for messages), each text_dim wide, into *out (zeroed first). The
  // caller's, as it runs the venv's encoder script (tools/prompt_embed.h); called once at
  // the start, on rank 0. NULL: train.sample_prompts is refused.
  tsr_status (*embed_prompts)(const char *file, const char *encoder, const char *store,
                              int text_dim, train_prompts *out);
} train_options;

#endif
