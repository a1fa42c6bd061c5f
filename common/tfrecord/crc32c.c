/* crc32c.c — CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the checksum TFRecord
 * framing stores. Two ways to the same value: the SSE4.2 crc32 instruction (8 bytes per
 * instruction) when the CPU has it, else slicing-by-8 tables (8 bytes per step through
 * eight 256-entry tables). The choice and the tables are made once, on first use. */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_PATH 1
#include <nmmintrin.h>
#endif

static uint32_t table[8][256];
static int use_sse42;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    table[0][i] = c;
  }
  /* table[k][i]: the CRC of byte i followed by k zero bytes, so eight bytes fold at once. */
  for (int k = 1; k < 8; k++)
    for (int i = 0; i < 256; i++)
      table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xff];
#ifdef HAVE_SSE42_PATH
  use_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* Little-endian 8-byte load without alignment assumptions (memcpy compiles to one mov). */
static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

static uint32_t extend_table(uint32_t crc, const uint8_t *p, size_t n) {
  while (n >= 8) {
    uint64_t v = load64(p) ^ crc;
    crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^
          table[4][(v >> 24) & 0xff] ^ table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
          table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
  return crc;
}

#ifdef HAVE_SSE42_PATH
__attribute__((target("sse4.2"))) static uint32_t extend_sse42(uint32_t crc, const uint8_t *p,
                                                               size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    c = _mm_crc32_u64(c, load64(p));
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

uint32_t crc32c_extend_portable(uint32_t crc, const void *data, size_t size) {
  pthread_once(&init_once, init);
  return ~extend_table(~crc, data, size);
}

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t size) {
  pthread_once(&init_once, init);
#ifdef HAVE_SSE42_PATH
  if (use_sse42) return ~extend_sse42(~crc, data, size);
#endif
  return ~extend_table(~crc, data, size);
}
