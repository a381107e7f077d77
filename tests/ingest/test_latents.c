// tests/ingest/test_latents.c — `tessera ingest --latents` in process: ingest_run with the
// latent reader on files written here with known values, then the store read back.
// - values: a bf16 file into a bf16 store and an f32 file into an f32 store give every
//   token value bitwise the file's value at its place after the centre crop; an f32 file
//   into a bf16 store gives the file's value rounded to nearest even (core/bf16.h)
// - rows: grid, frames, dropped latent frames, duration = frames * vae_t / fps, source
//   size = latent grid * vae stride, codec "latents", pix_fmt = file dtype, the source's
//   note naming the video, start times of clips cut at max_seconds
// - captions: one caption block per source holding the file's embedding bytes and text,
//   every clip of the source pointing at it; store_verify passes and finds a damaged
//   embedding; store_rebuild restores the caption columns from the shards
// - malformed files fail as sources with a reason naming the file and the key; files of
//   another channel count, fps or VAE stride fail naming both values; the run goes on
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "core/bf16.h"
#include "comm/comm.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "ingest/ingest.h"
#include "store/patchify.h"
#include "store/shard.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/rebuild.h"
#include "store/settings.h"
#include "store/store.h"
#include "store/verify.h"

static char dir[256];

// The value a test file holds at element i (T, H, W, C row-major) for seed s.
static float value_at(uint64_t s, size_t i) {
  rng_key k = {.seed = s, .stream = RNG_STREAM_SAMPLE};
  return (float)(3.0 * rng_normal(&k, i));
}

typedef struct {
  int T, H, W, C;
  st_dtype dtype;
  uint64_t seed;
  const char *fps, *vae;
  int text_n, text_d;          // 0: no caption
  const char *caption, *source;
  const char *bad;             // "" or the kind of damage
} file_spec;

// Writes a latent file per spec; returns 0 on success.
static int write_file(const char *path, const file_spec *f) {
  size_t n = (size_t)f->T * f->H * f->W * f->C, es = f->dtype == ST_BF16 ? 2 : 4;
  char *lat = malloc(n * es);
  for (size_t i = 0; i < n; i++) {
    float v = value_at(f->seed, i);
    if (!strcmp(f->bad, "nan") && i == 7) v = NAN;
    if (f->dtype == ST_BF16) {
      uint16_t h = bf16_from_f32(v);
      memcpy(lat + 2 * i, &h, 2);
    } else {
      memcpy(lat + 4 * i, &v, 4);
    }
  }
  size_t tn = (size_t)f->text_n * f->text_d;
  float *text = malloc((tn ? tn : 1) * 4);
  for (size_t i = 0; i < tn; i++) text[i] = value_at(f->seed + 100, i);
  st_writer *w = NULL;
  int64_t sh[4] = {f->T, f->H, f->W, f->C}, tsh[2] = {f->text_n, f->text_d};
  tsr_status st = st_writer_new(&w);
  if (!st) st = st_writer_add(w, "latents", !strcmp(f->bad, "i32") ? ST_I32 : f->dtype,
                              !strcmp(f->bad, "ndim") ? 3 : 4, sh, lat);
  if (!st && tn) st = st_writer_add(w, "text_emb", ST_F32, 2, tsh, text);
  if (!st && strcmp(f->bad, "format")) st = st_writer_meta(w, "format", "tessera-latents");
  if (!st) st = st_writer_meta(w, "fps", f->fps);
  if (!st) st = st_writer_meta(w, "vae_stride", f->vae);
  if (!st && f->caption) st = st_writer_meta(w, "caption", f->caption);
  if (!st && f->source) st = st_writer_meta(w, "source", f->source);
  if (!st) st = st_writer_commit(w, path);
  st_writer_free(&w);
  free(lat), free(text);
  return st != TSR_OK;
}

typedef struct {
  store_clip_row rows[16];
  int n;
} row_list;

