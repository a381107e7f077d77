// tests/ingest/test_export.c — ingest/export.h on a store built with the shard and index
// APIs from known frames. Reference: the frames themselves. Asserted: the raw export is
// byte-identical (frames, h, w, 3); the MP4 export exists under its final name only; a
// corrupted payload byte makes both exports fail (checksum verified first) and leaves no
// output file; an unknown clip id fails naming the id.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libavutil/log.h>

#include "check.h"
#include "scratch.h"
#include "tmp_files.h"
#include "core/err.h"
#include "ingest/export.h"
#include "store/patchify.h"
#include "store/shard.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/settings.h"
#include "store/store.h"

enum { T = 3, PT = 2, PH = 8, PW = 8, HH = 2, WW = 3, FH = HH * PH, FW = WW * PW };

static int exists(const char *p) { struct stat sb; return stat(p, &sb) == 0; }

int main(void) {
  av_log_set_level(AV_LOG_ERROR);
  char dir[] = "/tmp/tessera-test-export-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  store_settings s = {.fps_num = 8, .fps_den = 1, .short_side = 16, .pt = PT, .ph = PH,
                      .pw = PW, .channels = 3, .dtype = STORE_DTYPE_U8, .max_seconds = 0};
  store_index *ix = NULL;
  CHECK_OK(store_open(&ix, dir, 1, &s));
  if (!ix) return check_done();
  static uint8_t frames[T * PT][FH * FW * 3];
  for (int f = 0; f < T * PT; f++)
    for (int i = 0; i < FH * FW * 3; i++) frames[f][i] = (uint8_t)(i * 7 + f * 31);
  char shard[512];
  snprintf(shard, sizeof shard, "%s/shards/test.tshard", dir);
  shard_writer *w = NULL;
  int64_t off = 0;
  uint64_t ck = 0;
  CHECK_OK(shard_writer_create(&w, shard, &s));
  CHECK_OK(shard_writer_begin_clip(w, HH, WW, &off));
  static uint8_t tokens[HH * WW * PT * PH * PW * 3];
  for (int g = 0; g < T; g++) {
    const uint8_t *fp[PT] = {frames[g * PT], frames[g * PT + 1]};
    patchify_u8(fp, PT, FH, FW, 3, PH, PW, tokens);
    CHECK_OK(shard_writer_append(w, tokens, sizeof tokens));
  }
  CHECK_OK(shard_writer_end_clip(w, T, &ck));
  CHECK_OK(shard_writer_sync(w));
  shard_writer_close(&w);
  store_source src = {.path = "/videos/x.mp4", .size = 1, .mtime = 1, .status = SOURCE_DONE,
                      .decoded_frames = T * PT};
  store_clip c = {.duration_s = T * PT / 8.0, .src_fps = 8, .src_w = FW, .src_h = FH,
                  .sar_num = 1, .sar_den = 1, .codec = "h264", .pix_fmt = "yuv420p",
                  .decoded_frames = T * PT, .frames = T * PT, .T = T, .H = HH, .W = WW,
                  .tokens = T * HH * WW, .shard = "shards/test.tshard", .offset = off,
                  .bytes = (int64_t)sizeof tokens * T, .checksum = ck};
  CHECK_OK(index_commit_source(ix, &src, &c, 1));
  int64_t *ids = NULL, *toks = NULL, n = 0;
  CHECK_OK(index_clip_lengths(ix, &ids, &toks, &n));
  index_close(&ix);
  int64_t id = n > 0 ? ids[0] : 1;
  free(ids);
  free(toks);

  char raw[600], mp4[600];
  snprintf(raw, sizeof raw, "%s/clip.rgb", dir);
  snprintf(mp4, sizeof mp4, "%s/clip.mp4", dir);
  CHECK_OK(export_clip_raw(dir, id, raw));
  FILE *f = fopen(raw, "rb");
  static uint8_t got[T * PT][FH * FW * 3];
  size_t r = f ? fread(got, 1, sizeof got + 1, f) : 0;
  if (f) fclose(f);
  CHECK(r == sizeof got, "raw export: %zu bytes, want %zu", r, sizeof got);
  CHECK(memcmp(got, frames, sizeof got) == 0, "raw export equals the stored frames");
  CHECK_OK(export_clip_mp4(dir, id, mp4, 0));
  CHECK(exists(mp4) && !tmp_exists(mp4), "mp4 export under its final name only");

  tsr_status st = export_clip_raw(dir, id + 100, raw);
  CHECK(st != TSR_OK, "unknown clip id refused: %s", err_msg());

  // Corrupt one payload byte: both exports refuse and write nothing.
  f = fopen(shard, "r+b");
  if (f) {
    fseek(f, off + SHARD_BLOCK_HEADER_BYTES + 5, SEEK_SET);
    int b = fgetc(f);
    fseek(f, off + SHARD_BLOCK_HEADER_BYTES + 5, SEEK_SET);
    fputc(b ^ 0xff, f);
    fclose(f);
  }
  remove(raw);
  remove(mp4);
  st = export_clip_raw(dir, id, raw);
  CHECK(st == TSR_EFORMAT && !exists(raw), "corrupt payload: raw export refused (%s)", err_msg());
  st = export_clip_mp4(dir, id, mp4, 18);
  CHECK(st == TSR_EFORMAT && !exists(mp4) && !tmp_exists(mp4), "corrupt payload: mp4 export refused");

  scratch_remove(dir);
  return check_done();
}
