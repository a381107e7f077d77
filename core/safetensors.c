// core/safetensors.c — safetensors writer (atomic commit) and validating mmap reader.
#include "core/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/fs.h"

#define MAX_HEADER (100u << 20)  // the reference implementation's limit

#define NDTYPES 4
static const char *DTYPE_NAMES[NDTYPES] = {"F32", "I32", "U8", "BF16"};
static const size_t DTYPE_SIZES[NDTYPES] = {4, 4, 1, 2};

const char *st_dtype_name(st_dtype d) { return (unsigned)d < NDTYPES ? DTYPE_NAMES[d] : "?"; }
size_t st_dtype_size(st_dtype d) { return (unsigned)d < NDTYPES ? DTYPE_SIZES[d] : 0; }

// numel * dtype size, or SIZE_MAX on overflow / negative dims.
static size_t tensor_bytes(st_dtype dt, int ndim, const int64_t *shape) {
  size_t n = DTYPE_SIZES[dt];
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || __builtin_mul_overflow(n, (size_t)shape[i], &n)) return SIZE_MAX;
  }
  return n;
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, ")");
}

// ---- writer ------------------------------------------------------------------------------
struct st_writer {
  st_tensor *t;
  char **names;
  int n, cap;
  json_t *meta;
  // streaming (st_writer_stream_*): the open temporary file, the header's length, the
  // tensor being written, its bytes so far, their hash state and the finished checksums
  fs_atomic a;
  int streaming;
  size_t hlen;
  int cur;
  size_t done;
  XXH3_state_t *h;
  uint64_t *sums;
};

tsr_status st_writer_new(st_writer **w) {
  *w = calloc(1, sizeof **w);
  if (!*w || !((*w)->meta = json_object())) {
    free(*w);
    *w = NULL;
    return err_set(TSR_ENOMEM, "safetensors writer: no memory");
  }
  return TSR_OK;
}

void st_writer_free(st_writer **pw) {
  st_writer *w = *pw;
  if (!w) return;
  if (w->streaming) fs_atomic_abort(&w->a);
  XXH3_freeState(w->h);
  free(w->sums);
  for (int i = 0; i < w->n; i++) free(w->names[i]);
  free(w->names), free(w->t);
  json_decref(w->meta);
  free(w);
  *pw = NULL;
}

tsr_status st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim,
                         const int64_t *shape, const void *data) {
  if (!name || !*name || !strcmp(name, "__metadata__") || (unsigned)dtype >= NDTYPES || ndim < 0 ||
      ndim > ST_MAX_DIMS)
    return err_set(TSR_EINVAL, "safetensors: bad tensor '%s' (name, dtype or %d dims)",
                   name ? name : "(null)", ndim);
  size_t nb = tensor_bytes(dtype, ndim, shape);
  if (nb == SIZE_MAX) return err_set(TSR_EINVAL, "safetensors: tensor %s: bad shape", name);
  // data NULL: bytes streamed later (st_writer_stream); st_writer_commit refuses it
  for (int i = 0; i < w->n; i++)
    if (!strcmp(w->names[i], name))
      return err_set(TSR_EINVAL, "safetensors: tensor %s added twice", name);
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 64;
    st_tensor *t = realloc(w->t, sizeof *t * (size_t)cap);
    if (t) w->t = t;
    char **nm = realloc(w->names, sizeof *nm * (size_t)cap);
    if (nm) w->names = nm;
    if (!t || !nm) return err_set(TSR_ENOMEM, "safetensors: no memory");
    w->cap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return err_set(TSR_ENOMEM, "safetensors: no memory");
  st_tensor *t = &w->t[w->n];
  memset(t, 0, sizeof *t);
  w->names[w->n++] = copy;
  t->name = copy, t->dtype = dtype, t->ndim = ndim, t->nbytes = nb, t->data = data;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  return TSR_OK;
}