static int collect(const store_clip_row *r, void *ctx) {
  row_list *l = ctx;
  if (l->n >= 16) return 0;
  store_clip_row *o = &l->rows[l->n++];
  *o = *r;  // the strings point into the row: point them into the copy
  o->c.codec = o->codec_buf, o->c.pix_fmt = o->pix_fmt_buf, o->c.shard = o->shard_buf;
  o->c.label = r->c.label ? o->label_buf : NULL;
  o->c.caption = r->c.caption ? o->caption_buf : NULL;
  return 0;
}

static tsr_status run_ingest(const char *store, char **srcs, int n, store_dtype dtype,
                             double max_seconds, ingest_result *res) {
  ingest_opts o = {.reader = &ingest_reader_latents, .workers = 1, .max_pixels = 1 << 30,
                   .settings = {.pt = 2, .ph = 2, .pw = 2, .dtype = dtype,
                                .max_seconds = max_seconds}};
  tsr_status st = ingest_latent_settings(srcs, n, &o.settings);
  return st ? st : ingest_run(store, srcs, n, &o, res);
}

// Every stored value of the clips of `l` against the file of spec f (one source).
static void check_values(const char *store, const row_list *l, const file_spec *f,
                         store_dtype sdt) {
  const int pt = 2, ph = 2, pw = 2, H = f->H / ph, W = f->W / pw;
  const int y0 = (f->H - H * ph) / 2, x0 = (f->W - W * pw) / 2;
  size_t es = (size_t)store_dtype_size(sdt), pix = (size_t)f->C * es;
  int bad = 0, checked = 0, t_base = 0;
  for (int k = 0; k < l->n; k++) {
    const store_clip *c = &l->rows[k].c;
    char path[PATH_MAX];
    shard_reader *r = NULL;
    const uint8_t *payload = NULL;
    CHECK_OK(store_shard_path(store, c->shard, path, sizeof path));
    CHECK_OK(shard_reader_open(&r, path, NULL));
    CHECK_OK(shard_reader_clip(r, c->offset, c->bytes, c->checksum, 1, &payload));
    uint8_t *frames = malloc((size_t)pt * H * ph * W * pw * pix), *fp[2];
    for (int t = 0; t < pt; t++) fp[t] = frames + (size_t)t * H * ph * W * pw * pix;
    for (int g = 0; payload && g < c->T; g++) {
      unpatchify_u8(payload + (size_t)g * H * W * pt * ph * pw * pix, pt, H * ph, W * pw,
                    (int)pix, ph, pw, fp);
      for (int t = 0; t < pt; t++)
        for (int y = 0; y < H * ph; y++)
          for (int x = 0; x < W * pw; x++)
            for (int ch = 0; ch < f->C; ch++) {
              int ft = t_base + g * pt + t;
              size_t src = (((size_t)ft * f->H + y0 + y) * f->W + x0 + x) * f->C + ch;
              float want = value_at(f->seed, src);
              if (f->dtype == ST_BF16) want = bf16_to_f32(bf16_from_f32(want));
              size_t at = (((size_t)y * W * pw + x) * f->C + ch) * es;
              float got;
              if (sdt == STORE_DTYPE_BF16) {
                uint16_t h;
                memcpy(&h, fp[t] + at, 2);
                got = bf16_to_f32(h);
                want = bf16_to_f32(bf16_from_f32(want));
              } else {
                memcpy(&got, fp[t] + at, 4);
              }
              bad += memcmp(&got, &want, 4) != 0;
              checked++;
            }
    }
    t_base += c->T * pt;
    free(frames);
    shard_reader_close(&r);
  }
  CHECK(bad == 0 && checked > 0, "%d of %d stored values differ from the file's (store %s)", bad,
        checked, store_dtype_name(sdt));
}

