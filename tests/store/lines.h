// tests/store/lines.h — the store tests' collector of the lines that index_verify and the
// recovery report (their line callback): every line kept, problems and notes counted.
#ifndef TESSERA_TESTS_STORE_LINES_H
#define TESSERA_TESTS_STORE_LINES_H

#include <stdio.h>
#include <string.h>

typedef struct {
  char text[16384];  // the lines, each ending in '\n' (cut at the end of the buffer)
  int problems, notes;
} lines;

// The line callback: CTX is a lines, zeroed before the call that reports.
static void on_line(const char *line, int problem, void *ctx) __attribute__((unused));
static void on_line(const char *line, int problem, void *ctx) {
  lines *l = ctx;
  problem ? l->problems++ : l->notes++;
  size_t u = strlen(l->text);
  snprintf(l->text + u, sizeof l->text - u, "%s\n", line);
}

#endif