tsr_status st_writer_meta(st_writer *w, const char *key, const char *value) {
  if (!key || !value) return err_set(TSR_EINVAL, "safetensors: metadata key or value is NULL");
  if (!strncmp(key, ST_SUM_PREFIX, strlen(ST_SUM_PREFIX)))
    return err_set(TSR_EINVAL, "safetensors: metadata key %s: the prefix '%s' is reserved for "
                   "tensor checksums", key, ST_SUM_PREFIX);
  if (json_object_get(w->meta, key))
    return err_set(TSR_EINVAL, "safetensors: metadata key %s added twice", key);
  json_t *v = json_string(value);
  if (!v || json_object_set_new(w->meta, key, v))
    return err_set(TSR_EINVAL, "safetensors: metadata %s: value is not valid UTF-8", key);
  return TSR_OK;
}

static char *build_header(const st_writer *w, size_t *len) {
  json_t *root = json_object();
  size_t off = 0;
  for (int i = 0; root && i < w->n; i++) {
    const st_tensor *t = &w->t[i];
    json_t *shape = json_array();
    for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
    json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", DTYPE_NAMES[t->dtype], "shape", shape,
                          "data_offsets", (json_int_t)off, (json_int_t)(off + t->nbytes));
    if (!e || json_object_set_new(root, t->name, e)) {
      json_decref(root);
      return NULL;
    }
    off += t->nbytes;
  }
  if (root && json_object_size(w->meta)) json_object_set(root, "__metadata__", w->meta);
  char *s = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(root);
  if (!s) return NULL;
  size_t n = strlen(s), padded = (n + 7) / 8 * 8;
  char *p = realloc(s, padded + 1);
  if (!p) return free(s), NULL;
  memset(p + n, ' ', padded - n);
  p[padded] = 0;
  *len = padded;
  return p;
}

static tsr_status write_all(FILE *f, const void *p, size_t n, const char *path) {
  if (n && fwrite(p, 1, n, f) != n)
    return err_set(TSR_EIO, "write %s: %s (disk full?)", path, strerror(errno));
  return TSR_OK;
}

// Records every tensor's XXH3-64 in the metadata (ST_SUM_PREFIX + name), replacing the
// values of an earlier commit (the data may have changed in between).
static tsr_status add_checksums(st_writer *w) {
  for (int i = 0; i < w->n; i++) {
    char key[1024], hex[24];
    if ((size_t)snprintf(key, sizeof key, "%s%s", ST_SUM_PREFIX, w->t[i].name) >= sizeof key)
      return err_set(TSR_EINVAL, "safetensors: tensor name %s is too long", w->t[i].name);
    snprintf(hex, sizeof hex, "%016llx",
             (unsigned long long)XXH3_64bits(w->t[i].data, w->t[i].nbytes));
    if (json_object_set_new(w->meta, key, json_string(hex)))
      return err_set(TSR_ENOMEM, "safetensors: no memory");
  }
  return TSR_OK;
}

tsr_status st_writer_commit(st_writer *w, const char *path) {
  for (int i = 0; i < w->n; i++)
    if (w->t[i].nbytes && !w->t[i].data)
      return err_set(TSR_EINVAL, "safetensors %s: tensor %s: data is NULL", path, w->t[i].name);
  tsr_status cs = add_checksums(w);
  if (cs) return cs;
  size_t hlen;
  char *header = build_header(w, &hlen);
  if (!header) return err_set(TSR_ENOMEM, "safetensors %s: cannot build the header", path);
  fs_atomic a;
  tsr_status st = fs_atomic_open(&a, path);
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  if (!st) st = write_all(a.f, le, 8, a.tmp);
  if (!st) st = write_all(a.f, header, hlen, a.tmp);
  for (int i = 0; !st && i < w->n; i++) st = write_all(a.f, w->t[i].data, w->t[i].nbytes, a.tmp);
  if (!st) st = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  free(header);
  return st;
}

tsr_status st_writer_meta_set(st_writer *w, const char *key, const char *value) {
  json_t *old = key ? json_object_get(w->meta, key) : NULL;
  if (!old || !value)
    return err_set(TSR_EINVAL, "safetensors: metadata key %s was never added", key ? key : "?");
  if (w->streaming && strlen(json_string_value(old)) != strlen(value))
    return err_set(TSR_EINVAL, "safetensors: metadata %s: a streamed header's value keeps its "
                   "length (%zu, not %zu)", key, strlen(json_string_value(old)), strlen(value));
  json_t *v = json_string(value);
  if (!v || json_object_set_new(w->meta, key, v))
    return err_set(TSR_EINVAL, "safetensors: metadata %s: value is not valid UTF-8", key);
  return TSR_OK;
}

