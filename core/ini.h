// core/ini.h — the reader of `key = value` files with [section] headers: model/train
// configs (model/config.c), cost models (sched/cost.c), checkpoint config text.
//
// Parsed by libinih (Debian's libinih1), fed line by line so that keys get their line
// numbers. Every line is one of: blank; a comment (';' or '#' as its first non-blank
// character); `[section]` (a non-empty name without brackets); `key = value` (inih also
// takes `key: value`). An inline comment starts at a ';' or '#' preceded by a blank. Leading
// blanks are ignored (an indented line is a line of its own, never a continuation).
// Keys and values are trimmed; a value may be empty; a UTF-8 byte order mark at the
// start is skipped. A line may hold at most 198 characters after its leading blanks
// (inih's line buffer): a longer one is refused rather than cut. Anything else (a line
// without '=', an empty key or one with blanks or brackets, an unclosed '[', a NUL byte)
// fails with TSR_EFORMAT and the message "NAME:LINE: not a 'key = value' line: 'TEXT'"
// quoting the line (up to 80 characters, control characters shown as '?').
//
// The reader knows no keys: the callback judges each one (unknown, repeated, bad value)
// and its first error stops reading and is returned unchanged.
#ifndef TESSERA_CORE_INI_H
#define TESSERA_CORE_INI_H

#include "core/err.h"

// section: "" before any [section] line; line: 1-based line number of the key.
typedef tsr_status (*ini_key_fn)(void *user, const char *section, const char *key,
                                 const char *value, int line);

// Reads file `name` (text == NULL) or the NUL-terminated `text`, named `name` in
// messages. TSR_EIO if the file cannot be opened or read.
tsr_status ini_read(const char *name, const char *text, ini_key_fn fn, void *user);

// Writes `line` quoted for a message into buf (cap >= 8): at most 80 characters,
// control characters as '?', "..." when cut.
void ini_quote(const char *line, char *buf, int cap);

#endif
