/* fuzz_idx.c — the mnist datasource's IDX reader on arbitrary bytes: the input is read as
 * an images file (3 dimensions) and as a labels file (1 dimension), each as it is and,
 * when the build has zlib, through gunzip, as the plugin reads train-images-idx3-ubyte
 * and train-images-idx3-ubyte.gz. Besides the sanitizers' checks, a successful read must
 * hold exactly what its header says: the product of its dimensions, and for a plain input
 * the input's size less the header; a failed one must say why and leave nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "idx_source.h"

static void check(idx_source *src, int ndims, size_t plain_size) {
  if (!src) return; /* out of memory */
  idx_data d;
  char err[512] = "";
  int rc = idx_load(src, "fuzz", ndims, &d, err, sizeof err);
  if (rc != IDX_OK) {
    if (rc != IDX_BAD_DATA && rc != IDX_IO_ERROR && rc != IDX_NO_MEMORY) abort();
    if (d.values || d.bytes || strncmp(err, "fuzz: ", 6) != 0) abort();
    return;
  }
  uint64_t product = 1;
  for (int i = 0; i < ndims; i++) product *= d.dims[i];
  if (d.ndims != ndims || !d.values || d.bytes != product || product == 0 ||
      product > IDX_MAX_PAYLOAD)
    abort();
  if (plain_size && d.bytes + 4 + 4 * (uint64_t)ndims != plain_size) abort();
  /* Every byte was written (MSan would say; ASan at least touches them). */
  volatile uint8_t sum = 0;
  for (uint64_t i = 0; i < d.bytes; i++) sum ^= d.values[i];
  (void)sum;
  idx_data_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int ndims = 1; ndims <= 3; ndims += 2) {
    idx_source *src = idx_source_memory(data, size);
    check(src, ndims, size);
    idx_source_close(src);
    if (!idx_source_has_gunzip()) continue;
    int rc = IDX_OK;
    char err[256];
    src = idx_source_gunzip(idx_source_memory(data, size), &rc, err, sizeof err);
    check(src, ndims, 0);
    idx_source_close(src);
  }
  return 0;
}
