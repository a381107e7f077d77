// tests/model/test_config_presets.c — the presets against the key table (model/config.c):
// - every preset's effective config (config_to_ini: floats as the shortest text that reads
//   back as the same float, so equal text is equal bits) is what it was when every preset
//   spelled out every key: tests/model/presets/NAME.ini holds those effective configs
//   (a key newer than them is not in them and is left out of the comparison);
// - a preset gives only the required keys and the ones where it differs from the default,
//   and config_list_count counts the rest;
// - docs/config.md lists every key of the table with its default and help, row for row.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/ini.h"
#include "model/config.h"

#define MAXKEYS 256

// "section.key = value" lines of an INI text or file.
typedef struct {
  int n;
  char kv[MAXKEYS][300];
} key_values;

static tsr_status collect(void *user, const char *section, const char *key, const char *value,
                          int line) {
  (void)line;
  key_values *k = user;
  if (k->n < MAXKEYS) snprintf(k->kv[k->n++], sizeof k->kv[0], "%s.%s = %s", section, key, value);
  return TSR_OK;
}

// The value line of `name` ("train.lr") in k, or NULL.
static const char *find(const key_values *k, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < k->n; i++)
    if (!strncmp(k->kv[i], name, n) && k->kv[i][n] == ' ') return k->kv[i];
  return NULL;
}

static int is_required(const char *name) {
  static const char *const req[] = {"model.hidden", "model.depth", "model.heads", "model.pt",
                                    "model.ph", "model.pw", "model.channels"};
  for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
    if (!strcmp(name, req[i])) return 1;
  return 0;
}

// The config's INI text as key_values.
static void effective(const dit_config *m, const train_config *t, key_values *out) {
  char *ini = config_to_ini(m, t);
  out->n = 0;
  CHECK(ini && !ini_read("config_to_ini", ini, collect, out), "config_to_ini text reads back");
  free(ini);
}

static key_values defaults_kv, eff, given, golden;
static int compared;  // presets compared with their earlier effective config

// One preset (configs/model/NAME.conf) against its golden effective config and the defaults.
static void check_preset(const char *name) {
  char path[1024], gpath[1024];
  snprintf(path, sizeof path, "%s/configs/model/%s.conf", TESSERA_SOURCE_DIR, name);
  snprintf(gpath, sizeof gpath, "%s/tests/model/presets/%s.ini", TESSERA_SOURCE_DIR, name);
  dit_config m;
  train_config t;
  char *defaults = NULL;
  CHECK_OK(config_load(path, NULL, 0, &m, &t, &defaults));
  effective(&m, &t, &eff);
  golden.n = given.n = 0;
  // a preset newer than the thinning has no earlier effective config
  FILE *g = fopen(gpath, "r");
  if (g) fclose(g), compared++;
  CHECK(!g || (!ini_read(gpath, NULL, collect, &golden) && golden.n > 0), "%s: %s", name,
        err_msg());
  for (int i = 0; i < golden.n; i++) {
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(golden.kv[i], " "), golden.kv[i]);
    const char *now = find(&eff, key);
    CHECK(now && !strcmp(now, golden.kv[i]), "%s: effective %s, was %s", name,
          now ? now : "(no such key)", golden.kv[i]);
  }
  CHECK_OK(ini_read(path, NULL, collect, &given));
  // the count tools print: every key of the table the preset does not give
  int keys = 0;
  for (config_key_doc d; config_key_doc_at(keys, &d);) keys++;
  CHECK(config_list_count(defaults) == keys - given.n, "%s: %d keys at their defaults, the "
        "table has %d and the preset gives %d", name, config_list_count(defaults), keys, given.n);
  free(defaults);
  for (int i = 0; i < given.n; i++) {
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(given.kv[i], " "), given.kv[i]);
    const char *e = find(&eff, key), *d = find(&defaults_kv, key);
    CHECK(is_required(key) || !e || !d || strcmp(e, d),
          "%s gives %s, the default (docs/config.md): leave the line out", name, given.kv[i]);
  }
}

// docs/config.md holds one row "| `section.name` | default | help |" per key of the table,
// and no other key rows.
static void check_docs(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/docs/config.md", TESSERA_SOURCE_DIR);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "cannot open %s", path);
  if (!f) return;
  static char text[1 << 17];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  config_key_doc d;
  int keys = 0;
  for (; config_key_doc_at(keys, &d); keys++) {
    char row[512];
    snprintf(row, sizeof row, "\n| `%s.%s` | %s | %s |\n", d.section, d.name,
             *d.def ? d.def : "(empty)", d.help);
    CHECK(*d.help && strstr(text, row), "docs/config.md lacks the row of the key table:%s", row);
  }
  int rows = 0;
  for (const char *p = text; (p = strstr(p, "\n| `")); p++) rows++;
  CHECK(rows == keys, "docs/config.md has %d key rows, the key table %d keys", rows, keys);
}

int main(void) {
  dit_config dm;
  train_config dtc;
  config_defaults(&dm, &dtc);
  effective(&dm, &dtc, &defaults_kv);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/configs/model", TESSERA_SOURCE_DIR);
  DIR *dp = opendir(dir);
  CHECK(dp != NULL, "cannot open %s", dir);
  int presets = 0;
  for (struct dirent *e; dp && (e = readdir(dp));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".conf")) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(len - 5), e->d_name);
    check_preset(name);
    presets++;
  }
  if (dp) closedir(dp);
  CHECK(compared >= 8, "%d presets of %s compared with tests/model/presets/", compared, dir);
  check_docs();
  printf("config presets: %d presets, %d with the effective config they had, each giving only "
         "what differs from the defaults\n", presets, compared);
  return check_done();
}
