/* checkpoint_logits.c — a model's logits for a batch of images with its parameters and
 * statistics from a safetensors checkpoint, for the cross-framework test
 * (cli/torchvision_checkpoint.sh). Never installed.
 *
 *   checkpoint_logits --model=NAME --checkpoint=FILE --images=FILE --out=FILE
 *                     [--batch=N] [--image_size=S] [--num_classes=1001] [--device=cpu]
 *
 * Loads the model and device plugins through the loader (as cnnbench does), builds the
 * graph at batch N (default 1) and image size S (default: the model's), forward only
 * (inference kernels: batch norm uses the moving statistics), loads FILE with
 * cnnb_checkpoint_load_model_file (a cnnbench checkpoint, or a torchvision state_dict
 * saved with safetensors), runs one forward step on --images (raw fp32 NCHW, host byte
 * order, N x 3 x S x S) and writes the logits to --out (raw fp32, N x num_classes).
 *
 * With --train_steps=K and --labels=FILE (raw int32, N of them) it trains instead, for the
 * training oracle (cli/torchvision_zoo.sh): batch norm on the batch's statistics, K steps
 * on the same batch with momentum 0.9 (PyTorch's SGD and TF's MomentumOptimizer agree:
 * v = 0.9 v + g, w -= lr v), --learning_rate (default 0.1), no weight decay, dropout and
 * stochastic depth off (their masks are random in both frameworks, so no two runs could
 * agree with them on), and writes each step's mean cross-entropy to --out as text, one
 * per line: the loss of step k is computed with the weights after k updates.
 * $CNNB_PLUGIN_DIR, when set, replaces the install's plugin directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/checkpoint.h"
#include "exec/executor.h"
#include "exec/trainer.h"
#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "loader/loader.h"
#include "graph/op_device.h"
#include "exec/plan.h"
#include "config/core_flags.h"

typedef struct args {
  const char *model, *checkpoint, *images, *labels, *out, *device;
  long batch, image_size, num_classes, train_steps; /* train_steps 0: logits */
  double learning_rate;
} args;

static int parse_long(const char *arg, const char *value, long max, long *out) {
  char *end;
  long v = strtol(value, &end, 10);
  if (*end || v < 1 || v > max) {
    fprintf(stderr, "checkpoint_logits: %s: want an integer in [1, %ld]\n", arg, max);
    return 0;
  }
  *out = v;
  return 1;
}

static int parse(int argc, char **argv, args *a) {
  *a = (args){.device = "cpu", .batch = 1, .num_classes = 1001, .learning_rate = 0.1};
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i], *eq = strchr(s, '=');
    if (!eq || strncmp(s, "--", 2) != 0) {
      fprintf(stderr, "checkpoint_logits: unknown argument '%s'\n", s);
      return 0;
    }
    const char *v = eq + 1;
    size_t n = (size_t)(eq - s);
#define IS(name) (n == strlen(name) && strncmp(s, name, n) == 0)
    if (IS("--model")) a->model = v;
    else if (IS("--checkpoint")) a->checkpoint = v;
    else if (IS("--images")) a->images = v;
    else if (IS("--labels")) a->labels = v;
    else if (IS("--out")) a->out = v;
    else if (IS("--device")) a->device = v;
    else if (IS("--batch")) {
      if (!parse_long(s, v, 4096, &a->batch)) return 0;
    } else if (IS("--image_size")) {
      if (!parse_long(s, v, 4096, &a->image_size)) return 0;
    } else if (IS("--num_classes")) {
      if (!parse_long(s, v, 1000000, &a->num_classes)) return 0;
    } else if (IS("--train_steps")) {
      if (!parse_long(s, v, 1000, &a->train_steps)) return 0;
    } else if (IS("--learning_rate")) {
      char *end;
      a->learning_rate = strtod(v, &end);
      if (*end || !(a->learning_rate > 0.0 && a->learning_rate < 100.0)) {
        fprintf(stderr, "checkpoint_logits: %s: want a number in (0, 100)\n", s);
        return 0;
      }
    } else {
      fprintf(stderr, "checkpoint_logits: unknown argument '%s'\n", s);
      return 0;
    }
