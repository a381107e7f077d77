// model/io/lora_layout.c — the key layouts of a LoRA adapter file (model/io/lora_layout.h).
#include "model/io/lora_layout.h"

#include <stdio.h>
#include <string.h>

#include "model/io/wan_convert.h"

static const char *const NAMES[] = {"diffusers", "wan", "kohya"};
// Each layout's key prefix and its parts' suffixes (down, up, alpha; diffusers has no alpha key).
static const char *const PREFIX[] = {"transformer.", "diffusion_model.", "lora_unet_"};
static const char *const SUFFIX[3][3] = {
    {".lora_A.weight", ".lora_B.weight", NULL},
    {".lora_A.weight", ".lora_B.weight", ".alpha"},
    {".lora_down.weight", ".lora_up.weight", ".alpha"},
};

tsr_status lora_layout_parse(const char *name, lora_layout *l) {
  for (int i = 0; i < 3; i++)
    if (!strcmp(name, NAMES[i])) {
      *l = (lora_layout)i;
      return TSR_OK;
    }
  return err_set(TSR_EINVAL, "LoRA layout '%s': use diffusers, wan or kohya", name);
}

const char *lora_layout_name(lora_layout l) { return NAMES[l]; }

lora_layout lora_layout_of(const st_reader *r) {
  const char *k = st_count(r) ? st_at(r, 0)->name : "";
  if (!strncmp(k, PREFIX[LORA_LAYOUT_KOHYA], strlen(PREFIX[LORA_LAYOUT_KOHYA])))
    return LORA_LAYOUT_KOHYA;
  if (!strncmp(k, PREFIX[LORA_LAYOUT_WAN], strlen(PREFIX[LORA_LAYOUT_WAN]))) return LORA_LAYOUT_WAN;
  return LORA_LAYOUT_DIFFUSERS;
}

tsr_status lora_layout_key(lora_layout l, const char *module, lora_part part, char *out,
                           size_t cap) {
  const char *suf = SUFFIX[l][part];
  if (!suf) return err_set(TSR_EINVAL, "the %s layout keeps alpha in its metadata", NAMES[l]);
  char orig[256];
  if (l == LORA_LAYOUT_DIFFUSERS) snprintf(orig, sizeof orig, "%s", module);
  else {
    tsr_status st = wan_module_to_original(module, orig, sizeof orig);
    if (st) return err_wrap(st, "LoRA layout %s: ", NAMES[l]);
  }
  if (l == LORA_LAYOUT_KOHYA)
    for (char *c = orig; *c; c++) *c = *c == '.' ? '_' : *c;
  if ((size_t)snprintf(out, cap, "%s%s%s", PREFIX[l], orig, suf) >= cap)
    return err_set(TSR_EINVAL, "LoRA key of module %s is too long", module);
  return TSR_OK;
}

// The part whose suffix ends key (of layout l), and the length of the key without it; -1 if none.
static int part_of(lora_layout l, const char *key, size_t *stem) {
  size_t n = strlen(key);
  for (int p = 0; p < 3; p++) {
    const char *suf = SUFFIX[l][p];
    size_t s = suf ? strlen(suf) : 0;
    if (suf && n > s && !strcmp(key + n - s, suf)) {
      *stem = n - s;
      return p;
    }
  }
  return -1;
}

tsr_status lora_layout_parse_key(lora_layout l, const char *key, char *module, size_t cap,
                                 lora_part *part) {
  size_t pl = strlen(PREFIX[l]), stem = 0;
  int p = strncmp(key, PREFIX[l], pl) ? -1 : part_of(l, key, &stem);
  char mid[256];
  if (p < 0 || stem <= pl || stem - pl >= sizeof mid)
    return err_set(TSR_EINVAL, "tensor '%s' is no LoRA key of the %s layout (%s<module>%s, %s)",
                   key, NAMES[l], PREFIX[l], SUFFIX[l][0], SUFFIX[l][1]);
  snprintf(mid, sizeof mid, "%.*s", (int)(stem - pl), key + pl);
  *part = (lora_part)p;
  if (l == LORA_LAYOUT_DIFFUSERS) {
    if ((size_t)snprintf(module, cap, "%s", mid) >= cap)
      return err_set(TSR_EINVAL, "tensor '%s': module name too long", key);
    return TSR_OK;
  }
  tsr_status st = wan_module_from_original(mid, l == LORA_LAYOUT_KOHYA, module, cap);
  return st ? err_wrap(st, "tensor '%s' (%s layout): ", key, NAMES[l]) : TSR_OK;
}

tsr_status lora_layout_split_tensor(const char *name, char *module, size_t cap, lora_part *part) {
  size_t stem = 0;
  int p = part_of(LORA_LAYOUT_DIFFUSERS, name, &stem);
  if (p < 0 || stem >= cap) return err_set(TSR_EINVAL, "'%s' is no adapter tensor name", name);
  snprintf(module, cap, "%.*s", (int)stem, name);
  *part = (lora_part)p;
  return TSR_OK;
}