// Placeholder checksums: the header then has its final length.
static tsr_status zero_checksums(st_writer *w) {
  for (int i = 0; i < w->n; i++) {
    char key[1024];
    if ((size_t)snprintf(key, sizeof key, "%s%s", ST_SUM_PREFIX, w->t[i].name) >= sizeof key)
      return err_set(TSR_EINVAL, "safetensors: tensor name %s is too long", w->t[i].name);
    if (json_object_set_new(w->meta, key, json_string("0000000000000000")))
      return err_set(TSR_ENOMEM, "safetensors: no memory");
  }
  return TSR_OK;
}

static tsr_status stream_fail(st_writer *w, tsr_status st) {
  if (w->streaming) fs_atomic_abort(&w->a);
  w->streaming = 0;
  return st;
}

tsr_status st_writer_stream_begin(st_writer *w, const char *path) {
  if (w->streaming) return err_set(TSR_EINVAL, "safetensors %s: already streaming", path);
  w->sums = calloc((size_t)w->n + 1, sizeof *w->sums);
  w->h = XXH3_createState();
  if (!w->sums || !w->h || XXH3_64bits_reset(w->h) != XXH_OK)
    return err_set(TSR_ENOMEM, "safetensors %s: no memory", path);
  tsr_status st = zero_checksums(w);
  char *header = st ? NULL : build_header(w, &w->hlen);
  if (!st && !header) st = err_set(TSR_ENOMEM, "safetensors %s: cannot build the header", path);
  if (!st) st = fs_atomic_open(&w->a, path);
  if (st) return free(header), st;
  w->streaming = 1, w->cur = 0, w->done = 0;
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)w->hlen >> (8 * i));
  st = write_all(w->a.f, le, 8, w->a.tmp);
  if (!st) st = write_all(w->a.f, header, w->hlen, w->a.tmp);
  free(header);
  return st ? stream_fail(w, st) : TSR_OK;
}

// Closes every finished tensor at the cursor (empty ones included): its checksum kept.
static void stream_close_done(st_writer *w) {
  while (w->cur < w->n && w->done == w->t[w->cur].nbytes) {
    w->sums[w->cur++] = XXH3_64bits_digest(w->h);
    XXH3_64bits_reset(w->h);
    w->done = 0;
  }
}

tsr_status st_writer_stream(st_writer *w, const void *data, size_t nbytes) {
  if (!w->streaming) return err_set(TSR_EINVAL, "safetensors: not streaming");
  const char *p = data;
  while (nbytes) {
    stream_close_done(w);
    if (w->cur == w->n)
      return stream_fail(w, err_set(TSR_EINVAL, "safetensors %s: more bytes than the declared "
                                    "tensors hold", w->a.tmp));
    size_t take = w->t[w->cur].nbytes - w->done;
    if (take > nbytes) take = nbytes;
    XXH3_64bits_update(w->h, p, take);
    tsr_status st = write_all(w->a.f, p, take, w->a.tmp);
    if (st) return stream_fail(w, st);
    w->done += take, p += take, nbytes -= take;
  }
  return TSR_OK;
}

