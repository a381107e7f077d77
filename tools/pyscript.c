// tools/pyscript.c — tools/' Python scripts run from the CLI (tools/pyscript.h).
#include "tools/pyscript.h"

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/datadir.h"

extern char **environ;

static const char *python_path(void) {
  const char *p = getenv("TESSERA_SYSTEM_PYTHON");
  if (p && *p) return p;
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

// Runs `py SCRIPT args...` for tools/NAME and waits (pyscript_run's contract).
static tsr_status run_with(const char *py, const char *name, char *const *args) {
  char rel[PATH_MAX], script[PATH_MAX];
  if (snprintf(rel, sizeof rel, "tools/%s", name) >= (int)sizeof rel ||
      datadir_path(rel, script, sizeof script))
    return err_set(TSR_EINVAL, "path of %s too long", name);
  if (access(script, R_OK))
    return err_set(TSR_EIO, "%s: %s (set TESSERA_DATA_DIR to the folder that holds tessera's "
                   "tools/ and configs/: its source tree, or PREFIX/share/tessera)", script,
                   strerror(errno));
  int n = 0;
  while (args[n]) n++;
  char **argv = calloc((size_t)n + 3, sizeof *argv);
  if (!argv) return err_set(TSR_ENOMEM, "out of memory");
  argv[0] = (char *)py;
  argv[1] = script;
  memcpy(argv + 2, args, (size_t)n * sizeof *argv);
  pid_t pid;
  fflush(NULL);  // our buffered output first, then the script's
  int rc = posix_spawnp(&pid, py, NULL, NULL, argv, environ);
  free(argv);
  if (rc) return err_set(TSR_EIO, "cannot run %s: %s", py, strerror(rc));
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return err_set(TSR_EIO, "waiting for %s: %s", name, strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return TSR_OK;
  return err_set(TSR_EIO, "tools/%s failed (%s %d, above)", name,
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

tsr_status pyscript_run(const char *name, char *const *args) {
  return run_with(python_path(), name, args);
}

tsr_status pyscript_run_venv(const char *name, char *const *args) {
  const char *py = getenv("TESSERA_PYTHON");
  if (!py || !*py) py = "/opt/tessera/venv/bin/python";
  if (access(py, X_OK))
    return err_set(TSR_EIO, "tools/%s needs the Python venv of tools/setup_venv.sh: no %s (%s; "
                   "TESSERA_PYTHON names its python)", name, py, strerror(errno));
  return run_with(py, name, args);
}
