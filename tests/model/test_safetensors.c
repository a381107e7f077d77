// tests/model/test_safetensors.c — round trip of tensors and metadata, model tensors by
// name with shape checks, atomic commit, corrupt files rejected with messages that name
// the file and tensor (layout, exact size), per-tensor checksums (st_verify).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tmp_files.h"
#include "mt.h"
#include "model/io/dit_io.h"

static char dir[] = "/tmp/tsr_st_XXXXXX";
static char path[256], bad[256];

static void write_bytes(const char *p, const void *d, size_t n) {
  FILE *f = fopen(p, "wb");
  fwrite(d, 1, n, f);
  fclose(f);
}

static char *read_file(const char *p, size_t *n) {
  FILE *f = fopen(p, "rb");
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc(*n + 1);
  *n = fread(b, 1, *n, f);
  fclose(f);
  return b;
}

// A file with this JSON header and `data_len` zero bytes of data.
static void write_raw(const char *json, size_t data_len) {
  size_t h = strlen(json);
  char *b = calloc(8 + h + data_len + 1, 1);
  for (int i = 0; i < 8; i++) b[i] = (char)((uint64_t)h >> (8 * i));
  memcpy(b + 8, json, h);
  write_bytes(bad, b, 8 + h + data_len);
  free(b);
}

static void expect_bad(const char *needle) {
  st_reader *r;
  tsr_status st = st_open(&r, bad);
  CHECK(st == TSR_EFORMAT && strstr(err_msg(), needle) && strstr(err_msg(), bad),
        "want EFORMAT '%s', got %d '%s'", needle, st, err_msg());
  st_close(&r);
}

// The file of header JSON and one data byte opens, and its checksum verification (checksums
// not required) fails with NEEDLE in the message; WHAT names the case.
static void expect_unverified(const char *json, const char *needle, const char *what) {
  st_reader *r = NULL;
  write_raw(json, 1);
  CHECK_OK(st_open(&r, bad));
  CHECK(st_verify(r, 0) == TSR_EFORMAT && strstr(err_msg(), needle), "%s: %s", what, err_msg());
  st_close(&r);
}

