// core/ini.c — `key = value` files with [section] headers (core/ini.h), parsed by libinih.
//
// libinih (Debian's build, r55) gives handlers no line number, takes an indented line as
// the continuation of the previous value, and cuts lines at INI_MAX_LINE (200) bytes. So
// the text is fed to ini_parse_stream line by line by a reader of ours that counts the
// lines (the handler then knows the line of its key: inih handles each line right after
// reading it), drops leading blanks (no continuation lines), and refuses NUL bytes and
// lines too long for inih instead of letting them be cut. Errors of inih (a line that is
// neither a comment, a section nor `key = value`) come back as a line number, which is
// quoted from the text kept here.
#include "core/ini.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"

void ini_quote(const char *line, char *buf, int cap) {
  int max = cap - 4 < 80 ? cap - 4 : 80, n = 0;
  for (; line[n] && line[n] != '\n' && n < max; n++)
    buf[n] = (unsigned char)line[n] < 0x20 || line[n] == 0x7f ? '?' : line[n];
  if (line[n] && line[n] != '\n') buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
  if (n && buf[n - 1] == '?' && line[n - 1] == '\r') n--;  // CRLF files
  buf[n] = '\0';
}

typedef struct {
  const char *name;         // for messages
  const char *text, *end;   // the whole text
  const char *p;            // next line to hand to inih
  int line;                 // number of the line inih is working on (1-based)
  ini_key_fn fn;
  void *user;
  tsr_status st;            // the first error (of ours or of fn), or TSR_OK
  int st_line;              // its line
} ini_feed;

// Start of line `n` (1-based) of the text.
static const char *line_at(const ini_feed *f, int n) {
  const char *p = f->text;
  for (int i = 1; i < n && p < f->end; i++) {
    const char *nl = memchr(p, '\n', (size_t)(f->end - p));
    p = nl ? nl + 1 : f->end;
  }
  return p;
}

static void fail_line(ini_feed *f, int line, const char *why) {
  char q[96], raw[128];
  const char *s = line_at(f, line);
  size_t n = (size_t)(f->end - s) < sizeof raw - 1 ? (size_t)(f->end - s) : sizeof raw - 1;
  memcpy(raw, s, n);
  raw[n] = '\0';
  ini_quote(raw, q, sizeof q);
  f->st = err_set(TSR_EFORMAT, "%s:%d: %s: '%s'", f->name, line, why, q);
  f->st_line = line;
}

// ini_reader: the next line, without its leading blanks, into str (num bytes).
static char *feed_line(char *str, int num, void *stream) {
  ini_feed *f = stream;
  if (f->st || f->p >= f->end) return NULL;
  const char *nl = memchr(f->p, '\n', (size_t)(f->end - f->p));
  const char *s = f->p, *e = nl ? nl + 1 : f->end;
  f->p = e;
  f->line++;
  if (memchr(s, '\0', (size_t)(e - s))) {
    fail_line(f, f->line, "not a 'key = value' line (a NUL byte)");
    return NULL;
  }
  while (s < e && (*s == ' ' || *s == '\t')) s++;
  if (e - s > num - 1) {
    char why[96];
    snprintf(why, sizeof why, "line of %d characters, at most %d", (int)(e - s), num - 2);
    fail_line(f, f->line, why);
    return NULL;
  }
  memcpy(str, s, (size_t)(e - s));
  str[e - s] = '\0';
  // inih cuts inline comments at ';' only; cut at '#' after a blank too, as at ';'
  for (char *c = str + 1; *c; c++)
    if (*c == '#' && (c[-1] == ' ' || c[-1] == '\t')) {
      c[0] = '\n', c[1] = '\0';
      break;
    }
  // inih takes "[]" or "[a]b]" as sections: a section name must be non-empty, bracket-free
  if (str[0] == '[') {
    size_t k = strcspn(str + 1, "]");
    const char *rest = str + 1 + k;  // the ']', or the end
    int blank_name = strspn(str + 1, " \t") == k;
    const char *after = *rest ? rest + 1 + strspn(rest + 1, " \t\r\n") : rest;
    if (!*rest || blank_name || memchr(str + 1, '[', k) || (*after && *after != ';')) {
      fail_line(f, f->line, "not a 'key = value' line");
      return NULL;
    }
  }
  return str;
}

// ini_handler: one key; returns 0 (inih: error) to stop taking keys after an error.
static int on_key(void *user, const char *section, const char *key, const char *value) {
  ini_feed *f = user;
  if (f->st) return 0;
  if (!*key || strpbrk(key, " \t[]")) {
    fail_line(f, f->line, "not a 'key = value' line");
    return 0;
  }
  f->st = f->fn(f->user, section, key, value, f->line);
  f->st_line = f->line;
  return f->st == TSR_OK;
}

static tsr_status read_file(const char *name, char **text, size_t *n) {
  int fd = -1;  // a regular file or a pipe (core/fs.h): a named FIFO would hang the command
  FILE *fp = NULL;
  tsr_status opened = fs_open_input(name, FS_PIPE_OK, &fd);
  if (opened) return opened;
  if (!(fp = fdopen(fd, "rb"))) {
    close(fd);
    return err_set(TSR_EIO, "%s: cannot open (%s)", name, strerror(errno));
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  tsr_status st = TSR_OK;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      char *g = realloc(buf, cap = (len + 4096 + 1) * 2);
      if (!g) {
        st = err_set(TSR_ENOMEM, "%s: out of memory", name);
        break;
      }
      buf = g;
    }
    size_t k = fread(buf + len, 1, cap - len - 1, fp);
    len += k;
    if (k == 0) break;
  }
  if (!st && ferror(fp)) st = err_set(TSR_EIO, "%s: read error (%s)", name, strerror(errno));
  fclose(fp);
  if (st) {
    free(buf);
    return st;
  }
  buf[len] = '\0';
  *text = buf;
  *n = len;
  return TSR_OK;
}

tsr_status ini_read(const char *name, const char *text, ini_key_fn fn, void *user) {
  char *owned = NULL;
  size_t n = text ? strlen(text) : 0;
  if (!text) {
    tsr_status st = read_file(name, &owned, &n);
    if (st) return st;
    text = owned;
  }
  ini_feed f = {.name = name, .text = text, .end = text + n, .p = text, .fn = fn, .user = user};
  int bad = ini_parse_stream(feed_line, &f, on_key, &f);
  // inih's own error (a line it could not take) unless an error of ours came first
  if (bad > 0 && (!f.st || bad < f.st_line)) fail_line(&f, bad, "not a 'key = value' line");
  else if (bad < 0 && !f.st) f.st = err_set(TSR_ENOMEM, "%s: out of memory (ini parser)", name);
  free(owned);
  return f.st;
}