static void test_values(void) {
  // bf16 -> bf16, f32 -> f32 (exact), f32 -> bf16 (rounded); odd H and W: a centre crop
  struct {
    st_dtype file;
    store_dtype store;
  } cases[] = {{ST_BF16, STORE_DTYPE_BF16}, {ST_F32, STORE_DTYPE_F32}, {ST_F32, STORE_DTYPE_BF16},
               {ST_BF16, STORE_DTYPE_F32}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char store[512], file[512];
    snprintf(store, sizeof store, "%s/values-%zu", dir, k);
    snprintf(file, sizeof file, "%s/values-%zu.safetensors", dir, k);
    file_spec f = {.T = 5, .H = 7, .W = 9, .C = 3, .dtype = cases[k].file, .seed = 10 + k,
                   .fps = "24", .vae = "4x8x8", .source = "/videos/a.mp4", .bad = ""};
    CHECK(!write_file(file, &f), "write %s", file);
    char *srcs[] = {file};
    ingest_result res;
    CHECK_OK(run_ingest(store, srcs, 1, cases[k].store, 0, &res));
    CHECK(res.sources_done == 1 && res.clips == 1, "one clip (%lld done, %lld clips)",
          (long long)res.sources_done, (long long)res.clips);
    store_index *ix = NULL;
    row_list l = {0};
    store_settings s;
    CHECK_OK(store_open(&ix, store, 0, NULL));
    CHECK_OK(index_settings(ix, &s));
    CHECK_OK(index_foreach_clip(ix, collect, &l));
    CHECK(s.channels == 3 && s.vae_t == 4 && s.vae_s == 8 && s.fps_num == 24 && s.fps_den == 1 &&
              s.short_side == 0 && s.dtype == cases[k].store,
          "store settings from the file: %d channels, vae %dx%d, fps %d/%d, dtype %d", s.channels,
          s.vae_t, s.vae_s, s.fps_num, s.fps_den, (int)s.dtype);
    const store_clip *c = &l.rows[0].c;
    // 5 latent frames -> 2 tubelets of 2 (1 dropped), 7x9 -> 3x4 tokens of 2x2
    CHECK(l.n == 1 && c->T == 2 && c->H == 3 && c->W == 4 && c->frames == 4 &&
              c->dropped_frames == 1 && c->decoded_frames == 5,
          "grid %dx%dx%d, frames %lld (+%lld dropped, %lld read)", c->T, c->H, c->W,
          (long long)c->frames, (long long)c->dropped_frames, (long long)c->decoded_frames);
    CHECK(fabs(c->duration_s - 4 * 4 / 24.0) < 1e-12 && c->src_w == 9 * 8 && c->src_h == 7 * 8 &&
              !strcmp(c->codec, "latents") &&
              !strcmp(c->pix_fmt, cases[k].file == ST_BF16 ? "bf16" : "f32") && !c->caption_offset,
          "row: duration %g, source %dx%d, codec %s, pix_fmt %s", c->duration_s, c->src_w,
          c->src_h, c->codec, c->pix_fmt);
    check_values(store, &l, &f, cases[k].store);
    index_close(&ix);
  }
}

