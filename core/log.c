#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/term.h"

static int log_rank = 0, log_world = 1;
// 1 while a progress line is on the terminal without its newline: a log line clears it
// first, so a message never lands after the half-line (the next update redraws it).
static int line_open;
static FILE *log_copy;  // log_copy_to

void log_set_rank(int rank, int world) {
  log_rank = rank;
  log_world = world;
}

// Messages name files, labels and sources from the data: they are escaped for the terminal
// (core/term.h), so a name cannot forge lines or send escape sequences.
static void log_v(const char *level, const char *fmt, va_list ap) {
  char msg[4096], line[8192];
  int n = 0;
  if (log_world > 1) n = snprintf(line, sizeof line, "[rank %d] ", log_rank);
  if (level) n += snprintf(line + n, sizeof line - n, "%s: ", level);
  vsnprintf(msg, sizeof msg, fmt, ap);
  term_escape(line + n, sizeof line - (size_t)n, msg);
  if (line_open) fputs("\r\033[K", stderr);
  line_open = 0;
  fprintf(stderr, "%s\n", line);  // one write per line keeps ranks' lines whole
  if (log_copy) fprintf(log_copy, "%s\n", line), fflush(log_copy);
}

void log_copy_to(FILE *f) { log_copy = f; }

void log_info(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v(NULL, fmt, ap);
  va_end(ap);
}

void log_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v("warning", fmt, ap);
  va_end(ap);
}

void log_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v("error", fmt, ap);
  va_end(ap);
}

double time_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_begin(progress *p, const char *what) {
  p->what = what;
  p->start = p->last_print = time_now();
  p->tty = isatty(STDERR_FILENO);
  p->interval = p->tty ? 0.2 : 10.0;
  p->drawn = 0;
  p->eta_s = -1;
}

void progress_set_eta(progress *p, double seconds) { p->eta_s = seconds; }

static void fmt_duration(char *buf, size_t n, double s) {
  if (s < 0 || s > 1e7) { snprintf(buf, n, "--:--"); return; }
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
}

void progress_update(progress *p, double done, double total, int force,
                     const char *fmt, ...) {
  double now = time_now();
  if (!force && now - p->last_print < p->interval) return;
  p->last_print = now;
  char raw[1024], msg[1024], el[32], eta[32];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  term_escape(msg, sizeof msg, raw);  // it may name a source (log_v)
  double elapsed = now - p->start;
  fmt_duration(el, sizeof el, elapsed);
  double frac = total > 0 ? done / total : 0;
  fmt_duration(eta, sizeof eta, p->eta_s >= 0 ? p->eta_s
                                : frac > 0 ? elapsed * (1 - frac) / frac : -1);
  const char *rp = "";
  char rbuf[32] = "";
  if (log_world > 1) { snprintf(rbuf, sizeof rbuf, "[rank %d] ", log_rank); rp = rbuf; }
  if (p->tty)
    fprintf(stderr, "\r\033[K%s%s: %s | %3.0f%% | elapsed %s | ETA %s", rp, p->what, msg,
            100 * frac, el, eta);
  else
    fprintf(stderr, "%s%s: %s | %3.0f%% | elapsed %s | ETA %s\n", rp, p->what, msg,
            100 * frac, el, eta);
  p->drawn = p->tty;
  line_open = p->tty;
  fflush(stderr);
}

void progress_end(progress *p) {
  if (p->drawn && line_open) fputc('\n', stderr);  // not if a message cleared it since
  p->drawn = 0;
  line_open = 0;
}
