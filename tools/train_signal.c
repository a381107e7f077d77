// tools/train_signal.c — the signal handlers of `tessera train` (tools/train_signal.h).
#include "tools/train_signal.h"

#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t first_signal;  // 0, or the number of the first signal
static struct sigaction saved[3];
static const int SIGNALS[3] = {SIGINT, SIGTERM, SIGUSR1};

// Only async-signal-safe calls: write(2), signal(2) through sigaction, raise(3).
static void on_signal(int sig) {
  if (first_signal && sig == SIGINT) {  // the second Ctrl-C: the default action, now
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, NULL);
    raise(SIGINT);
    return;
  }
  if (first_signal) return;
  first_signal = sig;
  static const char msg[] = "\ntessera train: signal received: finishing the step in flight, "
                            "then a checkpoint (a second Ctrl-C aborts at once)\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
}

const volatile sig_atomic_t *train_signal_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; i++) sigaction(SIGNALS[i], &sa, &saved[i]);
  return &first_signal;
}

void train_signal_restore(void) {
  for (int i = 0; i < 3; i++) sigaction(SIGNALS[i], &saved[i], NULL);
}
