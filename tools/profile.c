// tools/profile.c — tables of the kernel profile (tools/profile.h).
#include "tools/profile.h"

#include <stdlib.h>

tsr_status profile_collect(const kernels_backend *kb, int steps, double wall_s,
                           profile_report *r) {
  if (!kernels_is_profiled(kb))
    return err_set(TSR_EINVAL, "profile: backend %s is not profiled", kb ? kb->name : "(none)");
  if (steps < 1) return err_set(TSR_EINVAL, "profile: %d steps", steps);
  *r = (profile_report){.backend = kb->name, .steps = steps, .wall_s = wall_s};
  int n = kernels_profile_read(kb, r->entry, PROFILE_MAX_ENTRIES);
  r->n_entries = n < PROFILE_MAX_ENTRIES ? n : PROFILE_MAX_ENTRIES;
  kernels_profile_by_class(r->entry, r->n_entries, r->class_calls, r->class_s);
  for (int c = 0; c < KERNELS_PROFILE_N_CLASSES; c++) r->kernels_s += r->class_s[c];
  r->overhead_s = wall_s - r->kernels_s;
  const char *bw = getenv("TESSERA_HBM_GBS");
  char *end = NULL;
  r->hbm_gbs = bw && *bw ? strtod(bw, &end) : 4800.0;
  if (bw && *bw && (*end || !(r->hbm_gbs > 0.0)))
    return err_set(TSR_EINVAL, "profile: TESSERA_HBM_GBS = '%s' is not a bandwidth in GB/s "
                   "(a number > 0, e.g. 4800 for an H200, 3350 for an H100 SXM)", bw);
  return TSR_OK;
}

// Seconds the entry's bytes take at the report's bandwidth (0 when none are counted).
static double profile_floor_s(const profile_report *r, const kernels_profile_entry *e) {
  return e->bytes > 0 && r->hbm_gbs > 0 ? e->bytes / (r->hbm_gbs * 1e9) : 0.0;
}

static int by_seconds_desc(const void *a, const void *b) {
  double x = ((const kernels_profile_entry *)a)->seconds;
  double y = ((const kernels_profile_entry *)b)->seconds;
  return (x < y) - (x > y);
}

void profile_print(FILE *f, const profile_report *r) {
  double per = 1e3 / r->steps, wall = r->wall_s > 0 ? r->wall_s : 1.0;
  if (r->steps > 1)
    fprintf(f, "profile (%s, %d steps, %.1f ms per step)\n", r->backend, r->steps,
            r->wall_s * per);
  else  // one step, or a whole run (tessera train): the figures are totals
    fprintf(f, "profile (%s, totals over %.1f s)\n", r->backend, r->wall_s);
  const char *ms = r->steps > 1 ? "ms/step" : "ms", *calls = r->steps > 1 ? "calls/step" : "calls";
  fprintf(f, "  %-22s %10s %7s %12s\n", "class", ms, "%", calls);
  for (int c = 0; c < KERNELS_PROFILE_N_CLASSES; c++) {
    if (!r->class_calls[c]) continue;
    fprintf(f, "  %-22s %10.2f %6.1f%% %12.1f\n", kernels_profile_class_name(c),
            r->class_s[c] * per, 100.0 * r->class_s[c] / wall,
            (double)r->class_calls[c] / r->steps);
  }
  fprintf(f, "  %-22s %10.2f %6.1f%%\n", "framework overhead", r->overhead_s * per,
          100.0 * r->overhead_s / wall);
  fprintf(f, "  %-22s %10.2f %6.1f%%\n", "step", r->wall_s * per, 100.0);
  kernels_profile_entry sorted[PROFILE_MAX_ENTRIES];
  int n = 0;
  for (int i = 0; i < r->n_entries; i++)
    if (r->entry[i].calls) sorted[n++] = r->entry[i];
  qsort(sorted, (size_t)n, sizeof *sorted, by_seconds_desc);
  fprintf(f, "  %-28s %-12s %10s %7s %12s %10s %10s %8s   (floor at %.0f GB/s)\n", "entry",
          "class", ms, "%", calls, r->steps > 1 ? "MB/step" : "MB", "floor ms", "x floor",
          r->hbm_gbs);
  for (int i = 0; i < n; i++) {
    fprintf(f, "  %-28s %-12s %10.2f %6.1f%% %12.1f", sorted[i].name,
            kernels_profile_class_name(sorted[i].cls), sorted[i].seconds * per,
            100.0 * sorted[i].seconds / wall, (double)sorted[i].calls / r->steps);
    double floor_s = profile_floor_s(r, &sorted[i]);
    if (floor_s > 0)
      fprintf(f, " %10.1f %10.3f %8.2f", sorted[i].bytes / r->steps / 1e6, floor_s * per,
              sorted[i].seconds / floor_s);
    fputc('\n', f);
  }
}

json_t *profile_json(const profile_report *r) {
  double per = 1e3 / r->steps;
  json_t *classes = json_object(), *entries = json_array();
  for (int c = 0; c < KERNELS_PROFILE_N_CLASSES; c++)
    json_object_set_new(classes, kernels_profile_class_name(c),
                        json_pack("{s:f,s:f}", "ms", r->class_s[c] * per, "calls",
                                  (double)r->class_calls[c] / r->steps));
  for (int i = 0; i < r->n_entries; i++) {
    const kernels_profile_entry *e = &r->entry[i];
    if (!e->calls) continue;
    double floor_s = profile_floor_s(r, e);
    json_array_append_new(
        entries, json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:o}", "name", e->name, "class",
                           kernels_profile_class_name(e->cls), "ms", e->seconds * per, "calls",
                           (double)e->calls / r->steps, "mbytes", e->bytes / r->steps / 1e6,
                           "floor_ms", floor_s * per,
                           "x_floor", floor_s > 0 ? json_real(e->seconds / floor_s) : json_null()));
  }
  return json_pack("{s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:o,s:o}", "backend", r->backend, "steps",
                   r->steps, "wall_s", r->wall_s, "step_ms", r->wall_s * per, "kernels_ms",
                   r->kernels_s * per, "overhead_ms", r->overhead_s * per, "hbm_gbs", r->hbm_gbs,
                   "classes", classes, "entries", entries);
}
