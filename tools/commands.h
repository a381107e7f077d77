// tools/commands.h — the subcommands of the `tessera` binary.
//
// Each command parses its own arguments (argv[0] is the command name), prints
// `--help`, and returns the process exit status: 0 success, 1 fatal error (bad
// arguments, unwritable output), 2 partial failure where the command defines one.
#ifndef TESSERA_TOOLS_COMMANDS_H
#define TESSERA_TOOLS_COMMANDS_H

int cmd_ingest(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_report(int argc, char **argv);

// Returns 1 if argv holds -h or --help (used by commands before other parsing).
int wants_help(int argc, char **argv);

#endif