#undef IS
  }
  if (!a->model || !a->checkpoint || !a->images || !a->out || !a->train_steps != !a->labels) {
    fprintf(stderr, "usage: checkpoint_logits --model=NAME --checkpoint=FILE --images=FILE "
                    "--out=FILE [--batch=N] [--image_size=S] [--num_classes=1001] "
                    "[--device=cpu] [--train_steps=K --labels=FILE [--learning_rate=0.1]]\n");
    return 0;
  }
  return 1;
}

/* n values of `size` bytes from path, which must hold exactly that many. */
static void *read_exact(const char *path, size_t n, size_t size, const char *what) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return NULL;
  }
  char *p = malloc(n * size + 1);
  size_t got = p ? fread(p, size, n, f) : 0;
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (!p || got != n || extra) {
    fprintf(stderr, "checkpoint_logits: %s: want exactly %zu %s\n", path, n, what);
    free(p);
    return NULL;
  }
  return p;
}

/* Dropout and stochastic depth kept nothing out: the training oracle's steps must be
 * deterministic. Test-only: the graph does not rewrite nodes for anything else. */
static void disable_random_ops(cnnb_graph *g) {
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    cnnb_node *n = (cnnb_node *)cnnb_graph_node(g, i);
    if (n->op == CNNB_OP_DROPOUT) n->attr.dropout.keep_prob = 1.0f;
    if (n->op == CNNB_OP_STOCHASTIC_DEPTH) n->attr.stochastic_depth.drop_prob = 0.0f;
  }
}

/* Runs the whole tool; everything it made is released by main. */
typedef struct state {
  cnnb_flags *flags;
  cnnb_loader *loader;
  cnnb_ctx *ctx;
  cnnb_graph *g;
  const cnnb_device_vtable *dv;
  void *device;
  cnnb_executor *ex;
  cnnb_trainer *tr;
  float *images, *logits;
  int32_t *labels;
} state;

static int fail(state *s, const char *what) {
  fprintf(stderr, "checkpoint_logits: %s: %s\n", what,
          s->ctx && *cnnb_error_message(s->ctx) ? cnnb_error_message(s->ctx) : "failed");
  return 1;
}

/* Forward only: the logits, raw fp32, to f. */
static int logits(state *s, const args *a, FILE *f) {
  const size_t n_logits = (size_t)a->batch * (size_t)a->num_classes;
  if (!(s->logits = malloc(n_logits * sizeof *s->logits))) return fail(s, "out of memory");
  if (cnnb_executor_step(s->ex, s->images, NULL, 1.0f, 0) != CNNB_OK ||
      cnnb_executor_logits(s->ex, s->logits) != CNNB_OK)
    return fail(s, "forward");
  if (fwrite(s->logits, sizeof *s->logits, n_logits, f) != n_logits) {
    perror(a->out);
    return 1;
  }
  return 0;
}

/* --train_steps steps on the one batch: each step's loss, as text, to f. */
static int train(state *s, const args *a, FILE *f) {
  if (!(s->labels = read_exact(a->labels, (size_t)a->batch, sizeof(int32_t), "int32 labels")))
    return 1;
  for (long i = 0; i < a->batch; i++)
    if (s->labels[i] < 0 || s->labels[i] >= a->num_classes) {
      fprintf(stderr, "checkpoint_logits: %s: label %ld is %d, not in [0, %ld)\n", a->labels, i,
              s->labels[i], a->num_classes);
      return 1;
    }
  cnnb_trainer_config tcfg = {.rule = CNNB_OPT_MOMENTUM,
                              .momentum = 0.9f,
                              .lr = {.has_init_learning_rate = true,
                                     .init_learning_rate = a->learning_rate,
                                     .global_batch_size = (int32_t)a->batch}};
  if (cnnb_trainer_create(s->ctx, &tcfg, s->ex, &s->tr) != CNNB_OK) return fail(s, "trainer");
  for (long step = 0; step < a->train_steps; step++) {
    float loss;
    if (cnnb_executor_step(s->ex, s->images, s->labels, 1.0f, (uint64_t)step) != CNNB_OK ||
        cnnb_executor_loss(s->ex, &loss) != CNNB_OK ||
        cnnb_trainer_apply(s->tr, step, NULL, NULL) != CNNB_OK)
      return fail(s, "training step");
    fprintf(f, "%.9g\n", (double)loss);
  }
  return 0;
}

