// tests/train/ckpt_edit.c — a copy of a safetensors file with metadata values replaced: the
// crafted checkpoints of tests/train/ckpt_meta.sh (values a damaged or hostile file could
// hold; the metadata is not covered by the tensor checksums).
//
// usage: ckpt_edit IN OUT KEY=VALUE...   (VALUE "-" removes KEY)
// The header is rewritten (JSON, padded with spaces to a multiple of 8 bytes, as tessera
// writes it); the data buffer is copied unchanged, so every tensor and checksum stays valid.
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *path) {
  fprintf(stderr, "ckpt_edit: %s %s\n", what, path);
  return 1;
}

// The whole file (n bytes, malloc'ed) or NULL.
static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  unsigned char *buf = size >= 8 ? malloc((size_t)size) : NULL;
  if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) free(buf), buf = NULL;
  fclose(f);
  *n = (size_t)size;
  return buf;
}

int main(int argc, char **argv) {
  if (argc < 4) return fail("usage: ckpt_edit IN OUT KEY=VALUE...", "");
  size_t n;
  unsigned char *in = slurp(argv[1], &n);
  if (!in) return fail("cannot read", argv[1]);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)in[i] << (8 * i);
  if (hlen > n - 8) return fail("not a safetensors file:", argv[1]);
  json_t *root = json_loadb((const char *)in + 8, (size_t)hlen, 0, NULL);
  json_t *meta = root ? json_object_get(root, "__metadata__") : NULL;
  if (!json_is_object(meta)) return fail("no metadata in", argv[1]);
  for (int i = 3; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq) return fail("not KEY=VALUE:", argv[i]);
    *eq = 0;
    if (!strcmp(eq + 1, "-")) json_object_del(meta, argv[i]);
    else json_object_set_new(meta, argv[i], json_string(eq + 1));
  }
  char *hdr = json_dumps(root, JSON_COMPACT);
  size_t len = strlen(hdr), padded = (len + 7) / 8 * 8;
  FILE *out = fopen(argv[2], "wb");
  if (!out) return fail("cannot write", argv[2]);
  unsigned char lenb[8];
  for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  fwrite(lenb, 1, 8, out);
  fwrite(hdr, 1, len, out);
  for (size_t i = len; i < padded; i++) fputc(' ', out);
  fwrite(in + 8 + hlen, 1, n - 8 - (size_t)hlen, out);
  int bad = fclose(out) != 0;
  free(hdr);
  json_decref(root);
  free(in);
  return bad ? fail("cannot write", argv[2]) : 0;
}