// Streaming (st_writer_stream_*): the bytes of every tensor in uneven pieces give the file
// st_writer_commit writes from whole buffers, with a metadata value replaced at the end;
// too few or too many bytes, or a value changing its length, fail and leave no file.
static void test_stream(void) {
  float f[6] = {1, -2, 3.5f, 4, 5, 6e-30f};
  uint8_t u8[5] = {0, 1, 2, 254, 255};
  char whole[300], streamed[300];
  snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
  snprintf(streamed, sizeof streamed, "%s/streamed.safetensors", dir);
  st_writer *w;
  CHECK_OK(st_writer_new(&w));
  CHECK_OK(st_writer_add(w, "f", ST_F32, 2, (int64_t[]){2, 3}, f));
  CHECK_OK(st_writer_add(w, "empty", ST_F32, 1, (int64_t[]){0}, NULL));
  CHECK_OK(st_writer_add(w, "u", ST_U8, 1, (int64_t[]){5}, u8));
  CHECK_OK(st_writer_meta(w, "sum", "abcd"));
  CHECK_OK(st_writer_commit(w, whole));
  st_writer_free(&w);
  for (int pass = 0; pass < 4; pass++) {  // 0: good; 1: short; 2: long; 3: value's length
    CHECK_OK(st_writer_new(&w));
    CHECK_OK(st_writer_add(w, "f", ST_F32, 2, (int64_t[]){2, 3}, NULL));
    CHECK_OK(st_writer_add(w, "empty", ST_F32, 1, (int64_t[]){0}, NULL));
    CHECK_OK(st_writer_add(w, "u", ST_U8, 1, (int64_t[]){5}, NULL));
    CHECK_OK(st_writer_meta(w, "sum", "????"));
    char out[300];  // the failing passes' own names: none of them may appear
    snprintf(out, sizeof out, "%s/streamed%d.safetensors", dir, pass);
    if (!pass) snprintf(out, sizeof out, "%s", streamed);
    CHECK(st_writer_commit(w, out) == TSR_EINVAL, "commit of declared tensors");
    CHECK_OK(st_writer_stream_begin(w, out));
    CHECK_OK(st_writer_stream(w, f, 5));  // f's bytes in three pieces, u's in two
    CHECK_OK(st_writer_stream(w, (char *)f + 5, 10));
    CHECK_OK(st_writer_stream(w, (char *)f + 15, 9));
    CHECK_OK(st_writer_stream(w, u8, 2));
    if (pass != 1) CHECK_OK(st_writer_stream(w, u8 + 2, 3));
    tsr_status st = pass == 2 ? st_writer_stream(w, u8, 1) : TSR_OK;
    if (pass == 2) CHECK(st == TSR_EINVAL && strstr(err_msg(), "more bytes"), "%s", err_msg());
    st = st_writer_meta_set(w, "sum", pass == 3 ? "abcde" : "abcd");
    if (pass == 3) CHECK(st == TSR_EINVAL && strstr(err_msg(), "keeps its length"), "%s", err_msg());
    if (pass < 2) st = st_writer_stream_commit(w);
    if (pass == 1)
      CHECK(st == TSR_EINVAL && strstr(err_msg(), "tensor u has 2 of its 5 bytes"), "%s", err_msg());
    st_writer_free(&w);  // removes the temporary of a failed stream
    CHECK(pass == 0 ? st == TSR_OK : access(out, F_OK) != 0, "pass %d: file", pass);
  }
  size_t na, nb;
  char *a = read_file(whole, &na), *b = read_file(streamed, &nb);
  CHECK(na == nb && !memcmp(a, b, na), "streamed file != committed file (%zu, %zu bytes)", na, nb);
  st_reader *r;
  CHECK_OK(st_open(&r, streamed));
  CHECK_OK(st_verify(r, 1));
  st_close(&r);
  DIR *d = opendir(dir);
  int stray = 0;
  for (struct dirent *e; (e = readdir(d));) stray += strstr(e->d_name, ".tmp") != NULL;
  closedir(d);
  CHECK(!stray, "%d temporary files left", stray);
  free(a), free(b);
  remove(whole), remove(streamed);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  snprintf(path, sizeof path, "%s/a.safetensors", dir);
  snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);

  float f[6] = {1, -2, 3.5f, 4, 5, 6e-30f};
  int32_t i32[3] = {-1, 7, 1 << 30};
  uint8_t u8[5] = {0, 1, 2, 254, 255};
  float scalar = 42;
  st_writer *w;
  CHECK_OK(st_writer_new(&w));
  CHECK_OK(st_writer_add(w, "f", ST_F32, 2, (int64_t[]){2, 3}, f));
  CHECK_OK(st_writer_add(w, "i", ST_I32, 1, (int64_t[]){3}, i32));
  CHECK_OK(st_writer_add(w, "u", ST_U8, 1, (int64_t[]){5}, u8));
  CHECK_OK(st_writer_add(w, "s", ST_F32, 0, NULL, &scalar));
  CHECK_OK(st_writer_add(w, "empty", ST_F32, 2, (int64_t[]){0, 4}, NULL));
  CHECK(st_writer_add(w, "f", ST_F32, 1, (int64_t[]){1}, f) == TSR_EINVAL, "duplicate tensor");
  CHECK_OK(st_writer_meta(w, "step", "123"));
  CHECK_OK(st_writer_meta(w, "config", "[model]\nhidden = 64\n\"quoted\" \\ ok"));
  CHECK(st_writer_meta(w, "step", "1") == TSR_EINVAL, "duplicate meta");
  CHECK_OK(st_writer_commit(w, path));
  st_writer_free(&w);
  CHECK(!tmp_exists(path), "temporary file left");

  st_reader *r;
  CHECK_OK(st_open(&r, path));
  CHECK(st_count(r) == 5, "count %d", st_count(r));
  const st_tensor *t = st_find(r, "f");
  CHECK(t && t->ndim == 2 && t->shape[1] == 3 && !memcmp(t->data, f, sizeof f), "f");
  CHECK(((uintptr_t)t->data % 8) == 0, "data not 8-aligned");
  int32_t i2[3];
  uint8_t u2[5];
  float s2;
  CHECK_OK(st_read(r, "i", ST_I32, 1, (int64_t[]){3}, i2));
  CHECK_OK(st_read(r, "u", ST_U8, 1, (int64_t[]){5}, u2));
  CHECK_OK(st_read(r, "s", ST_F32, 0, NULL, &s2));
  CHECK(!memcmp(i2, i32, sizeof i2) && !memcmp(u2, u8, sizeof u2) && s2 == 42, "values");
  CHECK(st_find(r, "empty") && st_find(r, "empty")->nbytes == 0, "empty tensor");
  CHECK(st_meta(r, "step") && !strcmp(st_meta(r, "step"), "123"), "meta step");
  CHECK(st_meta(r, "config") && !strcmp(st_meta(r, "config"), "[model]\nhidden = 64\n\"quoted\" \\ ok"),
        "meta config");
  CHECK(st_meta(r, "nope") == NULL, "absent meta");
  float wrong[6];
  CHECK(st_read(r, "f", ST_F32, 2, (int64_t[]){3, 2}, wrong) == TSR_EMISMATCH &&
            strstr(err_msg(), "tensor f is F32 (2, 3), expected F32 (3, 2)"),
        "shape mismatch: %s", err_msg());
  CHECK(st_read(r, "i", ST_F32, 1, (int64_t[]){3}, wrong) == TSR_EMISMATCH, "dtype mismatch");
  CHECK(st_read(r, "zz", ST_F32, 1, (int64_t[]){3}, wrong) == TSR_EMISMATCH &&
            strstr(err_msg(), "no tensor zz"),
        "missing: %s", err_msg());
  st_close(&r);

  // model tensors by name, through the flat layout
  const kernels_backend *kb = kernels_cpu();
  dit_config c = mt_config();
  dit_model *m;
  CHECK_OK(dit_create(&m, &c, kb, 8, 2));
  CHECK_OK(dit_init(m, 5));
  CHECK_OK(mt_perturb(m, 6, 0.1f));
  size_t n = dit_num_params(m);
  float *back = calloc(n, sizeof(float));
  CHECK_OK(st_writer_new(&w));
  CHECK_OK(dit_write_tensors(m, w, "ema.", dit_params(m)));
  CHECK_OK(st_writer_commit(w, path));  // replaces the first file atomically
  st_writer_free(&w);
  CHECK_OK(st_open(&r, path));
  CHECK_OK(dit_read_tensors(m, r, "ema.", back));
  CHECK(!memcmp(back, dit_params(m), n * sizeof(float)), "model tensors round trip");
  CHECK(dit_read_tensors(m, r, "weights.", back) == TSR_EMISMATCH &&
            strstr(err_msg(), "no tensor weights.x_embed.weight"),
        "prefix: %s", err_msg());
  st_close(&r);
  dit_model *other;
  c.hidden = 24, c.heads = 2;
  CHECK_OK(dit_create(&other, &c, kb, 8, 2));
  CHECK_OK(st_open(&r, path));
  float *ob = calloc(dit_num_params(other), sizeof(float));
  CHECK(dit_read_tensors(other, r, "ema.", ob) == TSR_EMISMATCH &&
            strstr(err_msg(), "ema.x_embed.weight is F32 (12, 16), expected F32 (12, 24)"),
        "other model: %s", err_msg());
  st_close(&r);

  // corruption
  size_t len;
  char *good = read_file(path, &len);
  write_bytes(bad, good, 5);
  expect_bad("too short");
  write_bytes(bad, good, len - 4);  // truncated data
  expect_bad("outside the");
  char *hdr = malloc(len);
  memcpy(hdr, good, len);
  hdr[0] = (char)0xff, hdr[1] = (char)0xff, hdr[2] = (char)0xff;
  write_bytes(bad, hdr, len);
  expect_bad("header size");
  memcpy(hdr, good, len);
  hdr[8] = '[';
  write_bytes(bad, hdr, len);
  expect_bad("not a JSON object");
  write_raw("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
  expect_bad("tensor a: dtype F16 is not supported");
  write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
  expect_bad("tensor a: 4 data bytes for a shape of 8 bytes");
  write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
  expect_bad("tensor a: shape[0]");
  write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
  expect_bad("overlap");
  write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8);
  expect_bad("tensor a: entry needs");
  write_raw("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
            "\"__metadata__\":{\"k\":3}}", 1);
  expect_bad("metadata k is not a string");
  write_raw("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  expect_bad("not a JSON object");  // duplicate keys rejected by the JSON parser
  // the tensors must tile the data exactly: appended bytes, gaps, data without tensors
  char *tail = malloc(len + 8);
  memcpy(tail, good, len);
  memcpy(tail + len, "GARBAGE!", 8);
  write_bytes(bad, tail, len + 8);
  expect_bad("8 bytes after the last tensor's data");
  write_raw("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
            "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}", 3);
  expect_bad("1 bytes of the data buffer before tensor b");
  write_raw("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2);
  expect_bad("before tensor a");
  write_raw("{}", 4);
  expect_bad("4 bytes after the last tensor's data");
  write_raw("{\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  CHECK_OK(st_open(&r, bad));  // an empty tensor at the offset of another is no overlap
  st_close(&r);

  // per-tensor checksums (recorded by commit): verified, a flipped data byte names the
  // tensor; required or not; malformed or orphaned checksum keys
  CHECK_OK(st_open(&r, path));
  CHECK_OK(st_verify(r, 1));
  st_close(&r);
  memcpy(tail, good, len);
  tail[len - 1] ^= 0x10;  // last byte: the last tensor's data
  write_bytes(bad, tail, len);
  CHECK_OK(st_open(&r, bad));
  CHECK(st_verify(r, 0) == TSR_EFORMAT && strstr(err_msg(), "is damaged: its data hashes to") &&
            strstr(err_msg(), st_at(r, st_count(r) - 1)->name) && strstr(err_msg(), bad),
        "flipped data: %s", err_msg());
  st_close(&r);
  write_raw("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  CHECK_OK(st_open(&r, bad));
  CHECK_OK(st_verify(r, 0));
  CHECK(st_verify(r, 1) == TSR_EFORMAT && strstr(err_msg(), "tensor a has no recorded checksum"),
        "required: %s", err_msg());
  st_close(&r);
  expect_unverified("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"__metadata__\":{\"xxh3:a\":\"12345\"}}", "not 16 hex digits", "malformed");
  expect_unverified("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"__metadata__\":{\"xxh3:zz\":\"0123456789abcdef\"}}",
                    "tensor zz, which the header", "orphan");
  CHECK_OK(st_writer_new(&w));
  CHECK(st_writer_meta(w, "xxh3:a", "0123456789abcdef") == TSR_EINVAL, "reserved key accepted");
  st_writer_free(&w);
  free(tail);

  CHECK(st_open(&r, "/nonexistent/x.safetensors") == TSR_EIO &&
            strstr(err_msg(), "/nonexistent/x.safetensors"),
        "missing file: %s", err_msg());
  // commit into a missing directory fails and leaves nothing
  CHECK_OK(st_writer_new(&w));
  CHECK(st_writer_commit(w, "/nonexistent/dir/x.safetensors") == TSR_EIO, "commit to missing dir");
  st_writer_free(&w);

  test_stream();
  free(good), free(hdr), free(back), free(ob);
  dit_free(&m), dit_free(&other);
  remove(path), remove(bad), rmdir(dir);
  return check_done();
}
