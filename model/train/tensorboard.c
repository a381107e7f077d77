// model/train/tensorboard.c — RUN/tensorboard/ event files (model/train/tensorboard.h).
#include "model/train/tensorboard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/png.h"
#include "store/patchify.h"
#include "model/io/tfevents.h"

#define TB_PREFIX "events.out.tfevents."

struct tb_writer {
  int fd;
  char path[PATH_MAX];
};

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Appends all of b with one write(2) (O_APPEND): a record is whole or, after a crash, the
// last one is torn; never interleaved.
static tsr_status append(tb_writer *w, const tfevents_buf *b) {
  tsr_status st = tfevents_finish(b);
  if (st) return st;
  ssize_t n = write(w->fd, b->p, b->len);
  if (n != (ssize_t)b->len)
    return err_set(TSR_EIO, "%s: write failed: %s", w->path, n < 0 ? strerror(errno) : "short write");
  return TSR_OK;
}

// The newest event file of dir (names sort by creation time) into out, or "" if none;
// with `remove_all`, every one is removed instead.
static tsr_status find_events(const char *dir, char *out, size_t n, int remove_all) {
  out[0] = 0;
  DIR *d = opendir(dir);
  if (!d) return err_set(TSR_EIO, "open %s: %s", dir, strerror(errno));
  tsr_status st = TSR_OK;
  struct dirent *e;
  while (!st && (e = readdir(d))) {
    if (strncmp(e->d_name, TB_PREFIX, strlen(TB_PREFIX))) continue;
    char p[PATH_MAX];
    if ((st = fs_join(p, sizeof p, dir, e->d_name))) break;
    if (remove_all) {
      if (unlink(p)) st = err_set(TSR_EIO, "remove %s: %s", p, strerror(errno));
    } else if (strcmp(p, out) > 0) {
      snprintf(out, n, "%s", p);
    }
  }
  closedir(d);
  return st;
}

// Cuts w's file after the last whole record of a step <= keep, reading one record at a
// time (a long run's file is not read whole into memory).
static tsr_status cut_after(tb_writer *w, int64_t keep) {
  struct stat sb;
  if (fstat(w->fd, &sb)) return err_set(TSR_EIO, "stat %s: %s", w->path, strerror(errno));
  const uint64_t n = (uint64_t)sb.st_size;
  uint64_t off = 0;
  unsigned char *rec = NULL;
  tsr_status st = TSR_OK;
  for (;;) {
    unsigned char head[8];
    if (n - off < 16 || pread(w->fd, head, 8, (off_t)off) != 8) break;
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)head[i] << (8 * i);
    if (len > n - off - 16) break;  // torn: its data or CRC is cut off
    unsigned char *q = realloc(rec, (size_t)len + 16);
    if (!q) {
      st = err_set(TSR_ENOMEM, "out of memory reading %s", w->path);
      break;
    }
    rec = q;
    size_t size;
    int64_t step;
    if (pread(w->fd, rec, (size_t)len + 16, (off_t)off) != (ssize_t)(len + 16) ||
        tfevents_record_step(rec, (size_t)len + 16, &size, &step) || step > keep)
      break;
    off += size;
  }
  free(rec);
  if (!st && ftruncate(w->fd, (off_t)off))
    st = err_set(TSR_EIO, "truncate %s: %s", w->path, strerror(errno));
  return st;
}

// A new event file in dir, opening with the version record.
static tsr_status create_events(tb_writer *w, const char *dir) {
  char host[64] = "localhost";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = 0;
  if (snprintf(w->path, sizeof w->path, "%s/" TB_PREFIX "%lld.%s", dir, (long long)time(NULL), host) >=
      (int)sizeof w->path)
    return err_set(TSR_EINVAL, "path too long: %s", dir);
  tsr_status st = fs_open_nofollow(w->path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, &w->fd);
  if (st) return st;
  tfevents_buf b = {0};
  tfevents_add_version(&b, wall_now());
  st = append(w, &b);
  tfevents_buf_free(&b);
  return st ? st : fs_fsync_dir(dir);
}

tsr_status tb_open(tb_writer **out, const char *run_dir, int64_t resume_step) {
  *out = NULL;
  tb_writer *w = calloc(1, sizeof *w);
  if (!w) return err_set(TSR_ENOMEM, "out of memory");
  w->fd = -1;
  char dir[PATH_MAX];
  tsr_status st = fs_join(dir, sizeof dir, run_dir, "tensorboard");
  if (!st) st = fs_dir_nofollow(dir, 1);  // a link to a shared folder: another run's files
  if (!st) st = find_events(dir, w->path, sizeof w->path, resume_step < 0);
  if (!st && resume_step >= 0 && w->path[0]) {
    st = fs_open_nofollow(w->path, O_RDWR | O_APPEND, &w->fd);
    if (!st) st = cut_after(w, resume_step);
  } else if (!st) {
    st = create_events(w, dir);
  }
  if (st) {
    tb_close(&w);
    return err_wrap(st, "tensorboard: ");
  }
  *out = w;
  return TSR_OK;
}

