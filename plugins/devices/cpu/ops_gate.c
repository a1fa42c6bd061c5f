/* ops_gate.c — multiply by a squeeze-and-excitation gate (ABI 1.14): y = x * gate with
 * gate [N, C, 1, 1], one value per image and channel broadcast over H and W.
 *
 * Not oneDNN's binary primitive, on purpose: oneDNN 2.6 has no fast kernel for this
 * broadcast on the layouts these networks' convolutions pick (nChw8c when C is not a
 * multiple of 16; a gate in another blocking than x), and its reference loop made
 * RegNetY's gates 72% of a training step. The loop here walks x in its own layout, a
 * (image, channel block) at a time over the device's threads:
 *   forward   y = x * g[n, c]           (channel padding of a blocked y written as 0)
 *   backward  dx = dy * g[n, c],  dg[n, c] = sum over H, W of dy * x (fp32 sums)
 * Any layout with at most one inner block, on the channels, is walked by its strides. */
#include <stdlib.h>
#include <string.h>

#include "cpu_device.h"

/* A layout as the loop reads it: element (n, c, h, w) at
 * n * s[0] + (c / block) * s[1] + h * s[2] + w * s[3] + c % block. */
typedef struct walk {
  int64_t s[4];
  int64_t block, blocks; /* channels per block; blocks (padded channels / block) */
} walk;

static bool walk_of(const dnnl_memory_desc_t *md, walk *w) {
  if (md->format_kind != dnnl_blocked || md->ndims != 4) return false;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (b->inner_nblks > 1 || (b->inner_nblks == 1 && b->inner_idxs[0] != 1)) return false;
  for (int i = 0; i < 4; i++) w->s[i] = b->strides[i];
  w->block = b->inner_nblks ? b->inner_blks[0] : 1;
  w->blocks = md->padded_dims[1] / w->block;
  return true;
}

static inline int64_t at(const walk *w, int64_t n, int64_t c, int64_t h, int64_t x) {
  return n * w->s[0] + (c / w->block) * w->s[1] + h * w->s[2] + x * w->s[3] + c % w->block;
}

typedef struct gate_node {
  cpu_node base;
  walk x, g; /* x's layout (y's and the gradients' too), the gate's */
  int bf16;
  int32_t channels, height, width;
  size_t gate_padding; /* bytes of the gate's buffer when it has channel padding, else 0 */
} gate_node;

typedef struct gate_job {
  const gate_node *s;
  const void *a; /* x (forward) or dy (backward) */
  const void *b; /* dgate: x; else unused */
  const void *gate;
  void *out;    /* y / dx, or the gate's gradient */
  int gradient; /* 1: out is the gate's gradient */
} gate_job;

static inline float load(const void *p, int64_t i, int bf16) {
  return bf16 ? cpu_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void store(void *p, int64_t i, float v, int bf16) {
  if (bf16) ((uint16_t *)p)[i] = cpu_f32_to_bf16(v);
  else ((float *)p)[i] = v;
}

/* Units are (image, channel block) pairs. */
static void gate_range(void *ctx, int64_t begin, int64_t end) {
  const gate_job *job = ctx;
  const gate_node *s = job->s;
  const walk *xw = &s->x, *gw = &s->g;
  const int bf16 = s->bf16;
  for (int64_t u = begin; u < end; u++) {
    const int64_t n = u / xw->blocks, cb = u % xw->blocks;
    for (int64_t k = 0; k < xw->block; k++) {
      const int64_t c = cb * xw->block + k;
      const int real = c < s->channels;
      if (job->gradient) {
        if (!real) continue; /* the gate's padding was zeroed whole */
        float sum = 0.0f;
        for (int64_t h = 0; h < s->height; h++)
          for (int64_t w = 0; w < s->width; w++) {
            const int64_t i = at(xw, n, c, h, w);
            sum += load(job->a, i, bf16) * load(job->b, i, bf16);
          }
        store(job->out, at(gw, n, c, 0, 0), sum, bf16);
        continue;
      }
      const float g = real ? load(job->gate, at(gw, n, c, 0, 0), bf16) : 0.0f;
      for (int64_t h = 0; h < s->height; h++)
        for (int64_t w = 0; w < s->width; w++) {
          const int64_t i = at(xw, n, c, h, w);
          store(job->out, i, real ? load(job->a, i, bf16) * g : 0.0f, bf16);
        }
    }
  }
}

static void gate_run(cpu_device *d, gate_node *s, const void *a, const void *b, const void *gate,
                     void *out, int gradient) {
  gate_job job = {s, a, b, gate, out, gradient};
  cpu_parallel_for(d, (int64_t)s->base.node->shape.n * s->x.blocks, gate_range, &job);
}

static cnnb_status gate_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  gate_node *s = (gate_node *)n;
  gate_run(d, s, io->inputs[0], NULL, io->inputs[1], io->output, 0);
  return CNNB_OK;
}

static cnnb_status gate_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  gate_node *s = (gate_node *)n;
  /* The gate's gradient first: it reads x, which may share dx's buffer only when x and
   * the gate are one tensor, and a per-channel gate never is x (shapes differ). */
  if (io->input_grads[1]) {
    if (s->gate_padding) memset(io->input_grads[1], 0, s->gate_padding);
    gate_run(d, s, io->output_grad, io->inputs[0], NULL, io->input_grads[1], 1);
  }
  if (io->input_grads[0])
    gate_run(d, s, io->output_grad, NULL, io->inputs[1], io->input_grads[0], 0);
  return CNNB_OK;
}

static void gate_release(cpu_device *d, cpu_node *n) {
  (void)d;
  free(n);
}

static const cpu_node_ops gate_ops = {gate_forward, gate_backward, gate_release};

cnnb_status cpu_prepare_gate(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const dnnl_memory_desc_t *x = &p->md[node->inputs[0]], *gate = &p->md[node->inputs[1]];
  gate_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, node, sizeof *s, "its state");
  cpu_node_init(&s->base, &gate_ops, g, p, index);
  if (!walk_of(x, &s->x) || !walk_of(gate, &s->g) || !cpu_md_same(x, &p->md[index]) ||
      x->data_type != gate->data_type || (x->data_type != dnnl_f32 && x->data_type != dnnl_bf16)) {
    free(s);
    return CNNB_EUNSUPPORTED; /* the caller runs it on oneDNN's binary instead */
  }
  s->bf16 = x->data_type == dnnl_bf16;
  if (gate->padded_dims[1] != gate->dims[1]) s->gate_padding = dnnl_memory_desc_get_size(gate);
  s->channels = node->shape.c;
  s->height = node->shape.h;
  s->width = node->shape.w;
  *out = &s->base;
  return CNNB_OK;
}
