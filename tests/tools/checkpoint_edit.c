/* checkpoint_edit.c — writes an altered copy of a checkpoint (safetensors), so tests can
 * show what a resume or a load does with a file that is not what it should be:
 *   checkpoint_edit drop PREFIX IN OUT     without the tensors whose names start with PREFIX
 *   checkpoint_edit reshape NAME IN OUT    tensor NAME with its two first dims swapped, or
 *                                          (1-D) one element fewer
 *   checkpoint_edit meta KEY VALUE IN OUT  metadata KEY set to VALUE
 *   checkpoint_edit set NAME I VALUE IN OUT     element I of F32 tensor NAME set to VALUE
 *                                          (strtof: "nan", "inf", "1e6")
 *   checkpoint_edit flipbit NAME I BIT IN OUT  bit BIT (0-31) of element I of F32 tensor
 *                                          NAME flipped (30: the exponent's highest)
 * Exits 2 when IN cannot be read or OUT written, with the reason. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/safetensors.h"

int main(int argc, char **argv) {
  bool meta = argc == 6 && strcmp(argv[1], "meta") == 0;
  bool set = argc == 7 && strcmp(argv[1], "set") == 0;
  bool flip = argc == 7 && strcmp(argv[1], "flipbit") == 0;
  if (!(argc == 5 && (strcmp(argv[1], "drop") == 0 || strcmp(argv[1], "reshape") == 0)) && !meta &&
      !set && !flip) {
    fprintf(stderr,
            "usage: checkpoint_edit drop PREFIX IN OUT | reshape NAME IN OUT | "
            "meta KEY VALUE IN OUT | set NAME I VALUE IN OUT | flipbit NAME I BIT IN OUT\n");
    return 2;
  }
  float *changed = NULL; /* set / flipbit: the tensor's values, one of them changed */
  const char *in = argv[argc - 2], *out = argv[argc - 1];
  cnnb_ctx *ctx = cnnb_ctx_create_child(NULL, "checkpoint_edit");
  cnnb_safetensors *f = NULL;
  if (cnnb_safetensors_open(ctx, in, &f) != CNNB_OK) {
    fprintf(stderr, "checkpoint_edit: %s\n", cnnb_error_message(ctx));
    return 2;
  }
  size_t n = cnnb_safetensors_count(f), kept = 0;
  cnnb_st_tensor *tensors = calloc(n ? n : 1, sizeof *tensors);
  bool found = meta;
  for (size_t i = 0; i < n; i++) {
    cnnb_st_tensor t = *cnnb_safetensors_tensor(f, i);
    if (strcmp(argv[1], "drop") == 0 && strncmp(t.name, argv[2], strlen(argv[2])) == 0) {
      found = true;
      continue;
    }
    if (strcmp(argv[1], "reshape") == 0 && strcmp(t.name, argv[2]) == 0) {
      found = true;
      if (t.ndims >= 2 && t.dims[0] != t.dims[1]) {
        int64_t d = t.dims[0];
        t.dims[0] = t.dims[1];
        t.dims[1] = d;
      } else {
        t.dims[0] -= 1;
        t.bytes -= t.bytes / (size_t)(t.dims[0] + 1);
      }
    }
    if ((set || flip) && strcmp(t.name, argv[2]) == 0) {
      size_t at = strtoul(argv[3], NULL, 10);
      if (t.dtype != CNNB_ST_F32 || at >= t.bytes / 4 || !(changed = malloc(t.bytes))) {
        fprintf(stderr, "checkpoint_edit: %s is not F32 with an element %zu\n", t.name, at);
        return 2;
      }
      memcpy(changed, t.data, t.bytes);
      if (set) {
        changed[at] = strtof(argv[4], NULL);
      } else {
        uint32_t bits;
        memcpy(&bits, &changed[at], 4);
        bits ^= 1u << (atoi(argv[4]) & 31);
        memcpy(&changed[at], &bits, 4);
      }
      t.data = changed;
      found = true;
    }
    tensors[kept++] = t;
  }
  /* Metadata: the same keys, one of them replaced or added. */
  static const char *const keys[] = {"format",
                                     "cnnbench.version",
                                     "cnnbench.model",
                                     "cnnbench.dataset",
                                     "cnnbench.num_classes",
                                     "cnnbench.image_size",
                                     "cnnbench.precision",
                                     "cnnbench.optimizer",
                                     "cnnbench.global_step",
                                     "cnnbench.updates",
                                     "cnnbench.loss_scale",
                                     "cnnbench.loss_scale_normal_steps",
                                     "cnnbench.config"};
  cnnb_st_meta m[sizeof keys / sizeof keys[0] + 1];
  size_t nm = 0;
  bool replaced = false;
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    const char *v = cnnb_safetensors_meta(f, keys[k]);
    if (meta && strcmp(keys[k], argv[2]) == 0) v = argv[3], replaced = true;
    if (v) m[nm++] = (cnnb_st_meta){keys[k], v};
  }
  if (meta && !replaced) m[nm++] = (cnnb_st_meta){argv[2], argv[3]};
  int code = 0;
  if (!found) {
    fprintf(stderr, "checkpoint_edit: %s has no tensor %s\n", in, argv[2]);
    code = 2;
  } else if (cnnb_safetensors_write(ctx, out, tensors, kept, m, nm) != CNNB_OK) {
    fprintf(stderr, "checkpoint_edit: %s\n", cnnb_error_message(ctx));
    code = 2;
  }
  free(tensors);
  free(changed);
  cnnb_safetensors_close(f);
  cnnb_ctx_destroy(ctx);
  return code;
}
