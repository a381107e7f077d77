// fuzz_config: the model/train config reader. The input is a config file for config_load
// (with one --set) and, as text, a checkpoint's config for config_from_ini; whatever
// loads must pass config_validate and round-trip through config_to_ini.
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_scratch_path(".conf");
  fuzz_write_file(path, data, size);
  dit_config m;
  train_config t;
  char *defaults = NULL;
  char *ov[] = {"train.log_every=7"};
  if (config_load(path, ov, 1, &m, &t, &defaults) == TSR_OK) {
    if (config_validate(&m, &t) != TSR_OK || t.log_every != 7) abort();
    char *ini = config_to_ini(&m, &t);
    dit_config m2;
    train_config t2;
    if (!ini || config_from_ini(ini, &m2, &t2) != TSR_OK) abort();  // round trip
    char *ini2 = config_to_ini(&m2, &t2);
    if (!ini2 || strcmp(ini, ini2)) abort();
    free(ini);
    free(ini2);
  }
  free(defaults);
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  (void)config_from_ini(text, &m, &t);
  free(text);
  unlink(path);
  return 0;
}
