/* crc32c.h — CRC-32C (Castagnoli), and the masked form TFRecord framing stores
 * (TensorFlow's crc32c::Mask: rotate right by 15, add 0xa282ead8). */
#ifndef CNNB_COMMON_CRC32C_H
#define CNNB_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of `size` bytes, continuing from `crc` (0 to start). Thread-safe. */
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t size);
/* The same through the portable tables whatever the CPU has: the tests compare the two. */
uint32_t crc32c_extend_portable(uint32_t crc, const void *data, size_t size);
static inline uint32_t crc32c(const void *data, size_t size) {
  return crc32c_extend(0, data, size);
}
static inline uint32_t crc32c_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

#endif
