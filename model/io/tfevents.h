// model/io/tfevents.h — TensorBoard event records: the bytes of one TFRecord holding one
// tensorflow.Event, as TensorBoard's reader expects them. Pure encoding and decoding of
// buffers; the run's file is model/train/tensorboard.h's.
//
// A record: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the
// data, uint32 masked CRC-32C of the data (core/crc32c.h). The data is an Event proto:
//   wall_time (field 1, double), step (2, int64), file_version (3, string),
//   summary (5, Summary { repeated Value value = 1 }), Value { tag = 1, simple_value = 2
//   (float) }.
// wall_time is always written first and step second, which tfevents_record_step reads back.
#ifndef TESSERA_MODEL_IO_TFEVENTS_H
#define TESSERA_MODEL_IO_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

// A growing byte buffer of records; zero-initialise, free with tfevents_buf_free.
typedef struct {
  unsigned char *p;
  size_t len, cap;
  int oom;  // an allocation failed: the buffer is incomplete (checked by tfevents_finish)
} tfevents_buf;

// Appends the record of an Event {wall_time, step, file_version} (the first record of a
// file: "brain.Event:2").
void tfevents_add_version(tfevents_buf *b, double wall_time);
// Appends the record of an Event {wall_time, step, summary} of n scalars (tags[i],
// values[i], each value rounded to float32, TensorBoard's simple_value).
void tfevents_add_scalars(tfevents_buf *b, double wall_time, int64_t step, const char *const *tags,
                          const double *values, int n);
// TSR_ENOMEM if an append failed, else TSR_OK.
// Appends the record of an Event {wall_time, step, summary} of one image: Summary.Value
// {tag, image = Image{height, width, colorspace 3 (RGB), encoded_image_string = png}},
// and with a description (non-NULL) metadata = SummaryMetadata{plugin_data{plugin_name
// "images"}, summary_description}: the text TensorBoard shows with the tag's images.
void tfevents_add_image(tfevents_buf *b, double wall_time, int64_t step, const char *tag,
                        const char *description, int height, int width, const void *png,
                        size_t n);
tsr_status tfevents_finish(const tfevents_buf *b);
void tfevents_buf_free(tfevents_buf *b);

// Reads the record at p (n bytes available): its total size (header + data + CRC) into
// *size and the Event's step (0 when absent) into *step. Returns 0, or -1 when the bytes
// are not a whole record with matching CRCs (a record torn by a crash).
int tfevents_record_step(const unsigned char *p, size_t n, size_t *size, int64_t *step);

#endif