static void test_captions_and_cuts(void) {
  char store[512], file[512], file2[512];
  snprintf(store, sizeof store, "%s/captions", dir);
  snprintf(file, sizeof file, "%s/long.safetensors", dir);
  snprintf(file2, sizeof file2, "%s/short.safetensors", dir);
  // 17 latent frames at 8 fps, vae 4: 0.5 s a latent frame; max 2 s = 4 latent frames
  file_spec f = {.T = 17, .H = 4, .W = 4, .C = 2, .dtype = ST_BF16, .seed = 3, .fps = "8",
                 .vae = "4x8x8", .text_n = 5, .text_d = 6, .caption = "a red ball",
                 .source = "/v/long.mp4", .bad = ""};
  file_spec g = f;
  g.T = 2, g.seed = 4, g.text_n = 0, g.caption = NULL;
  CHECK(!write_file(file, &f) && !write_file(file2, &g), "write files");
  char *srcs[] = {file, file2};
  ingest_result res;
  CHECK_OK(run_ingest(store, srcs, 2, STORE_DTYPE_BF16, 2.0, &res));
  store_index *ix = NULL;
  row_list l = {0};
  CHECK_OK(store_open(&ix, store, 0, NULL));
  CHECK_OK(index_foreach_clip(ix, collect, &l));
  index_close(&ix);
  int cut = 0, plain = 0;
  int64_t cap_off = -1;
  for (int k = 0; k < l.n; k++) {
    const store_clip *c = &l.rows[k].c;
    if (!strcmp(l.rows[k].source, file)) {
      CHECK(c->T == 2 && fabs(c->start_s - cut * 2.0) < 1e-12 && c->caption_offset > 0 &&
                c->caption_tokens == 5 && c->caption_dim == 6 && c->caption &&
                !strcmp(c->caption, "a red ball"),
            "cut clip %d: T %d, start %g, caption at %lld (%d x %d, '%s')", cut, c->T, c->start_s,
            (long long)c->caption_offset, c->caption_tokens, c->caption_dim,
            c->caption ? c->caption : "(none)");
      CHECK(cap_off < 0 || cap_off == c->caption_offset, "one caption block for the source");
      cap_off = c->caption_offset;
      cut++;
    } else {
      CHECK(c->caption_offset == 0 && !c->caption, "a file without text_emb has no caption");
      plain++;
    }
  }
  // 17 frames: 8 tubelets of 2 (1 frame dropped), 2 tubelets (4 frames) per clip: 4 clips
  CHECK(cut == 4 && plain == 1, "%d clips of the long file (want 4), %d of the short", cut, plain);
  // the caption block holds the file's embedding and text
  for (int k = 0; k < l.n; k++) {
    const store_clip *c = &l.rows[k].c;
    if (!c->caption_offset) continue;
    char path[PATH_MAX];
    shard_reader *r = NULL;
    shard_caption cap;
    CHECK_OK(store_shard_path(store, c->shard, path, sizeof path));
    CHECK_OK(shard_reader_open(&r, path, NULL));
    CHECK_OK(shard_reader_caption_of(r, c, 1, &cap));
    int same = cap.dtype == STORE_DTYPE_F32 && cap.text_bytes == strlen("a red ball") &&
               !memcmp(cap.text, "a red ball", cap.text_bytes);
    for (int i = 0; same && i < 30; i++) {
      float v;
      memcpy(&v, (const char *)cap.emb + 4 * i, 4);
      same = v == value_at(f.seed + 100, (size_t)i);
    }
    CHECK(same, "caption block = the file's text_emb and caption");
    shard_reader_close(&r);
    break;
  }
  // verify passes; a rebuild from the shards restores the caption columns
  store_verify_result vr;
  CHECK_OK(store_verify(store, NULL, NULL, &vr));
  CHECK(vr.clips == 5 && vr.clips_bad == 0, "verify: %lld clips, %lld bad", (long long)vr.clips,
        (long long)vr.clips_bad);
  char idx[600];
  snprintf(idx, sizeof idx, "%s/index.sqlite", store);
  CHECK(unlink(idx) == 0, "remove the index");
  store_rebuild_report rep;
  CHECK_OK(store_rebuild(store, NULL, NULL, &rep));
  row_list l2 = {0};
  CHECK_OK(store_open(&ix, store, 0, NULL));
  CHECK_OK(index_foreach_clip(ix, collect, &l2));
  index_close(&ix);
  int restored = 0;
  for (int k = 0; k < l2.n; k++)
    restored += l2.rows[k].c.caption_offset == cap_off && l2.rows[k].c.caption_tokens == 5 &&
                l2.rows[k].c.caption && !strcmp(l2.rows[k].c.caption, "a red ball");
  CHECK(l2.n == 5 && restored == 4, "rebuild: %d clips, %d with their caption (want 5, 4)", l2.n,
        restored);
  // a damaged embedding is found by verify
  for (int k = 0; k < l2.n; k++) {
    const store_clip *c = &l2.rows[k].c;
    if (!c->caption_offset) continue;
    char path[PATH_MAX];
    CHECK_OK(store_shard_path(store, c->shard, path, sizeof path));
    FILE *fp = fopen(path, "r+b");
    CHECK(fp && fseek(fp, (long)c->caption_offset + 64 + 8, SEEK_SET) == 0, "open shard");
    if (fp) fputc(0x5a, fp), fclose(fp);
    break;
  }
  CHECK_OK(store_verify(store, NULL, NULL, &vr));
  CHECK(vr.clips_bad == 4, "verify finds the 4 clips of the damaged caption (%lld)",
        (long long)vr.clips_bad);
}

