/* safetensors_tool.c — cnnbench's safetensors layer from the command line, for checking it
 * against PyTorch's safetensors (cli/safetensors_python.sh). Never installed.
 *
 *   safetensors_tool write PATH
 *       writes the known tensors below (every dtype, a scalar, 4-D, an empty tensor) with
 *       metadata {"format": "pt", "step": "42"}.
 *   safetensors_tool dump PATH [KEY...]
 *       prints "meta KEY VALUE" (or "<none>") for each KEY, then for each tensor, sorted by
 *       name, "NAME DTYPE [D0,D1,...] FNV1A64" where the last is the FNV-1a 64 hash of its
 *       raw little-endian bytes, in hex. Exits 1 with the reader's message when the file is
 *       refused. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags.h"
#include "store/safetensors.h"

static uint64_t fnv1a64(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3u;
  return h;
}

static const char *dtype_name(uint32_t d) {
  switch (d) {
    case CNNB_ST_F32: return "F32";
    case CNNB_ST_I64: return "I64";
    case CNNB_ST_F16: return "F16";
    case CNNB_ST_BF16: return "BF16";
  }
  return "?";
}

static int write_known(cnnb_ctx *ctx, const char *path) {
  static float scalar = 3.5f, four_d[2 * 3 * 4 * 5];
  for (int i = 0; i < 120; i++) four_d[i] = (float)i * 0.25f - 3.0f;
  static const int64_t counts[3] = {-1, 0, INT64_MAX};
  /* 1.0, -2.0, 65504 (the largest), the smallest subnormal; BF16 1.0, -1.0, 3.140625, 0. */
  static const uint16_t halves[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
  static const uint16_t bf[4] = {0x3f80, 0xbf80, 0x4049, 0x0000};
  cnnb_st_tensor t[] = {
      {"scalar", CNNB_ST_F32, 0, {0}, &scalar, 4},
      {"conv/weights", CNNB_ST_F32, 4, {2, 3, 4, 5}, four_d, sizeof four_d},
      {"counts", CNNB_ST_I64, 1, {3}, counts, sizeof counts},
      {"half", CNNB_ST_F16, 1, {4}, halves, sizeof halves},
      {"bf16", CNNB_ST_BF16, 2, {2, 2}, bf, sizeof bf},
      {"empty", CNNB_ST_F32, 2, {0, 3}, NULL, 0},
  };
  cnnb_st_meta meta[] = {{"format", "pt"}, {"step", "42"}};
  return cnnb_safetensors_write(ctx, path, t, sizeof t / sizeof t[0], meta, 2) == CNNB_OK ? 0 : 1;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp((*(const cnnb_st_tensor *const *)a)->name,
                (*(const cnnb_st_tensor *const *)b)->name);
}

static int dump(cnnb_ctx *ctx, const char *path, char **keys, int num_keys) {
  cnnb_safetensors *f;
  if (cnnb_safetensors_open(ctx, path, &f) != CNNB_OK) return 1;
  for (int k = 0; k < num_keys; k++) {
    const char *v = cnnb_safetensors_meta(f, keys[k]);
    printf("meta %s %s\n", keys[k], v ? v : "<none>");
  }
  size_t n = cnnb_safetensors_count(f);
  const cnnb_st_tensor **sorted = malloc((n ? n : 1) * sizeof *sorted);
  for (size_t i = 0; i < n; i++) sorted[i] = cnnb_safetensors_tensor(f, i);
  qsort(sorted, n, sizeof *sorted, cmp_name);
  for (size_t i = 0; i < n; i++) {
    const cnnb_st_tensor *t = sorted[i];
    printf("%s %s [", t->name, dtype_name(t->dtype));
    for (int d = 0; d < t->ndims; d++) printf("%s%" PRId64, d ? "," : "", t->dims[d]);
    printf("] %016" PRIx64 "\n", fnv1a64(t->data, t->bytes));
  }
  free(sorted);
  cnnb_safetensors_close(f);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "dump"))) {
    fprintf(stderr, "usage: safetensors_tool write PATH | dump PATH [KEY...]\n");
    return 2;
  }
  cnnb_ctx *ctx = cnnb_ctx_create("safetensors_tool", NULL);
  int rc = strcmp(argv[1], "write") == 0 ? write_known(ctx, argv[2])
                                         : dump(ctx, argv[2], argv + 3, argc - 3);
  if (rc) fprintf(stderr, "safetensors_tool: %s\n", cnnb_error_message(ctx));
  cnnb_ctx_destroy(ctx);
  return rc;
}
