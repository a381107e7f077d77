// tools/manifest_cli.c — a manifest's reading and filter options (tools/manifest_cli.h).
#include "tools/manifest_cli.h"

#include "tools/parse.h"

tsr_status manifest_cli_option(int code, const char *arg, manifest_opts *o, manifest_filter *f,
                               int *taken) {
  *taken = 1;
  switch (code - MANIFEST_CLI_FIRST) {
  case 0:
    return manifest_preset_parse(arg, &o->preset) ? err_wrap(TSR_EINVAL, "--manifest-format: ")
                                                  : TSR_OK;
  case 1:
    return manifest_syntax_parse(arg, &o->syntax) ? err_wrap(TSR_EINVAL, "--manifest-syntax: ")
                                                  : TSR_OK;
  case 2: o->root = arg; return TSR_OK;
  case 3: o->path_column = arg; return TSR_OK;
  case 4: o->path_suffix = arg; return TSR_OK;
  case 5: return manifest_filter_add_where(f, arg);
  case 6: return parse_double("--min-clip-seconds", arg, 0, 1e9, &f->min_clip_seconds);
  case 7: return parse_double("--max-clip-seconds", arg, 0, 1e9, &f->max_clip_seconds);
  case 8: return parse_int("--min-resolution", arg, 0, 1 << 20, &f->min_resolution);
  default: *taken = 0; return TSR_OK;
  }
}
