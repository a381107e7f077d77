// core/log.h — logging and progress lines.
//
// log_info/log_warn/log_error write one line to stderr, prefixed with the MPI rank
// when the job has more than one; a progress line drawn on the terminal is cleared first
// (the next progress_update draws it again below the message). A progress line (progress_*) redraws itself in place
// on a terminal and prints at most every `interval` seconds otherwise, so long jobs
// show what they do, how fast and how long is left without flooding CI logs.
#ifndef TESSERA_CORE_LOG_H
#define TESSERA_CORE_LOG_H

#include <stdint.h>
#include <stdio.h>

void log_set_rank(int rank, int world);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Every later log line is also appended to f, flushed line by line (NULL: no copy), so a
// run's log survives in its directory (the trainer's RUN/train.log, read by `tessera
// report`). The caller owns f and detaches it before closing it.
void log_copy_to(FILE *f);

// Monotonic wall-clock seconds.
double time_now(void);

typedef struct {
  const char *what;   // e.g. "ingest"
  double start;       // time_now() at progress_begin
  double last_print;  // time_now() of the last printed line
  double interval;    // seconds between lines when not on a terminal
  int tty;            // stderr is a terminal: redraw with '\r'
  int drawn;          // a line is on screen and needs a newline before other output
  double eta_s;       // >= 0: the caller's ETA (progress_set_eta); < 0: from done/total
} progress;

void progress_begin(progress *p, const char *what);
// Prints "what: <msg> | <rate> | ETA" where ETA comes from done/total (fractions of any
// unit) and the elapsed time. Rate-limited; `force` prints regardless.
void progress_update(progress *p, double done, double total, int force,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
// The ETA the next lines show, in seconds, for a caller that knows better than the
// extrapolation of done/total (work of uneven cost: a trainer's validations and samples);
// < 0: back to the extrapolation.
void progress_set_eta(progress *p, double seconds);
// Ends a redrawn line with a newline.
void progress_end(progress *p);

#endif
