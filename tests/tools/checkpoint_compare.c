/* checkpoint_compare.c — compares two checkpoints (safetensors) tensor by tensor:
 *   checkpoint_compare TOL REFERENCE FILE
 * Both must hold the same tensor names, dtypes and shapes; F32 values may differ by at
 * most TOL * (1 + |reference|), other dtypes must be equal; the metadata's
 * cnnbench.global_step must be equal when either has one. Prints the largest difference
 * and the tensor holding it; exits 1 on a mismatch, 2 on a file that cannot be read. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/safetensors.h"

static int compare(const cnnb_safetensors *ref, const cnnb_safetensors *f, double tol,
                   const char *path) {
  if (cnnb_safetensors_count(ref) != cnnb_safetensors_count(f)) {
    printf("%s: %zu tensors, the reference %zu\n", path, cnnb_safetensors_count(f),
           cnnb_safetensors_count(ref));
    return 1;
  }
  const char *a = cnnb_safetensors_meta(ref, "cnnbench.global_step");
  const char *b = cnnb_safetensors_meta(f, "cnnbench.global_step");
  if ((a || b) && (!a || !b || strcmp(a, b) != 0)) {
    printf("%s: global step %s, the reference %s\n", path, b ? b : "none", a ? a : "none");
    return 1;
  }
  double worst = 0;
  const char *worst_name = "";
  for (size_t i = 0; i < cnnb_safetensors_count(ref); i++) {
    const cnnb_st_tensor *r = cnnb_safetensors_tensor(ref, i);
    const cnnb_st_tensor *t = cnnb_safetensors_find(f, r->name);
    if (!t || t->dtype != r->dtype || t->ndims != r->ndims || t->bytes != r->bytes ||
        memcmp(t->dims, r->dims, sizeof r->dims) != 0) {
      printf("%s: tensor '%s' %s\n", path, r->name, t ? "differs in dtype or shape" : "is missing");
      return 1;
    }
    if (r->dtype != CNNB_ST_F32) {
      if (memcmp(r->data, t->data, r->bytes) != 0) {
        printf("%s: tensor '%s' differs\n", path, r->name);
        return 1;
      }
      continue;
    }
    for (size_t k = 0; k < r->bytes / sizeof(float); k++) {
      float x, y;
      memcpy(&x, (const char *)r->data + k * sizeof x, sizeof x);
      memcpy(&y, (const char *)t->data + k * sizeof y, sizeof y);
      double d = fabs((double)x - (double)y) / (1.0 + fabs((double)x));
      if (!(d <= worst)) worst = isnan(d) ? INFINITY : d, worst_name = r->name;
    }
  }
  printf("%s: largest difference %.3g (relative to 1 + |reference|) in '%s'\n", path, worst,
         worst_name);
  return worst <= tol ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: checkpoint_compare TOL REFERENCE FILE\n");
    return 2;
  }
  cnnb_ctx *ctx = cnnb_ctx_create_child(NULL, "checkpoint_compare");
  cnnb_safetensors *ref = NULL, *f = NULL;
  if (cnnb_safetensors_open(ctx, argv[2], &ref) != CNNB_OK ||
      cnnb_safetensors_open(ctx, argv[3], &f) != CNNB_OK) {
    fprintf(stderr, "checkpoint_compare: %s\n", cnnb_error_message(ctx));
    return 2;
  }
  int code = compare(ref, f, atof(argv[1]), argv[3]);
  cnnb_safetensors_close(ref);
  cnnb_safetensors_close(f);
  cnnb_ctx_destroy(ctx);
  return code;
}