tsr_status st_writer_stream_commit(st_writer *w) {
  if (!w->streaming) return err_set(TSR_EINVAL, "safetensors: not streaming");
  stream_close_done(w);
  if (w->cur < w->n)
    return stream_fail(w, err_set(TSR_EINVAL, "safetensors %s: tensor %s has %zu of its %zu "
                                  "bytes", w->a.tmp, w->t[w->cur].name, w->done,
                                  w->t[w->cur].nbytes));
  tsr_status st = TSR_OK;
  for (int i = 0; !st && i < w->n; i++) {
    char key[1024], hex[24];
    snprintf(key, sizeof key, "%s%s", ST_SUM_PREFIX, w->t[i].name);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)w->sums[i]);
    if (json_object_set_new(w->meta, key, json_string(hex)))
      st = err_set(TSR_ENOMEM, "safetensors: no memory");
  }
  size_t hlen = 0;
  char *header = st ? NULL : build_header(w, &hlen);
  if (!st && (!header || hlen != w->hlen))
    st = err_set(TSR_EINVAL, "safetensors %s: the header changed its length (%zu, was %zu)",
                 w->a.tmp, hlen, w->hlen);
  if (!st && fseek(w->a.f, 8, SEEK_SET))
    st = err_set(TSR_EIO, "seek in %s: %s", w->a.tmp, strerror(errno));
  if (!st) st = write_all(w->a.f, header, hlen, w->a.tmp);
  if (!st) st = fs_atomic_commit(&w->a);
  free(header);
  if (st) return stream_fail(w, st);
  fs_atomic_abort(&w->a);  // committed: only releases its state
  w->streaming = 0;
  return TSR_OK;
}

// ---- reader ------------------------------------------------------------------------------
struct st_reader {
  char *path;
  void *map;
  size_t size;
  st_tensor *t;
  int n;
  json_t *root;  // owns the name strings
  json_t *meta;  // borrowed from root, or NULL
};

const char *st_path(const st_reader *r) { return r->path; }

void st_release(const st_reader *r, const st_tensor *t) {
  if (!t->nbytes) return;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)r->map, lo = (uintptr_t)t->data, hi = lo + t->nbytes;
  lo = base + (lo - base) / page * page;  // whole pages; a neighbour's share maps back in
  (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
int st_count(const st_reader *r) { return r->n; }
const st_tensor *st_at(const st_reader *r, int i) { return i >= 0 && i < r->n ? &r->t[i] : NULL; }

const st_tensor *st_find(const st_reader *r, const char *name) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->t[i].name, name)) return &r->t[i];
  return NULL;
}

const char *st_meta(const st_reader *r, const char *key) {
  json_t *v = r->meta ? json_object_get(r->meta, key) : NULL;
  return v ? json_string_value(v) : NULL;
}

void st_close(st_reader **pr) {
  st_reader *r = *pr;
  if (!r) return;
  if (r->map) munmap(r->map, r->size);
  json_decref(r->root);
  free(r->t), free(r->path);
  free(r);
  *pr = NULL;
}

static int by_begin(const void *a, const void *b) {
  const st_tensor *x = a, *y = b;
  const char *px = x->data, *py = y->data;
  if (px != py) return px < py ? -1 : 1;
  return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;  // empty tensors first
}

// Parses one header entry into t; data_base: the data buffer of data_len bytes.
static tsr_status parse_entry(st_reader *r, const char *name, json_t *e, st_tensor *t,
                              const char *data_base, size_t data_len) {
  const char *p = r->path;
  json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
         *of = json_object_get(e, "data_offsets");
  if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(of) ||
      json_array_size(of) != 2)
    return err_set(TSR_EFORMAT, "%s: tensor %s: entry needs dtype, shape and data_offsets [begin, end]",
                   p, name);
  const char *ds = json_string_value(dt);
  int d = -1;
  for (int i = 0; i < NDTYPES; i++)
    if (!strcmp(ds, DTYPE_NAMES[i])) d = i;
  if (d < 0)
    return err_set(TSR_EFORMAT, "%s: tensor %s: dtype %s is not supported (F32, I32, U8, BF16)", p,
                   name, ds);
  t->name = name, t->dtype = (st_dtype)d;
  size_t nd = json_array_size(sh);
  if (nd > ST_MAX_DIMS)
    return err_set(TSR_EFORMAT, "%s: tensor %s: %zu dimensions (at most %d)", p, name, nd, ST_MAX_DIMS);
  t->ndim = (int)nd;
  for (size_t i = 0; i < nd; i++) {
    json_t *v = json_array_get(sh, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return err_set(TSR_EFORMAT, "%s: tensor %s: shape[%zu] is not a non-negative integer", p, name, i);
    t->shape[i] = json_integer_value(v);
  }
  json_t *b = json_array_get(of, 0), *en = json_array_get(of, 1);
  if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
      json_integer_value(en) < json_integer_value(b) || (uint64_t)json_integer_value(en) > data_len)
    return err_set(TSR_EFORMAT,
                   "%s: tensor %s: data_offsets outside the %zu-byte data buffer (truncated file?)",
                   p, name, data_len);
  size_t begin = (size_t)json_integer_value(b), end = (size_t)json_integer_value(en);
  size_t nb = tensor_bytes(t->dtype, t->ndim, t->shape);
  if (nb != end - begin)
    return err_set(TSR_EFORMAT, "%s: tensor %s: %zu data bytes for a shape of %zu bytes", p, name,
                   end - begin, nb);
  t->nbytes = nb, t->data = data_base + begin;
  return TSR_OK;
}

