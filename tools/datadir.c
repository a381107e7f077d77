// tools/datadir.c — the CLI's data folder: presets, cost files, scripts (tools/datadir.h).
#include "tools/datadir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

// PREFIX/share/tessera for a binary at PREFIX/bin/tessera, into out; 0 when it is not there.
static int installed_root(char *out, size_t n) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return 0;
  exe[len] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return 0;
  *slash = 0;  // PREFIX/bin
  return snprintf(out, n, "%s/../share/tessera", exe) < (int)n && is_dir(out);
}

const char *datadir_root(void) {
  static char root[PATH_MAX];
  if (root[0]) return root;
  const char *env = getenv("TESSERA_DATA_DIR");
  if (env && *env && strlen(env) < sizeof root) {
    strcpy(root, env);
  } else if (!installed_root(root, sizeof root)) {
    snprintf(root, sizeof root, "%s", TESSERA_SOURCE_DIR);
  }
  return root;
}

tsr_status datadir_path(const char *rel, char *out, size_t n) {
  if (snprintf(out, n, "%s/%s", datadir_root(), rel) >= (int)n)
    return err_set(TSR_EINVAL, "path of %s too long", rel);
  return TSR_OK;
}

const char *datadir_config(const char *arg) {
  static char preset[PATH_MAX];
  if (strchr(arg, '/') || is_file(arg)) return arg;
  size_t len = strlen(arg);
  int has_ext = len > 5 && !strcmp(arg + len - 5, ".conf");
  char rel[NAME_MAX + 32];
  if (snprintf(rel, sizeof rel, "configs/model/%s%s", arg, has_ext ? "" : ".conf") >=
          (int)sizeof rel ||
      datadir_path(rel, preset, sizeof preset) || !is_file(preset))
    return arg;
  return preset;
}
