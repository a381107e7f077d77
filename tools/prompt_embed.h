// tools/prompt_embed.h — text prompts for `tessera sample --prompt/--prompts`: embedded by
// tools/embed_captions.py in the venv (tools/pyscript.h), one process for all of them, with
// the encoder the model was trained with (store/caption_encoder.h), into caption files that
// `--caption FILE` would take (docs/captions.md, "Prompts").
#ifndef TESSERA_TOOLS_PROMPT_EMBED_H
#define TESSERA_TOOLS_PROMPT_EMBED_H

#include <limits.h>

#include "core/err.h"

typedef struct {
  char dir[PATH_MAX];  // the temporary folder ("" when none was made)
  int n;
  char **file;         // (n) the caption file of prompt i: DIR/(i+1)-0.caption.safetensors
} prompt_set;

// The prompts of a file, one a line (UTF-8; trailing white space and "\r" cut; blank lines
// skipped) into *prompts (malloc'ed, n_prompts of them; prompts_free). TSR_EINVAL naming
// the file and line of a prompt that is not UTF-8 or over 8 KiB, or when there is none.
tsr_status prompts_read_file(const char *path, char ***prompts, int *n_prompts);
void prompts_free(char **prompts, int n);

// The script's options for a checkpoint's encoder record `record` ("" or NULL: none
// recorded) and --encoder `encoder` (NULL: not given; it replaces the record's name and
// keeps its other settings, or with no record takes the script's defaults). TSR_EINVAL
// saying to pass --encoder when neither is there.
// Embeds prompts[0..n) into a fresh temporary folder (under $TMPDIR, else /tmp): ps->file[i]
// is prompt i's caption file. TSR_EIO naming the venv and tools/setup_venv.sh when the
// script cannot run or fails (its own message, printed above, says which package).
tsr_status prompt_embed(char *const *prompts, int n, const char *record, const char *encoder,
                        prompt_set *ps);
// Removes the temporary folder and frees ps.
void prompt_set_free(prompt_set *ps);

#endif