static void test_bad_files(void) {
  char store[512];
  snprintf(store, sizeof store, "%s/bad", dir);
  struct {
    const char *name, *bad, *fps, *vae, *want;
    int C;
  } cases[] = {
      {"good", "", "16", "4x8x8", NULL, 4},
      {"nan", "nan", "16", "4x8x8", "non-finite value (NaN) at [t 0, y 0, x 1, c 3]", 4},
      {"i32", "i32", "16", "4x8x8", "tensor 'latents' is I32", 4},
      {"ndim", "ndim", "16", "4x8x8", "tensor 'latents' has 3 dimensions", 4},
      {"format", "format", "16", "4x8x8", "metadata 'format' is missing", 4},
      {"fps", "", "fast", "4x8x8", "metadata 'fps' is 'fast'", 4},
      {"vae", "", "16", "4x8", "metadata 'vae_stride' is '4x8'", 4},
      {"channels", "", "16", "4x8x8", "5 channels, the store's latents have 4", 5},
      {"otherfps", "", "12", "4x8x8", "fps 12/1, the store's is 16/1", 4},
      {"othervae", "", "16", "8x16x16", "vae_stride 8x16x16, the store's is 4x8x8", 4},
  };
  int n = (int)(sizeof cases / sizeof cases[0]);
  char *srcs[16], paths[16][512];
  for (int i = 0; i < n; i++) {
    snprintf(paths[i], sizeof paths[i], "%s/%02d-%s.safetensors", dir, i, cases[i].name);
    file_spec f = {.T = 2, .H = 2, .W = 2, .C = cases[i].C, .dtype = ST_F32, .seed = 50 + i,
                   .fps = cases[i].fps, .vae = cases[i].vae, .bad = cases[i].bad};
    CHECK(!write_file(paths[i], &f), "write %s", paths[i]);
    srcs[i] = paths[i];
  }
  ingest_result res;
  CHECK_OK(run_ingest(store, srcs, n, STORE_DTYPE_BF16, 0, &res));
  CHECK(res.sources_done == 1 && res.sources_failed == n - 1, "%lld done, %lld failed",
        (long long)res.sources_done, (long long)res.sources_failed);
  store_index *ix = NULL;
  CHECK_OK(store_open(&ix, store, 0, NULL));
  for (int i = 1; i < n; i++) {
    source_status ss;
    int same;
    CHECK_OK(index_source_lookup(ix, paths[i], 0, 0, &ss, &same));
    CHECK(ss == SOURCE_FAILED, "%s failed", cases[i].name);
  }
  // the reasons, as `tessera ingest` lists them
  index_close(&ix);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "sqlite3 %s/index.sqlite \"SELECT path || ' | ' || error FROM sources "
           "WHERE status = 'failed'\" > %s/reasons.txt", store, dir);
  CHECK(system(cmd) == 0, "read the failure reasons");
  char rpath[600], line[4096], all[65536] = "";
  snprintf(rpath, sizeof rpath, "%s/reasons.txt", dir);
  FILE *fp = fopen(rpath, "r");
  while (fp && fgets(line, sizeof line, fp)) strncat(all, line, sizeof all - strlen(all) - 1);
  if (fp) fclose(fp);
  for (int i = 1; i < n; i++) {
    char *at = strstr(all, paths[i]);
    char *eol = at ? strchr(at, '\n') : NULL;
    if (eol) *eol = 0;
    CHECK(at && strstr(at, cases[i].want) && strstr(at + strlen(paths[i]), paths[i]),
          "%s: reason names the file and says '%s': %s", cases[i].name, cases[i].want,
          at ? at : "(none)");
    if (eol) *eol = '\n';
  }
}

int main(int argc, char **argv) {
  CHECK_OK(comm_init(&argc, &argv));
  snprintf(dir, sizeof dir, "/tmp/tessera-latents-XXXXXX");
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  test_values();
  test_captions_and_cuts();
  test_bad_files();
  scratch_remove(dir);
  comm_finalize();
  return check_done();
}
