/* fuzz_tfrecord.c — TFRecord framing and tf.Example decoding on arbitrary bytes: the input
 * is read as a shard (every record that passes its CRCs is decoded as an Example) and,
 * since random bytes seldom pass a CRC, also as one Example directly. Besides the
 * sanitizers' checks, a successful parse must point inside the input, and every record
 * passed over (its data CRC failed) must move the parser on. */
#include <stdint.h>
#include <stdlib.h>

#include "example.h"
#include <tfrecord/tfrecord.h>

static void check_example(const uint8_t *data, size_t size) {
  example_view ex;
  char err[256];
  if (example_parse(data, size, &ex, err, sizeof err) != 0) return;
  if (ex.image < data || ex.image_size > size || (size_t)(ex.image - data) > size - ex.image_size)
    abort();
  if (ex.num_boxes < 0 || ex.num_boxes > IMAGE_MAX_BOXES) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t pos = 0, n;
  const uint8_t *record;
  char err[256];
  tfrecord_result r;
  /* A record failing only its data CRC is passed over (the parser moves past it). */
  size_t before = pos;
  while ((r = tfrecord_parse(data, size, &pos, &record, &n, err, sizeof err)) == TFRECORD_OK ||
         r == TFRECORD_BAD_DATA) {
    if (pos > size || pos <= before) abort();
    before = pos;
    if (r == TFRECORD_BAD_DATA) continue;
    if (record < data) abort();
    check_example(record, n);
  }
  if (r != TFRECORD_END && r != TFRECORD_CORRUPT) abort();
  check_example(data, size);
  return 0;
}
