// tools/prompt_embed.h — text prompts for `tessera sample --prompt/--prompts`: embedded by
// tools/embed_captions.py in the venv (tools/pyscript.h), one process for all of them, with
// the encoder the model was trained with (store/caption_encoder.h), into caption files that
// `--caption FILE` would take (docs/captions.md, "Prompts").
#ifndef TESSERA_TOOLS_PROMPT_EMBED_H
#define TESSERA_TOOLS_PROMPT_EMBED_H

#include <limits.h>

#include "core/err.h"
#include "model/train/options.h"

typedef struct {
  char dir[PATH_MAX];  // the temporary folder ("" when none was made)
  int n;
  char **file;         // (n) the caption file of prompt i: DIR/(i+1)-0.caption.safetensors
} prompt_set;

// The prompts of a file, one a line (UTF-8; trailing white space and "\r" cut; blank lines
// skipped) into *prompts (malloc'ed, n_prompts of them; prompts_free). TSR_EINVAL naming
// `what` (the option or key that gave it), the file and line of a prompt that is not UTF-8
// or over 8 KiB, or when there is none.
tsr_status prompts_read_file(const char *path, const char *what, char ***prompts,
                             int *n_prompts);
void prompts_free(char **prompts, int n);

// The script's options for the encoder record `record` of `source` (a checkpoint or store,
// named so in messages; "" or NULL: none recorded) and --encoder `encoder` (NULL: not
// given; it replaces the record's name and keeps its other settings, or with no record
// takes the script's defaults). TSR_EINVAL naming source and saying `fix` (what to do)
// when neither is there.
// Embeds prompts[0..n) into a fresh temporary folder (under $TMPDIR, else /tmp): ps->file[i]
// is prompt i's caption file. TSR_EIO naming the venv and tools/setup_venv.sh when the
// script cannot run or fails (its own message, printed above, says which package).
tsr_status prompt_embed(char *const *prompts, int n, const char *record, const char *encoder,
                        const char *source, const char *fix, prompt_set *ps);
// Removes the temporary folder and frees ps.
void prompt_set_free(prompt_set *ps);

// train.sample_prompts (model/train/options.h embed_prompts): the prompts of file, one a
// line as prompts_read_file reads them, embedded with the record `encoder` of store
// `store` (refused, naming the store and what to do, when it records none) and read back
// as text_dim-wide embeddings into *out.
tsr_status prompt_embed_train(const char *file, const char *encoder, const char *store,
                              int text_dim, train_prompts *out);

#endif
