// tools/cmd_ingest.c — `tessera ingest` (being built: issue 2).
#include <stdio.h>
#include "tools/commands.h"

int cmd_ingest(int argc, char **argv) {
  fprintf(stderr, "tessera ingest: not available in this build yet\n");
  return 1;
}