tsr_status st_open(st_reader **out, const char *path) {
  *out = NULL;
  st_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    return err_set(TSR_ENOMEM, "safetensors: no memory");
  }
  tsr_status st = TSR_OK;
  int fd = -1;
  struct stat sb;
  // a regular file only: a FIFO named as a checkpoint or caption would block here forever
  if ((st = fs_open_regular(path, &fd))) goto fail;
  if (fstat(fd, &sb)) {
    st = err_set(TSR_EIO, "stat %s: %s", path, strerror(errno));
    close(fd);
    goto fail;
  }
  r->size = (size_t)sb.st_size;
  if (r->size < 8) {
    close(fd);
    st = err_set(TSR_EFORMAT, "%s: %zu bytes is too short for a safetensors file", path, r->size);
    goto fail;
  }
  r->map = mmap(NULL, r->size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (r->map == MAP_FAILED) {
    r->map = NULL;
    st = err_set(TSR_EIO, "mmap %s: %s", path, strerror(errno));
    goto fail;
  }
  const uint8_t *m = r->map;
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)m[i] << (8 * i);
  if (hlen > MAX_HEADER || hlen > r->size - 8) {
    st = err_set(TSR_EFORMAT, "%s: header size %llu exceeds the file (%zu bytes) or 100 MiB: not a "
                              "safetensors file or truncated",
                 path, (unsigned long long)hlen, r->size);
    goto fail;
  }
  json_error_t je;
  r->root = json_loadb((const char *)m + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
  if (!r->root || !json_is_object(r->root)) {
    st = err_set(TSR_EFORMAT, "%s: header is not a JSON object: %s", path,
                 r->root ? "not an object" : je.text);
    goto fail;
  }
  const char *data = (const char *)m + 8 + hlen;
  size_t data_len = r->size - 8 - (size_t)hlen;
  r->t = calloc(json_object_size(r->root) + 1, sizeof *r->t);
  if (!r->t) {
    st = err_set(TSR_ENOMEM, "safetensors %s: no memory", path);
    goto fail;
  }
  const char *key;
  json_t *val;
  json_object_foreach(r->root, key, val) {
    if (!strcmp(key, "__metadata__")) {
      const char *k2;
      json_t *v2;
      if (!json_is_object(val)) {
        st = err_set(TSR_EFORMAT, "%s: __metadata__ is not an object", path);
        goto fail;
      }
      json_object_foreach(val, k2, v2) if (!json_is_string(v2)) {
        st = err_set(TSR_EFORMAT, "%s: metadata %s is not a string", path, k2);
        goto fail;
      }
      r->meta = val;
      continue;
    }
    if ((st = parse_entry(r, key, val, &r->t[r->n], data, data_len))) goto fail;
    r->n++;
  }
  qsort(r->t, (size_t)r->n, sizeof *r->t, by_begin);
  // The tensors must tile the data buffer exactly (as the reference implementation
  // requires): no overlap, no gap, nothing after the last one. So every byte after the
  // header belongs to one tensor and is covered by that tensor's checksum (st_verify), and
  // a truncated file or appended garbage is refused, not ignored.
  const char *prev_end = data;
  for (int i = 0; i < r->n; i++) {
    const char *begin = r->t[i].data;
    if (begin < prev_end) {
      st = err_set(TSR_EFORMAT, "%s: tensors %s and %s overlap in the data buffer", path,
                   r->t[i - 1].name, r->t[i].name);
      goto fail;
    }
    if (begin > prev_end) {
      st = err_set(TSR_EFORMAT, "%s: %zu bytes of the data buffer before tensor %s belong to no "
                   "tensor (damaged header)", path, (size_t)(begin - prev_end), r->t[i].name);
      goto fail;
    }
    prev_end = begin + r->t[i].nbytes;
  }
  if (prev_end != data + data_len) {
    st = err_set(TSR_EFORMAT, "%s: %zu bytes after the last tensor's data: the file is %zu bytes "
                 "but its header and tensors end at byte %zu (garbage appended, or a damaged "
                 "header)", path, (size_t)(data + data_len - prev_end), r->size,
                 (size_t)(prev_end - (const char *)m));
    goto fail;
  }
  *out = r;
  return TSR_OK;
fail:
  st_close(&r);
  return st;
}

