// tools/commands.h — the subcommands of the `tessera` binary.
//
// Each command parses its own arguments (argv[0] is the command name) and returns the
// process exit status: 0 success, 1 fatal error (bad arguments, unwritable output), 2
// partial failure where the command defines one. Its `--help` is cmd_NAME_usage, which
// tessera.c prints instead of running the command when -h or --help is among the
// arguments; `index` has subcommands and prints the help of each itself.
#ifndef TESSERA_TOOLS_COMMANDS_H
#define TESSERA_TOOLS_COMMANDS_H

#include <stdio.h>

int cmd_ingest(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_report(int argc, char **argv);

// The --help of each command but index (options from its table, tools/opt.h).
void cmd_ingest_usage(FILE *f);
void cmd_manifest_usage(FILE *f);
void cmd_plan_usage(FILE *f);
void cmd_train_usage(FILE *f);
void cmd_sample_usage(FILE *f);
void cmd_calibrate_usage(FILE *f);
void cmd_convert_usage(FILE *f);
void cmd_report_usage(FILE *f);

// Returns 1 if argv holds -h or --help (used by commands before other parsing).
int wants_help(int argc, char **argv);

#endif
