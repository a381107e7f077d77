// tools/cmd_index.c — `tessera index` (being built: issue 2).
#include <stdio.h>
#include "tools/commands.h"

int cmd_index(int argc, char **argv) {
  fprintf(stderr, "tessera index: not available in this build yet\n");
  return 1;
}