tsr_status st_read(const st_reader *r, const char *name, st_dtype dtype, int ndim,
                   const int64_t *shape, void *dst) {
  const st_tensor *t = st_find(r, name);
  if (!t)
    return err_set(TSR_EMISMATCH, "%s: no tensor %s (checkpoint of another model?)", r->path, name);
  int same = t->dtype == dtype && t->ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
  if (!same) {
    char want[128], got[128];
    shape_str(want, sizeof want, ndim, shape);
    shape_str(got, sizeof got, t->ndim, t->shape);
    return err_set(TSR_EMISMATCH, "%s: tensor %s is %s %s, expected %s %s", r->path, name,
                   DTYPE_NAMES[t->dtype], got, st_dtype_name(dtype), want);
  }
  if (t->nbytes) memcpy(dst, t->data, t->nbytes);
  return TSR_OK;
}

// The recorded checksum of tensor `name`: 1 and *sum if present and well formed, 0 if
// absent, -1 if malformed.
static int recorded_sum(const st_reader *r, const char *name, uint64_t *sum) {
  char key[1024];
  if ((size_t)snprintf(key, sizeof key, "%s%s", ST_SUM_PREFIX, name) >= sizeof key) return -1;
  const char *v = st_meta(r, key);
  if (!v) return 0;
  uint64_t x = 0;
  int i = 0;
  for (; v[i] && i < 16; i++) {
    char c = v[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    x = x << 4 | (uint64_t)d;
  }
  if (i != 16 || v[i]) return -1;
  *sum = x;
  return 1;
}

tsr_status st_verify(const st_reader *r, int require) {
  for (int i = 0; i < r->n; i++) {
    const st_tensor *t = &r->t[i];
    uint64_t want;
    int has = recorded_sum(r, t->name, &want);
    if (has < 0)
      return err_set(TSR_EFORMAT, "%s: tensor %s: its recorded checksum (metadata %s%s) is not "
                     "16 hex digits: damaged header", r->path, t->name, ST_SUM_PREFIX, t->name);
    if (!has) {
      if (!require) continue;
      return err_set(TSR_EFORMAT, "%s: tensor %s has no recorded checksum (metadata %s%s): "
                     "damaged header", r->path, t->name, ST_SUM_PREFIX, t->name);
    }
    uint64_t got = XXH3_64bits(t->data, t->nbytes);
    if (got != want)
      return err_set(TSR_EFORMAT, "%s: tensor %s is damaged: its data hashes to %016llx, the "
                     "header records %016llx", r->path, t->name, (unsigned long long)got,
                     (unsigned long long)want);
  }
  if (r->meta) {  // a checksum of a tensor the header does not list: a damaged header
    const char *key;
    json_t *v;
    size_t pl = strlen(ST_SUM_PREFIX);
    json_object_foreach(r->meta, key, v) {
      if (!strncmp(key, ST_SUM_PREFIX, pl) && !st_find(r, key + pl))
        return err_set(TSR_EFORMAT, "%s: metadata %s is the checksum of tensor %s, which the "
                       "header does not list: damaged header", r->path, key, key + pl);
    }
  }
  return TSR_OK;
}
