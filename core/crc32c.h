// core/crc32c.h — CRC-32C (Castagnoli), the checksum of TFRecord framing
// (model/train/tensorboard.c). No Debian library that tessera already links (zlib is not
// linked; xxHash has no CRC) provides it, so a byte table does: the event files are small.
#ifndef TESSERA_CORE_CRC32C_H
#define TESSERA_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

// CRC-32C of n bytes of p (reflected polynomial 0x82F63B78, init and final xor ~0):
// crc32c("123456789", 9) == 0xE3069283.
uint32_t crc32c(const void *p, size_t n);
// TFRecord's masked form: ((c >> 15) | (c << 17)) + 0xA282EAD8, so that a CRC stored
// inside CRC'd data does not checksum to a fixed value.
uint32_t crc32c_masked(const void *p, size_t n);

#endif
