// core/ini.c — `key = value` files with [section] headers (core/ini.h). Written here
// rather than through libinih because Debian's build of it gives handlers no line
// numbers (so a repeated key could not name its lines), joins indented lines to the
// previous value, and cuts lines at 200 bytes.
#include "core/ini.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ini_quote(const char *line, char *buf, int cap) {
  int max = cap - 4 < 80 ? cap - 4 : 80, n = 0;
  for (; line[n] && n < max; n++)
    buf[n] = (unsigned char)line[n] < 0x20 || line[n] == 0x7f ? '?' : line[n];
  if (line[n]) buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
  buf[n] = '\0';
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
    s[--n] = '\0';
  return s;
}

// Cuts an inline comment: '#' or ';' after a blank.
static void cut_comment(char *s) {
  for (char *p = s; *p; p++)
    if ((*p == '#' || *p == ';') && p > s && (p[-1] == ' ' || p[-1] == '\t')) {
      *p = '\0';
      return;
    }
}

static tsr_status bad_line(const char *name, int lineno, const char *raw) {
  char q[96];
  ini_quote(raw, q, sizeof q);
  return err_set(TSR_EFORMAT, "%s:%d: not a 'key = value' line: '%s'", name, lineno, q);
}

// One line (modified in place); `raw` is an untouched copy for messages.
static tsr_status ini_line(const char *name, int lineno, char *line, const char *raw,
                           char **section, ini_key_fn fn, void *user) {
  char *s = trim(line);
  if (!*s || *s == '#' || *s == ';') return TSR_OK;
  if (*s == '[') {
    cut_comment(s);
    s = trim(s);
    size_t n = strlen(s);
    if (n < 3 || s[n - 1] != ']') return bad_line(name, lineno, raw);
    s[n - 1] = '\0';
    char *sec = trim(s + 1);
    if (!*sec || strpbrk(sec, "[]")) return bad_line(name, lineno, raw);
    char *copy = strdup(sec);
    if (!copy) return err_set(TSR_ENOMEM, "%s: out of memory", name);
    free(*section);
    *section = copy;
    return TSR_OK;
  }
  char *eq = strchr(s, '=');
  if (!eq) return bad_line(name, lineno, raw);
  *eq = '\0';
  char *key = trim(s), *value = eq + 1;
  cut_comment(value);
  value = trim(value);
  if (!*key || strpbrk(key, " \t[]")) return bad_line(name, lineno, raw);
  return fn(user, *section ? *section : "", key, value, lineno);
}

tsr_status ini_read(const char *name, const char *text, ini_key_fn fn, void *user) {
  FILE *f = text ? NULL : fopen(name, "r");
  if (!text && !f) return err_set(TSR_EIO, "%s: cannot open (%s)", name, strerror(errno));
  char *line = NULL, *raw = NULL, *section = NULL;
  size_t cap = 0;
  tsr_status st = TSR_OK;
  const char *p = text;
  for (int lineno = 1; !st; lineno++) {
    ssize_t n;
    if (f) {
      n = getline(&line, &cap, f);
      if (n < 0) break;
    } else {
      if (!*p) break;
      n = (ssize_t)strcspn(p, "\n");
      if (p[n] == '\n') n++;
      if ((size_t)n + 1 > cap) {
        char *g = realloc(line, (size_t)n + 1);
        if (!g) {
          st = err_set(TSR_ENOMEM, "%s: out of memory", name);
          break;
        }
        line = g, cap = (size_t)n + 1;
      }
      memcpy(line, p, (size_t)n);
      line[n] = '\0';
      p += n;
    }
    free(raw);
    raw = strdup(line);
    if (!raw) {
      st = err_set(TSR_ENOMEM, "%s: out of memory", name);
      break;
    }
    raw[strcspn(raw, "\r\n")] = '\0';
    char *s = line;
    if (lineno == 1 && !strncmp(s, "\xEF\xBB\xBF", 3)) s += 3;
    if (strlen(line) != (size_t)n) {  // a NUL byte: not text
      st = bad_line(name, lineno, raw);
      break;
    }
    st = ini_line(name, lineno, s, raw, &section, fn, user);
  }
  if (!st && f && ferror(f)) st = err_set(TSR_EIO, "%s: read error", name);
  if (f) fclose(f);
  free(line);
  free(raw);
  free(section);
  return st;
}
