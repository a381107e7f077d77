// tests/scratch.h — for C tests that run shell commands (the ffmpeg CLI as a reference) or
// work in a scratch folder: what each had written for itself.
#ifndef TESSERA_TESTS_SCRATCH_H
#define TESSERA_TESTS_SCRATCH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

// Runs the shell command printf(FMT, ...) (at most 8 KiB); its status (system(3)), and the
// command on stderr when that is not 0.
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int rc = system(cmd);
  if (rc) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
  return rc;
}

// Removes the scratch folder DIR (rm -rf) at a test's end; a message on stderr, not a
// failed check, when it could not.
static void scratch_remove(const char *dir) __attribute__((unused));
static void scratch_remove(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
}

// Writes TEXT to the file DIR/NAME (nothing when it cannot be made: the check that reads it
// fails); its path, in one of 8 buffers used in turn (a test holds a few paths at once).
static const char *scratch_write(const char *dir, const char *name, const char *text)
    __attribute__((unused));
static const char *scratch_write(const char *dir, const char *name, const char *text) {
  static char path[8][4200];
  static int turn;
  char *p = path[turn++ % 8];
  snprintf(p, sizeof path[0], "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
  return p;
}

#endif
