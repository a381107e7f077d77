// tools/prompt_embed.c — text prompts embedded by tools/embed_captions.py (tools/prompt_embed.h).
#include "tools/prompt_embed.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/term.h"
#include "store/caption_encoder.h"
#include "store/latent_file.h"
#include "store/settings.h"
#include "tools/pyscript.h"

// Most prompts of one --prompts file: a sampling job of more is a script of its own.
#define PROMPTS_MAX 100000

void prompts_free(char **prompts, int n) {
  for (int i = 0; prompts && i < n; i++) free(prompts[i]);
  free(prompts);
}

// Appends a copy of text to *v (*n of them, *cap allocated).
static tsr_status push(char ***v, int *n, int *cap, const char *text) {
  if (*n == *cap) {
    int c = *cap ? *cap * 2 : 16;
    char **g = realloc(*v, (size_t)c * sizeof *g);
    if (!g) return err_set(TSR_ENOMEM, "out of memory");
    *v = g, *cap = c;
  }
  if (!((*v)[*n] = strdup(text))) return err_set(TSR_ENOMEM, "out of memory");
  (*n)++;
  return TSR_OK;
}

tsr_status prompts_read_file(const char *path, const char *what, char ***prompts,
                             int *n_prompts) {
  *prompts = NULL, *n_prompts = 0;
  FILE *f = fopen(path, "r");
  if (!f) return err_set(TSR_EIO, "%s %s: %s", what, path, strerror(errno));
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int cap_v = 0;
  long ln = 0;
  tsr_status st = TSR_OK;
  while (!st && (len = getline(&line, &cap, f)) >= 0) {
    ln++;
    while (len > 0 && strchr(" \t\r\n", line[len - 1])) line[--len] = 0;
    if (!len) continue;
    if ((size_t)len != strlen(line))
      st = err_set(TSR_EINVAL, "%s %s:%ld: has a NUL byte", what, path, ln);
    else if (!term_is_utf8(line))
      st = err_set(TSR_EINVAL, "%s %s:%ld: not UTF-8 text", what, path, ln);
    else if (len > STORE_MAX_CAPTION_BYTES)
      st = err_set(TSR_EINVAL, "%s %s:%ld: over %d bytes", what, path, ln,
                   STORE_MAX_CAPTION_BYTES);
    else if (*n_prompts == PROMPTS_MAX)
      st = err_set(TSR_EINVAL, "%s %s: over %d prompts: split the file", what, path,
                   PROMPTS_MAX);
    else st = push(prompts, n_prompts, &cap_v, line);
  }
  if (!st && ferror(f)) st = err_set(TSR_EIO, "%s %s: %s", what, path, strerror(errno));
  if (!st && !*n_prompts)
    st = err_set(TSR_EINVAL, "%s %s: no prompt (one a line, blank lines skipped)", what,
                  path);
  free(line);
  fclose(f);
  if (st) prompts_free(*prompts, *n_prompts), *prompts = NULL, *n_prompts = 0;
  return st;
}

// The encoder settings for record and --encoder (prompt_embed's contract) into *e.
static tsr_status resolve(const char *record, const char *encoder, const char *source,
                          const char *fix, caption_encoder *e) {
  tsr_status st = TSR_OK;
  if (record && *record) st = caption_encoder_parse(record, source, e);
  else if (!encoder)
    return err_set(TSR_EINVAL, "%s records no caption encoder (its captions came as files "
                   "without the encoder's record, or it predates the record): %s", source, fix);
  else *e = (caption_encoder){.dtype = "bf16", .model_dtype = "f32"};
  if (!st && encoder) {
    if (strcmp(encoder, "minilm") && strncmp(encoder, "hf:", 3))
      return err_set(TSR_EINVAL, "--encoder '%s': give minilm or hf:PATH", encoder);
    if (strlen(encoder) >= sizeof e->name)
      return err_set(TSR_EINVAL, "--encoder: path too long");
    snprintf(e->name, sizeof e->name, "%s", encoder);
  }
  return st;
}

// The spans file of the prompts: {"row": i+1, "span": 0, "caption": TEXT} a line.
static tsr_status write_spans(const char *path, char *const *prompts, int n) {
  FILE *f = fopen(path, "w");
  if (!f) return err_set(TSR_EIO, "%s: %s", path, strerror(errno));
  tsr_status st = TSR_OK;
  for (int i = 0; !st && i < n; i++) {
    if (!*prompts[i] || strspn(prompts[i], " \t\r\n") == strlen(prompts[i]))
      st = err_set(TSR_EINVAL, "prompt %d is empty", i + 1);
    else if (!term_is_utf8(prompts[i]))
      st = err_set(TSR_EINVAL, "prompt %d is not UTF-8 text", i + 1);
    json_t *o = st ? NULL : json_pack("{sisiss}", "row", i + 1, "span", 0, "caption", prompts[i]);
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (!st && (!line || fprintf(f, "%s\n", line) < 0)) st = err_set(TSR_EIO, "writing %s", path);
    free(line);
    json_decref(o);
  }
  if (fclose(f) && !st) st = err_set(TSR_EIO, "%s: %s", path, strerror(errno));
  return st;
}

