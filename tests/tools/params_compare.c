/* params_compare.c — compares parameter files (train_params.c's) element by element:
 *   params_compare TOL REFERENCE FILE...
 * Each FILE must hold as many floats as REFERENCE and differ from it by at most
 * TOL * (1 + |reference|) everywhere (relative for large weights, absolute near 0).
 * Prints the largest difference per file; exits 1 on a mismatch, 2 on bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *load(const char *path, long *count) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  float *data = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long bytes = ftell(f);
    *count = bytes / (long)sizeof(float);
    rewind(f);
    data = malloc((size_t)(bytes > 0 ? bytes : 1));
    if (data && fread(data, sizeof(float), (size_t)*count, f) != (size_t)*count) {
      free(data);
      data = NULL;
    }
  }
  fclose(f);
  return data;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: params_compare TOL REFERENCE FILE...\n");
    return 2;
  }
  double tol = atof(argv[1]);
  long n = 0;
  float *ref = load(argv[2], &n);
  if (!ref || n == 0) {
    fprintf(stderr, "params_compare: cannot read %s\n", argv[2]);
    return 2;
  }
  int code = 0;
  for (int i = 3; i < argc; i++) {
    long m = 0;
    float *other = load(argv[i], &m);
    if (!other || m != n) {
      fprintf(stderr, "params_compare: %s: %ld floats, %s has %ld\n", argv[i], m, argv[2], n);
      free(other);
      code = code ? code : 2;
      continue;
    }
    double worst = 0;
    long at = 0;
    for (long k = 0; k < n && !isnan(worst); k++) {
      double d = fabs((double)other[k] - ref[k]) / (1.0 + fabs((double)ref[k]));
      if (!(d <= worst)) worst = d, at = k; /* the first NaN (an inf or NaN weight) wins */
    }
    int ok = worst <= tol;
    printf("%s: largest difference %.3g at element %ld (%g vs %g), tolerance %g: %s\n", argv[i],
           worst, at, other[at], ref[at], tol, ok ? "ok" : "MISMATCH");
    if (!ok) code = 1;
    free(other);
  }
  free(ref);
  return code;
}