enum { TB_MAX_TAGS = 32 };
// the tag tables below name every level and bucket
_Static_assert(TRAIN_VAL_LEVELS == 5 && DATA_BUCKETS == 3, "tensorboard tags");

tsr_status tb_write(tb_writer *w, int64_t step, const train_step_stats *stats,
                    const train_val_stats *val) {
  const char *tags[TB_MAX_TAGS];
  double v[TB_MAX_TAGS];
  int n = 0;
#define TB_ADD(tag, x) (tags[n] = (tag), v[n++] = (double)(x))
  // grouped as TensorBoard's sections: train/ (the curves), perf/ (time), plan/, val/
  if (stats) {
    TB_ADD("train/loss", stats->loss), TB_ADD("train/loss_step", stats->loss_step);
    TB_ADD("train/grad_norm", stats->grad_norm);
    TB_ADD("train/grad_norm_step", stats->grad_norm_step);
    TB_ADD("train/lr", stats->lr), TB_ADD("train/clips", stats->clips);
    TB_ADD("train/tokens", stats->tokens), TB_ADD("train/bad_clips", stats->bad_clips);
    TB_ADD("perf/tokens_per_s", stats->tokens_per_s);
    TB_ADD("perf/tokens_per_s_step", stats->tokens_per_s_step);
    TB_ADD("perf/step_s", stats->step_s);
    TB_ADD("plan/predicted_s", stats->predicted_s), TB_ADD("plan/plan_ms", stats->plan_ms);
  }
  static const char *const t_tags[TRAIN_VAL_LEVELS] = {"val/t_0.1", "val/t_0.3", "val/t_0.5",
                                                       "val/t_0.7", "val/t_0.9"};
  static const char *const b_tags[DATA_BUCKETS] = {"val/bucket_short", "val/bucket_medium",
                                                   "val/bucket_long"};
  if (val) {
    TB_ADD("val/loss", val->loss);
    for (int k = 0; k < TRAIN_VAL_LEVELS; k++) TB_ADD(t_tags[k], val->level[k]);
    for (int b = 0; b < DATA_BUCKETS; b++)
      if (!isnan(val->bucket[b])) TB_ADD(b_tags[b], val->bucket[b]);
    TB_ADD("val/clips", val->clips), TB_ADD("val/s", val->seconds);
  }
#undef TB_ADD
  tfevents_buf b = {0};
  tfevents_add_scalars(&b, wall_now(), step, tags, v, n);
  tsr_status st = append(w, &b);
  tfevents_buf_free(&b);
  return st;
}

enum { TB_SAMPLE_FRAMES = 4 };

tsr_status tb_write_sample(tb_writer *w, int64_t step, const sample_result *s, const char *tag,
                           const char *description) {
  if (!s->tokens) return TSR_OK;  // a latent model's sample: no pixels to show
  const dit_config *m = &s->mc;
  int F = s->T * m->pt, h = s->H * m->ph, wd = s->W * m->pw, C = m->channels;
  int k = F < TB_SAMPLE_FRAMES ? F : TB_SAMPLE_FRAMES;
  size_t frame = (size_t)h * wd * C, P = (size_t)m->pt * m->ph * m->pw * C;
  uint8_t *frames = malloc(frame * (size_t)F), *strip = malloc(frame * (size_t)k);
  uint8_t **fp = malloc(sizeof *fp * (size_t)m->pt);
  tsr_status st = frames && strip && fp && C == 3 ? TSR_OK
               : C != 3 ? err_set(TSR_EINVAL, "tensorboard: a sample of %d channels is no RGB image", C)
                        : err_set(TSR_ENOMEM, "tensorboard: out of memory (sample frames)");
  for (int t = 0; !st && t < s->T; t++) {  // token slice t holds frames t*pt .. t*pt + pt - 1
    for (int f = 0; f < m->pt; f++) fp[f] = frames + frame * (size_t)(t * m->pt + f);
    unpatchify_u8(s->tokens + (size_t)t * s->H * s->W * P, m->pt, h, wd, C, m->ph, m->pw, fp);
  }
  // frames 0, F/k, 2F/k, ... top to bottom (the report's strips take the same ones)
  for (int i = 0; !st && i < k; i++)
    memcpy(strip + frame * (size_t)i, frames + frame * (size_t)((int64_t)i * F / k), frame);
  uint8_t *png = NULL;
  size_t n = 0;
  if (!st) st = png_encode_rgb(strip, wd, h * k, &png, &n);
  tfevents_buf b = {0};
  if (!st) {
    tfevents_add_image(&b, wall_now(), step, tag, description, h * k, wd, png, n);
    st = append(w, &b);
  }
  tfevents_buf_free(&b);
  free(png), free(frames), free(strip), free(fp);
  return st;
}

void tb_close(tb_writer **w) {
  if (!*w) return;
  if ((*w)->fd >= 0) close((*w)->fd);
  free(*w);
  *w = NULL;
}
