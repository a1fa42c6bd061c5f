/* memory.c — memory descriptors (by tag, "any", plain NCHW; a layout's short name for
 * logs) and the device's aligned, zeroed host buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_device.h"

dnnl_memory_desc_t cpu_md_tag(int ndims, const dnnl_dim_t *dims, dnnl_data_type_t dt,
                              dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  memset(&md, 0, sizeof md);
  dnnl_dims_t full = {0}; /* oneDNN reads a whole dnnl_dims_t */
  for (int i = 0; i < ndims && i < DNNL_MAX_NDIMS; i++) full[i] = dims[i];
  dnnl_memory_desc_init_by_tag(&md, ndims, full, dt, tag);
  return md;
}

dnnl_memory_desc_t cpu_md_any(int ndims, const dnnl_dim_t *dims, dnnl_data_type_t dt) {
  return cpu_md_tag(ndims, dims, dt, dnnl_format_tag_any);
}

dnnl_memory_desc_t cpu_md_nchw(cnnb_shape s, dnnl_data_type_t dt) {
  dnnl_dim_t dims[4] = {s.n, s.c, s.h, s.w};
  return cpu_md_tag(4, dims, dt, dnnl_nchw);
}

const char *cpu_md_name(const dnnl_memory_desc_t *md, char *buf, size_t size) {
  if (md->format_kind != dnnl_blocked) {
    snprintf(buf, size, "%s", dnnl_fmt_kind2str(md->format_kind));
    return buf;
  }
  /* Outer dimensions by decreasing stride (letters a, b, ...), then inner blocks:
   * "abcd" is plain nchw, "aBcd16b" is nChw16c. */
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  int order[DNNL_MAX_NDIMS], blocked[DNNL_MAX_NDIMS] = {0};
  for (int i = 0; i < md->ndims; i++) order[i] = i;
  for (int i = 0; i < md->ndims; i++)
    for (int j = i + 1; j < md->ndims; j++)
      if (b->strides[order[j]] > b->strides[order[i]]) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  for (int k = 0; k < b->inner_nblks; k++) blocked[b->inner_idxs[k]] = 1;
  size_t n = 0;
  for (int i = 0; i < md->ndims && n + 1 < size; i++)
    buf[n++] = (char)((blocked[order[i]] ? 'A' : 'a') + order[i]);
  for (int k = 0; k < b->inner_nblks && n + 8 < size; k++)
    n += (size_t)snprintf(buf + n, size - n, "%d%c", (int)b->inner_blks[k],
                          'a' + (int)b->inner_idxs[k]);
  buf[n < size ? n : size - 1] = '\0';
  return buf;
}

void *cpu_alloc(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void *p = aligned_alloc(64, rounded);
  if (p) memset(p, 0, rounded);
  return p;
}

void cpu_free(void *p) { free(p); }
