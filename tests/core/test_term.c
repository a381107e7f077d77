// tests/core/test_term.c — core/term.h term_escape: what a terminal would act on is made
// visible, the rest is kept, and a short buffer cuts at a character boundary with a mark.
// Run under ASan+UBSan (label sanitize): every cut length is tried, so no write goes past
// the buffer.
#include <string.h>

#include "check.h"
#include "core/term.h"

static void expect(const char *in, const char *want) {
  char out[256];
  term_escape(out, sizeof out, in);
  CHECK(!strcmp(out, want), "'%s' -> '%s', want '%s'", in, out, want);
}

int main(void) {
  expect("clips/moon.mp4", "clips/moon.mp4");                    // plain ASCII kept
  expect("caf\xc3\xa9 \xe6\x9c\x88", "caf\xc3\xa9 \xe6\x9c\x88");  // UTF-8 letters kept
  expect("a\x1b[2Jb", "a\\e[2Jb");                                // ANSI: clear the screen
  expect("x\x1b]0;owned\x07y", "x\\e]0;owned\\x07y");             // OSC: retitle the window
  expect("one\nerror: forged", "one\\nerror: forged");            // no forged line
  expect("a\rb\tc\x7f", "a\\rb\\tc\\x7f");
  expect("bad\xff.mp4", "bad\\xff.mp4");                          // not UTF-8
  expect("\xc3(", "\\xc3(");                                      // truncated sequence
  expect("\xc0\xaf", "\\xc0\\xaf");                               // overlong '/'
  expect("\xed\xa0\x80", "\\xed\\xa0\\x80");                      // a surrogate
  expect("c1\xc2\x9b" "31m", "c1\\u009b31m");                     // C1 CSI
  expect("\xe2\x80\xae" "4pm.exe", "\\u202e4pm.exe");             // right-to-left override
  expect("", "");
  expect(NULL, "");

  // Cuts: every size from 1 to past the whole, the result NUL-terminated, within n, and
  // never ending in half a character.
  const char *in = "ab\xe6\x9c\x88\x1b" "cd";
  char full[64];
  term_escape(full, sizeof full, in);
  CHECK(!strcmp(full, "ab\xe6\x9c\x88\\ecd"), "full '%s'", full);
  for (size_t n = 1; n <= strlen(full) + 2; n++) {
    char buf[64];
    memset(buf, 'Z', sizeof buf);
    term_escape(buf, n, in);
    size_t len = strlen(buf);
    CHECK(len < n, "n %zu: length %zu", n, len);
    CHECK(buf[n] == 'Z' || n == sizeof buf, "n %zu: wrote past the buffer", n);
    if (n > strlen(full)) {
      CHECK(!strcmp(buf, full), "n %zu: '%s'", n, buf);
    } else {
      CHECK(len == 0 || buf[len - 1] == '.', "n %zu: '%s' has no cut mark", n, buf);
      for (size_t i = 0; i < len; i++)  // a lead byte of the 3-byte character has both after it
        if ((unsigned char)buf[i] == 0xe6) CHECK(i + 2 < len, "n %zu: half a character", n);
    }
  }
  return check_done();
}
