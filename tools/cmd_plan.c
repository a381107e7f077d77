// tools/cmd_plan.c — `tessera plan` (being built: issue 3).
#include <stdio.h>
#include "tools/commands.h"

int cmd_plan(int argc, char **argv) {
  fprintf(stderr, "tessera plan: not available in this build yet\n");
  return 1;
}
