// model/io/tfevents.c — TFRecord framing and the Event proto (model/io/tfevents.h).
#include "model/io/tfevents.h"

#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"

static void put(tfevents_buf *b, const void *src, size_t n) {
  if (b->oom) return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return;
    }
    b->p = q, b->cap = cap;
  }
  memcpy(b->p + b->len, src, n);
  b->len += n;
}

static void put_byte(tfevents_buf *b, unsigned char c) { put(b, &c, 1); }

static void put_varint(tfevents_buf *b, uint64_t v) {
  while (v >= 0x80) put_byte(b, (unsigned char)(v | 0x80)), v >>= 7;
  put_byte(b, (unsigned char)v);
}

// little-endian, as protobuf's fixed64/fixed32 and TFRecord's header are
static void put_le(tfevents_buf *b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) put_byte(b, (unsigned char)(v >> (8 * i)));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

// A length-delimited field: tag, length, bytes.
static void put_bytes_field(tfevents_buf *b, int field, const void *p, size_t n) {
  put_varint(b, (uint64_t)field << 3 | 2);
  put_varint(b, n);
  put(b, p, n);
}

// The Event's first two fields, wall_time and step.
static void put_event_head(tfevents_buf *b, double wall_time, int64_t step) {
  uint64_t bits;
  memcpy(&bits, &wall_time, sizeof bits);
  put_byte(b, 1 << 3 | 1);
  put_le(b, bits, 8);
  put_byte(b, 2 << 3 | 0);
  put_varint(b, (uint64_t)step);
}

// Frames the event in `ev` as one record appended to b.
static void put_record(tfevents_buf *b, const tfevents_buf *ev) {
  if (ev->oom) {
    b->oom = 1;
    return;
  }
  unsigned char head[8];
  for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)ev->len >> (8 * i));
  put(b, head, 8);
  put_le(b, crc32c_masked(head, 8), 4);
  put(b, ev->p, ev->len);
  put_le(b, crc32c_masked(ev->p, ev->len), 4);
}

// Appends to b the record of an Event (wall_time, step) whose summary (field 5) is sum;
// out of memory in sum or in the event marks b out of memory (put_record).
static void put_summary_event(tfevents_buf *b, double wall_time, int64_t step,
                              const tfevents_buf *sum) {
  tfevents_buf ev = {0};
  put_event_head(&ev, wall_time, step);
  if (sum->oom) ev.oom = 1;
  else put_bytes_field(&ev, 5, sum->p, sum->len);
  put_record(b, &ev);
  tfevents_buf_free(&ev);
}

void tfevents_add_version(tfevents_buf *b, double wall_time) {
  tfevents_buf ev = {0};
  static const char version[] = "brain.Event:2";
  put_event_head(&ev, wall_time, 0);
  put_bytes_field(&ev, 3, version, sizeof version - 1);
  put_record(b, &ev);
  tfevents_buf_free(&ev);
}

void tfevents_add_scalars(tfevents_buf *b, double wall_time, int64_t step, const char *const *tags,
                          const double *values, int n) {
  tfevents_buf sum = {0}, val = {0};
  for (int i = 0; i < n; i++) {
    float f = (float)values[i];
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    val.len = 0;
    put_bytes_field(&val, 1, tags[i], strlen(tags[i]));
    put_byte(&val, 2 << 3 | 5);
    put_le(&val, bits, 4);
    if (val.oom) sum.oom = 1;
    else put_bytes_field(&sum, 1, val.p, val.len);
  }
  put_summary_event(b, wall_time, step, &sum);
  tfevents_buf_free(&val);
  tfevents_buf_free(&sum);
}

void tfevents_add_image(tfevents_buf *b, double wall_time, int64_t step, const char *tag,
                        const char *description, int height, int width, const void *png,
                        size_t n) {
  tfevents_buf sum = {0}, val = {0}, img = {0}, meta = {0}, plug = {0};
  put_byte(&img, 1 << 3 | 0), put_varint(&img, (uint64_t)height);
  put_byte(&img, 2 << 3 | 0), put_varint(&img, (uint64_t)width);
  put_byte(&img, 3 << 3 | 0), put_varint(&img, 3);  // colorspace 3: RGB
  put_bytes_field(&img, 4, png, n);                   // encoded_image_string
  put_bytes_field(&val, 1, tag, strlen(tag));
  if (description) {  // SummaryMetadata {plugin_data {plugin_name}, summary_description}
    put_bytes_field(&plug, 1, "images", 6);
    if (plug.oom) meta.oom = 1;
    else put_bytes_field(&meta, 1, plug.p, plug.len);
    put_bytes_field(&meta, 3, description, strlen(description));
    if (meta.oom) val.oom = 1;
    else put_bytes_field(&val, 9, meta.p, meta.len);   // Summary.Value.metadata
  }
  if (img.oom) val.oom = 1;
  else put_bytes_field(&val, 4, img.p, img.len);      // Summary.Value.image
  if (val.oom) sum.oom = 1;
  else put_bytes_field(&sum, 1, val.p, val.len);
  put_summary_event(b, wall_time, step, &sum);
  tfevents_buf_free(&img), tfevents_buf_free(&val), tfevents_buf_free(&sum);
  tfevents_buf_free(&meta), tfevents_buf_free(&plug);
}

tsr_status tfevents_finish(const tfevents_buf *b) {
  return b->oom ? err_set(TSR_ENOMEM, "tensorboard: out of memory encoding an event") : TSR_OK;
}

void tfevents_buf_free(tfevents_buf *b) {
  free(b->p);
  *b = (tfevents_buf){0};
}

int tfevents_record_step(const unsigned char *p, size_t n, size_t *size, int64_t *step) {
  if (n < 12 || (uint32_t)get_le(p + 8, 4) != crc32c_masked(p, 8)) return -1;
  uint64_t len = get_le(p, 8);
  if (n < 16 || len > n - 16 || (uint32_t)get_le(p + 12 + len, 4) != crc32c_masked(p + 12, len)) return -1;
  *size = 16 + (size_t)len;
  *step = 0;
  const unsigned char *d = p + 12;
  if (len >= 11 && d[0] == (1 << 3 | 1) && d[9] == (2 << 3 | 0)) {  // our head: wall_time, step
    uint64_t v = 0;
    for (size_t i = 10, shift = 0; i < len && shift < 64; i++, shift += 7) {
      v |= (uint64_t)(d[i] & 0x7F) << shift;
      if (!(d[i] & 0x80)) break;
    }
    *step = (int64_t)v;
  }
  return 0;
}