static int run(state *s, const args *a) {
  char err[4096];
  s->flags = cnnb_flags_create();
  s->loader = cnnb_loader_create(NULL);
  if (!s->flags || !s->loader || cnnb_flags_declare_core(s->flags) != CNNB_OK)
    return fail(s, "setup");
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (dir && *dir) cnnb_loader_set_install_dir(s->loader, dir);
  if (cnnb_loader_discover(s->loader, NULL, err, sizeof err) != CNNB_OK) {
    fprintf(stderr, "checkpoint_logits: %s\n", err);
    return 1;
  }
  cnnb_loader_register_flags(s->loader, s->flags);
  if (!(s->ctx = cnnb_ctx_create("checkpoint_logits", s->flags))) return fail(s, "setup");

  const cnnb_plugin *mp, *dp;
  if (cnnb_loader_find(s->loader, CNNB_KIND_MODEL, a->model, &mp, NULL, err, sizeof err) !=
          CNNB_OK ||
      cnnb_loader_find(s->loader, CNNB_KIND_DEVICE, a->device, &dp, NULL, err, sizeof err) !=
          CNNB_OK) {
    fprintf(stderr, "checkpoint_logits: %s\n", err);
    return 1;
  }
  const cnnb_model_vtable *mv = mp->vtable;
  cnnb_model_info info = {.struct_size = sizeof info};
  const cnnb_dataset_info *imagenet = cnnb_dataset_find("imagenet");
  if (!imagenet) return fail(s, "the imagenet dataset (its datasource is not loaded)");
  if (mv->describe(s->ctx, a->model, imagenet->kind, &info) != CNNB_OK) return fail(s, a->model);
  const int32_t size = (int32_t)(a->image_size ? a->image_size : info.image_size);
  s->g = cnnb_graph_create((int32_t)a->batch, 3, size, size, (int32_t)a->num_classes);
  if (!s->g) return fail(s, "graph");
  if (mv->build(s->ctx, a->model, imagenet->kind, s->g) != CNNB_OK ||
      cnnb_graph_status(s->g) != CNNB_OK || cnnb_graph_add_loss(s->g) != CNNB_OK) {
    fprintf(stderr, "checkpoint_logits: building %s: %s\n", a->model,
            *cnnb_error_message(s->ctx) ? cnnb_error_message(s->ctx) : cnnb_graph_error(s->g));
    return 1;
  }

  const bool training = a->train_steps > 0;
  if (training) disable_random_ops(s->g);

  s->dv = dp->vtable;
  cnnb_device_config dcfg = {
      .struct_size = sizeof dcfg, .precision = CNNB_PRECISION_FP32, .training = training};
  if (s->dv->create(s->ctx, a->device, &dcfg, &s->device) != CNNB_OK) {
    s->device = NULL;
    return fail(s, a->device);
  }
  if (cnnb_ops_check_device(s->ctx, s->g, s->dv, s->device, dp->abi_minor, a->device) != CNNB_OK)
    return fail(s, a->device);
  /* As the host runs it: ReLUs fused where the device can. */
  cnnb_plan_fuse_relus(s->g, cnnb_ops_device_relu_fusion(dp, s->dv, s->device));
  cnnb_executor_config ecfg = {.training = training};
  if (cnnb_executor_create(s->ctx, s->dv, s->device, s->g, &ecfg, &s->ex) != CNNB_OK)
    return fail(s, "executor");
  if (cnnb_checkpoint_load_model_file(s->ctx, a->checkpoint, s->ex) != CNNB_OK)
    return fail(s, a->checkpoint);

  const size_t n_images = (size_t)a->batch * 3 * (size_t)size * (size_t)size;
  if (!(s->images = read_exact(a->images, n_images, sizeof(float), "fp32 values (N x 3 x S x S)")))
    return 1;
  FILE *f = fopen(a->out, "wb");
  if (!f) {
    perror(a->out);
    return 1;
  }
  int rc = training ? train(s, a, f) : logits(s, a, f);
  if (fclose(f) != 0 && rc == 0) {
    perror(a->out);
    rc = 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  args a;
  if (!parse(argc, argv, &a)) return 2;
  state s = {0};
  int rc = run(&s, &a);
  free(s.images);
  free(s.logits);
  free(s.labels);
  cnnb_trainer_destroy(s.tr);
  cnnb_executor_destroy(s.ex);
  if (s.device) s.dv->destroy(s.device);
  cnnb_graph_destroy(s.g);
  cnnb_ctx_destroy(s.ctx);
  cnnb_loader_destroy(s.loader);
  cnnb_flags_destroy(s.flags);
  return rc;
}
