/* fuzz_safetensors.c — the safetensors reader (core/src/store/safetensors.c), which checkpoints
 * from disk reach first, on arbitrary bytes. Besides the sanitizers' checks, a file that
 * opens must be what the reader promises: every tensor's bytes inside the input and equal
 * to its dtype size x shape, the tensors in data order and back to back, covering the data
 * exactly, and each found by its name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags.h"
#include "store/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static cnnb_ctx *ctx;
  if (!ctx) ctx = cnnb_ctx_create("fuzz", NULL);
  cnnb_clear_error(ctx);
  cnnb_safetensors *f;
  if (cnnb_safetensors_open_bytes(ctx, "input", data, size, &f) != CNNB_OK) {
    if (f || !strstr(cnnb_error_message(ctx), "input")) abort();
    return 0;
  }
  size_t n = cnnb_safetensors_count(f);
  const unsigned char *expect = NULL;
  uint64_t covered = 0;
  for (size_t i = 0; i < n; i++) {
    const cnnb_st_tensor *t = cnnb_safetensors_tensor(f, i);
    uint64_t bytes = cnnb_st_dtype_size(t->dtype);
    if (!bytes || t->ndims < 0 || t->ndims > CNNB_ST_MAX_DIMS) abort();
    for (int d = 0; d < t->ndims; d++) {
      if (t->dims[d] < 0) abort();
      bytes *= (uint64_t)t->dims[d];
    }
    if (bytes != t->bytes || bytes > size) abort();
    if (expect && (const unsigned char *)t->data != expect) abort();
    expect = (const unsigned char *)t->data + t->bytes;
    covered += t->bytes;
    /* Every byte is readable (ASan checks), and the lookup by name finds this tensor. */
    volatile unsigned char sum = 0;
    for (size_t k = 0; k < t->bytes; k++) sum ^= ((const unsigned char *)t->data)[k];
    (void)sum;
    const cnnb_st_tensor *found = cnnb_safetensors_find(f, t->name);
    if (!found || strcmp(found->name, t->name) != 0) abort();
  }
  if (covered > size) abort();
  (void)cnnb_safetensors_meta(f, "format");
  cnnb_safetensors_close(f);
  return 0;
}
