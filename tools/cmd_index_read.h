// tools/cmd_index_read.h — `tessera index stats` and `tessera index list`, the subcommands
// that read a store's index (tools/cmd_index_read.c); `tessera index` (tools/cmd_index.c)
// hands them their arguments, argv[0] being the subcommand's name.
#ifndef TESSERA_TOOLS_CMD_INDEX_READ_H
#define TESSERA_TOOLS_CMD_INDEX_READ_H

int cmd_index_stats(int argc, char **argv);
int cmd_index_list(int argc, char **argv);

#endif
