// tools/train_signal.h — `tessera train` under a signal: SIGINT, SIGTERM and SIGUSR1 ask the
// run to finish the step in flight, write a checkpoint and exit TRAIN_EXIT_STOPPED; a second
// SIGINT aborts at once (docs/train.md "Stopping and preemption").
#ifndef TESSERA_TOOLS_TRAIN_SIGNAL_H
#define TESSERA_TOOLS_TRAIN_SIGNAL_H

#include <signal.h>

// The exit status of a run that a signal stopped after its checkpoint: EX_TEMPFAIL of
// sysexits.h ("try again later"), which a requeue loop tells from success (0) and from a
// failure (1).
enum { TRAIN_EXIT_STOPPED = 75 };

// Installs the handlers (SA_RESTART: system calls in flight go on) and returns the flag the
// trainer polls after every step (train_options.stop_signal): 0, or the first signal's number.
const volatile sig_atomic_t *train_signal_install(void);
// Puts back the handlers that were there before train_signal_install.
void train_signal_restore(void);

#endif
