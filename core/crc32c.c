// core/crc32c.c — CRC-32C with a 256-entry table (core/crc32c.h).
#include "core/crc32c.h"

#include <pthread.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_fill(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
}

uint32_t crc32c(const void *p, size_t n) {
  pthread_once(&table_once, table_fill);
  const unsigned char *b = p;
  uint32_t c = ~0u;
  for (size_t i = 0; i < n; i++) c = table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t crc32c_masked(const void *p, size_t n) {
  uint32_t c = crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}