// Runs the script over spans into dir with e's settings.
static tsr_status run_script(const char *spans, const char *dir, const caption_encoder *e) {
  char pad[16], mt[16];
  char *args[20];
  int k = 0;
  args[k++] = (char *)spans, args[k++] = "--out", args[k++] = (char *)dir;
  args[k++] = "--encoder", args[k++] = (char *)e->name;
  args[k++] = "--dtype", args[k++] = (char *)e->dtype;
  args[k++] = "--model-dtype", args[k++] = (char *)e->model_dtype;
  if (e->pooled) args[k++] = "--pooled";
  if (e->clean) args[k++] = "--clean";
  if (e->pad_to > 0) snprintf(pad, sizeof pad, "%d", e->pad_to), args[k++] = "--pad-to",
                     args[k++] = pad;
  if (e->max_tokens > 0) snprintf(mt, sizeof mt, "%d", e->max_tokens),
                         args[k++] = "--max-tokens", args[k++] = mt;
  args[k++] = "--quiet";
  args[k] = NULL;
  tsr_status st = pyscript_run_venv("embed_captions.py", args);
  return st ? err_wrap(st, "embedding the prompts with %s (the venv and the encoder's packages: "
                       "tools/setup_venv.sh): ", e->name) : TSR_OK;
}

tsr_status prompt_embed(char *const *prompts, int n, const char *record, const char *encoder,
                        const char *source, const char *fix, prompt_set *ps) {
  memset(ps, 0, sizeof *ps);
  caption_encoder e;
  tsr_status st = resolve(record, encoder, source, fix, &e);
  if (st) return st;
  const char *tmp = getenv("TMPDIR");
  snprintf(ps->dir, sizeof ps->dir, "%s/tessera-prompts.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(ps->dir)) {
    st = err_set(TSR_EIO, "a temporary folder %s: %s", ps->dir, strerror(errno));
    ps->dir[0] = 0;
    return st;
  }
  char spans[PATH_MAX + 16], f[PATH_MAX + 48];
  snprintf(spans, sizeof spans, "%s/prompts.jsonl", ps->dir);
  if (!(ps->file = calloc((size_t)n, sizeof *ps->file))) st = err_set(TSR_ENOMEM, "out of memory");
  if (!st) st = write_spans(spans, prompts, n);
  if (!st) st = run_script(spans, ps->dir, &e);
  for (int i = 0; !st && i < n; i++, ps->n++) {
    snprintf(f, sizeof f, "%s/%d-0.caption.safetensors", ps->dir, i + 1);
    if (access(f, R_OK))
      st = err_set(TSR_EIO, "the encoder wrote no embedding for prompt %d (%s)", i + 1, f);
    else if (!(ps->file[i] = strdup(f))) st = err_set(TSR_ENOMEM, "out of memory");
  }
  if (st) prompt_set_free(ps);
  return st;
}

void prompt_set_free(prompt_set *ps) {
  for (int i = 0; ps->file && i < ps->n; i++) free(ps->file[i]);
  free(ps->file);
  DIR *d = ps->dir[0] ? opendir(ps->dir) : NULL;
  char p[PATH_MAX + 300];
  for (struct dirent *de; d && (de = readdir(d));) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", ps->dir, de->d_name);
    unlink(p);  // the folder is ours and flat: the script writes files only
  }
  if (d) closedir(d), rmdir(ps->dir);
  memset(ps, 0, sizeof *ps);
}

tsr_status prompt_embed_train(const char *file, const char *encoder, const char *store,
                              int text_dim, train_prompts *out) {
  memset(out, 0, sizeof *out);
  char **texts = NULL, src[PATH_MAX + 16], cap[STORE_MAX_CAPTION_BYTES + 1];
  int n = 0;
  prompt_set ps = {0};
  snprintf(src, sizeof src, "store %s", store);
  tsr_status st = prompts_read_file(file, "file", &texts, &n);
  if (!st)
    st = prompt_embed(texts, n, encoder, NULL, src, "embed its captions with "
                      "tools/embed_captions.py and ingest them so (--captions-from, "
                      "--caption-embeddings, or caption files that carry the record), or leave "
                      "train.sample_prompts empty and sample the checkpoints with `tessera sample "
                      "--encoder E --prompt TEXT`", &ps);
  if (!st && (!(out->text = calloc((size_t)n, sizeof *out->text)) ||
              !(out->emb = calloc((size_t)n, sizeof *out->emb)) ||
              !(out->tokens = calloc((size_t)n, sizeof *out->tokens))))
    st = err_set(TSR_ENOMEM, "out of memory");
  for (int i = 0; !st && i < n; i++, out->n++) {  // (n counts element i, failed or not)
    st = caption_file_read(ps.file[i], text_dim, &out->emb[i], &out->tokens[i], cap, sizeof cap);
    if (!st && !(out->text[i] = strdup(texts[i]))) st = err_set(TSR_ENOMEM, "out of memory");
  }
  if (st) {
    for (int i = 0; i < out->n; i++) free(out->text[i]), free(out->emb[i]);
    free(out->text), free(out->emb), free(out->tokens);
    memset(out, 0, sizeof *out);
  }
  prompt_set_free(&ps);
  prompts_free(texts, n);
  return st;
}
