// core/safetensors.h — the safetensors file format (https://github.com/huggingface/safetensors),
// the one parser of it in tessera: checkpoints (weights, EMA, optimizer moments, metadata),
// the reference test, and the latent and caption files that `tessera ingest --latents`
// reads (store/latent_file.h) and `tessera sample` writes.
//
// Layout: 8-byte little-endian u64 N, then N bytes of JSON header
//   {"<name>": {"dtype": "F32"|"I32"|"U8"|"BF16", "shape": [d0, ...], "data_offsets": [begin, end]},
//    ..., "__metadata__": {"<key>": "<string value>", ...}}
// then the data buffer; offsets are relative to its start. tessera writes tensors
// contiguously in the order they were added and pads the header with spaces to a multiple
// of 8 bytes, so every tensor is 8-byte aligned in the file and in the mmap. The reader
// accepts any valid file with these dtypes: header size within the file (and <= 100 MiB),
// one JSON object without duplicate keys, string metadata values, known dtypes, at most
// ST_MAX_DIMS non-negative dims, end - begin == numel * dtype size (no overflow), and
// tensors that tile the data buffer exactly: sorted by offset, each begins where the
// previous ends, the first at 0, the last ends at the end of the file (as the reference
// implementation requires; so header + data == file size: a truncated file or appended
// bytes are refused). Anything else is TSR_EFORMAT naming the file (and tensor). Data is
// little-endian (the only byte order tessera runs on).
//
// Checksums: the writer records each tensor's XXH3-64 (16 lowercase hex digits) in the
// metadata under ST_SUM_PREFIX + name ("xxh3:x_embed.weight"); st_verify checks them. As
// the tensors tile the data, every data byte is covered. Files of other writers (PyTorch)
// have none; callers that need them ask st_verify to require them.
#ifndef TESSERA_MODEL_SAFETENSORS_H
#define TESSERA_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

// BF16: the upper 16 bits of an IEEE float32 (kernels/dtype.h), as PyTorch writes it.
typedef enum { ST_F32, ST_I32, ST_U8, ST_BF16 } st_dtype;
#define ST_SUM_PREFIX "xxh3:"  // metadata key prefix of tensor checksums (reserved)
#define ST_MAX_DIMS 8

typedef struct {
  const char *name;
  st_dtype dtype;
  int ndim;                      // 0 .. ST_MAX_DIMS (0: a scalar of one element)
  int64_t shape[ST_MAX_DIMS];
  size_t nbytes;
  const void *data;              // reader: inside the mmap (aligned only as the file is)
} st_tensor;

const char *st_dtype_name(st_dtype d);  // "F32", "I32", "U8", "BF16"
// Bytes of one element (0 for an unknown value).
size_t st_dtype_size(st_dtype d);

// ---- writer: add named host tensors and metadata, then commit atomically ---------------
typedef struct st_writer st_writer;
tsr_status st_writer_new(st_writer **w);
// Adds a tensor. Names and shapes are copied; `data` (nbytes = numel * dtype size, host
// memory) is NOT copied and must stay valid until st_writer_commit. Duplicate names fail.
tsr_status st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim,
                         const int64_t *shape, const void *data);
// Adds a metadata string (key and value copied). Duplicate keys and keys starting with
// ST_SUM_PREFIX (reserved for the checksums commit records) fail.
tsr_status st_writer_meta(st_writer *w, const char *key, const char *value);
// Records every tensor's checksum (ST_SUM_PREFIX + name) in the metadata, then
// writes `path` atomically: PATH.tmp.PID, fsync, rename to path, fsync of the directory.
// On error no file at `path` is changed and the temporary file is removed. The writer
// stays valid (commit again, or free).
tsr_status st_writer_commit(st_writer *w, const char *path);
void st_writer_free(st_writer **w);

// ---- streaming: tensors whose bytes come piece by piece (a model larger than memory) ----
// Declare every tensor with st_writer_add and data NULL, add the metadata (a value known
// only at the end: st_writer_meta with a placeholder of the final value's length, replaced
// by st_writer_meta_set before commit), then:
//   st_writer_stream_begin(w, path): writes the header (checksums as placeholders of their
//     final length) to the temporary file of an atomic write (core/fs.h);
//   st_writer_stream(w, data, nbytes): appends the next bytes of the tensors, in declaration
//     order, split anyhow, hashing them on the way;
//   st_writer_stream_commit(w): TSR_EINVAL unless every declared byte came; writes the header
//     again in place with the checksums and the replaced values (same length: TSR_EINVAL if
//     a value changed its length), then fsyncs and renames as st_writer_commit does.
// On any error, or st_writer_free before commit, the temporary file is removed and `path`
// is untouched. Memory: the header and one hash state.
tsr_status st_writer_meta_set(st_writer *w, const char *key, const char *value);
tsr_status st_writer_stream_begin(st_writer *w, const char *path);
tsr_status st_writer_stream(st_writer *w, const void *data, size_t nbytes);
tsr_status st_writer_stream_commit(st_writer *w);

// ---- reader: mmap, validate, look up tensors and metadata ----------------------------
typedef struct st_reader st_reader;
tsr_status st_open(st_reader **r, const char *path);
void st_close(st_reader **r);
const char *st_path(const st_reader *r);
int st_count(const st_reader *r);
const st_tensor *st_at(const st_reader *r, int i);          // in file order of data
const st_tensor *st_find(const st_reader *r, const char *name);  // NULL if absent
const char *st_meta(const st_reader *r, const char *key);   // NULL if absent
// Hashes every tensor of the file and compares it with its recorded checksum; a
// checksum of a tensor the header does not list, or a malformed one, fails too. require:
// a tensor without a checksum fails (0: it is skipped). TSR_EFORMAT naming the file and
// the tensor. Reads the whole data buffer.
tsr_status st_verify(const st_reader *r, int require);
// Tells the OS that tensor t's pages of the mapping are not needed any more (they leave this
// process's resident set and stay in the page cache; a later read maps them again): a
// reader going through a file larger than memory tensor by tensor stays bounded. No-op for
// an empty tensor.
void st_release(const st_reader *r, const st_tensor *t);
// Copies tensor `name` to dst (host, nbytes) after checking it exists with this dtype and
// shape; TSR_EMISMATCH / TSR_EFORMAT messages name the file, tensor, expected and found.
tsr_status st_read(const st_reader *r, const char *name, st_dtype dtype, int ndim,
                   const int64_t *shape, void *dst);

#endif
