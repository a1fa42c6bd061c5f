/* input_uint8.c — the cpu device's CNNB_EXT_DEVICE_UINT8_INPUT: a batch of uint8 NHWC
 * pixels becomes the graph's input, (float)v * scale[c] + offset[c] per element.
 *
 * The input's layout is plain NCHW (cpu_layout_plain): in fp32 the loop writes straight
 * into it, split over the device's threads by pixel; in bf16 it writes fp32 into a
 * scratch buffer and lets the host conversion round it, so both transports round alike. */
#include "cpu_device.h"

typedef struct convert_job {
  const uint8_t *src; /* [N, H, W, C] */
  float *dst;         /* [N, C, H, W] */
  const float *scale, *offset;
  int64_t channels, plane; /* C, H * W */
} convert_job;

/* Pixels [begin, end) of the batch (pixel = n * H * W + y * W + x). */
static void convert_range(void *ctx, int64_t begin, int64_t end) {
  const convert_job *j = ctx;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / j->plane, at = p % j->plane;
    const uint8_t *px = j->src + p * j->channels;
    float *out = j->dst + n * j->channels * j->plane + at;
    for (int64_t c = 0; c < j->channels; c++)
      out[c * j->plane] = (float)px[c] * j->scale[c] + j->offset[c];
  }
}

cnnb_status cpu_input_from_host_uint8(void *device, const cnnb_graph *g, cnnb_tensor t,
                                      void *buffer, const uint8_t *host, const float *scale,
                                      const float *offset) {
  cpu_device *d = device;
  cpu_plan *p;
  cnnb_status st = cpu_plan_get(d, g, &p);
  if (st) return st;
  if (t < 0 || t >= p->num_nodes)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: tensor %d is not in the graph (%d nodes)", t,
                      p->num_nodes);
  const cnnb_node *node = cnnb_graph_node(g, t);
  if (node->op != CNNB_OP_INPUT)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cpu: uint8 images go into the graph's input, not node '%s'", node->name);
  cnnb_shape s = node->shape;
  cpu_threads_apply(d);
  dnnl_memory_desc_t plain = cpu_md_nchw(s, dnnl_f32);
  int direct = cpu_md_same(&p->md[t], &plain);
  float *dst = buffer;
  if (!direct) {
    st = cpu_transient_reserve(d, 0, (size_t)cnnb_shape_count(s) * sizeof(float), node);
    if (st) return st;
    dst = cpu_transient(d, 0);
  }
  convert_job job = {host, dst, scale, offset, s.c, (int64_t)s.h * s.w};
  cpu_parallel_for(d, (int64_t)s.n * s.h * s.w, convert_range, &job);
  return direct ? CNNB_OK : cpu_tensor_from_host(d, p, t, buffer, dst);
}
