/* fuzz_jpeg.c — the JPEG path on arbitrary bytes: the header read, and the whole
 * preprocessing (crop sampling from the header's size, region decode at a DCT scale,
 * resize, flip, distortions, normalization) in train and eval modes, to a small target so
 * each input runs fast. The seed's low bits pick the resize method (round robin covers all
 * four) and the crop. Besides the sanitizers' checks: a decoded image has the size its
 * header says, and every output value is finite and, after distortions, inside the
 * normalized range. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "jpeg_image.h"
#include "preprocess.h"

enum { SIZE = 24 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static preprocess_scratch *scratch;
  static float out[3 * SIZE * SIZE];
  static uint8_t out8[3 * SIZE * SIZE];
  if (!scratch && !(scratch = preprocess_scratch_create())) abort();
  char err[256];
  jpeg_info info;
  int header_ok = jpeg_image_info(data, size, &info, err, sizeof err) == 0;
  if (header_ok && (info.width <= 0 || info.height <= 0)) abort();
  uint64_t seed = 0;
  for (size_t i = 0; i < size && i < 8; i++) seed = seed << 8 | data[size - 1 - i];
  image_box box = {0.25f, 0.25f, 0.75f, 0.75f};
  for (int training = 0; training < 2; training++) {
    preprocess_config cfg = {.height = SIZE,
                             .width = SIZE,
                             .training = training,
                             .resize = RESIZE_ROUND_ROBIN,
                             .distortions = training,
                             .mean = {0.5f, 0.5f, 0.5f},
                             .std = {0.5f, 0.5f, 0.5f}};
    int rc = preprocess_image(&cfg, scratch, data, size, &box, training, seed, out, err,
                              sizeof err);
    if (rc == 0 && !header_ok) abort(); /* decoded what the header read refused */
    if (rc == 0)
      for (int i = 0; i < 3 * SIZE * SIZE; i++) {
        if (!isfinite(out[i])) abort();
        if (training && (out[i] < -1.001f || out[i] > 1.001f)) abort();
      }
    int rc8 = preprocess_image_uint8(&cfg, scratch, data, size, &box, training, seed, out8, err,
                                     sizeof err);
    if (rc8 != rc) abort(); /* the same image either way */
  }
  return 0;
}
