// core/term.h — text from outside shown safely on a terminal.
//
// Labels, source paths, caption text and file names come from the data, not from tessera: a
// name can hold an ANSI escape sequence (which recolours, moves the cursor, retitles the
// window or hides what follows), a newline (which forges a line of output), a carriage
// return, or bytes that are not UTF-8. Every place that prints such text for a person (log
// lines, `index list`, `index stats`, `index verify`, ingest's report) passes it through
// term_escape first. JSON output is escaped by its encoder instead.
#ifndef TESSERA_CORE_TERM_H
#define TESSERA_CORE_TERM_H

#include <stddef.h>

// Copies `s` into out (n bytes, always NUL-terminated) with what a terminal would act on
// made visible: \n, \r, \t and \e by name, other C0 controls and DEL as \xNN, each byte of
// an invalid UTF-8 sequence as \xNN, and the C1 controls (U+0080..U+009F) and the
// bidirectional-override characters (U+202A..U+202E, U+2066..U+2069) as \uNNNN. Everything
// else (printable ASCII, valid UTF-8 letters) is kept as is. A result longer than n - 1
// bytes is cut at a character boundary and ends with "...". Returns out.
char *term_escape(char *out, size_t n, const char *s);

// 1 if `s` is valid UTF-8 (no overlong forms, surrogates or values past U+10FFFF), else 0.
int term_is_utf8(const char *s);

// Bytes term_escape needs for any string of `len` bytes to come out whole: each byte may
// become 4 (\xNN), a 2-byte character 6 (\uNNNN), plus the NUL.
#define TERM_ESCAPE_SIZE(len) (4 * (size_t)(len) + 1)

#endif
