/* checkpoint_keys.c — the keys a model's parameters are saved under in checkpoints, for
 * the tests that hold them to torchvision's state_dict (cli/torchvision_keys.sh) and to
 * uniqueness. Never installed.
 *
 *   checkpoint_keys --model=NAME [--data_name=imagenet] [--num_classes=1001] [--extras]
 *     loads the model plugin offering NAME through the loader (as cnnbench does), builds
 *     the graph at batch 1 and the model's own image size, and prints "key shape" per
 *     param and stat in graph order (cnnb_graph_param_key; shape "64,3,7,7"). --extras
 *     adds the keys the checkpoint writer adds for a batch norm with a checkpoint name
 *     (torchvision's layout): "<prefix>.weight C" when it has no learned scale (saved
 *     as ones) and "<prefix>.num_batches_tracked" with an empty shape (a scalar).
 *   checkpoint_keys --all [--num_classes=N]
 *     builds every model of every model plugin for every dataset it is offered for and
 *     checks that no two keys of a model (extras included) are equal, printing one line
 *     per model; exits 1 naming the model and key when one repeats.
 *
 * Plugins are found as cnnbench finds them (the install's directory, $CNNB_PLUGIN_PATH);
 * $CNNB_PLUGIN_DIR, when set, replaces the install's directory (the build tree's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "loader/loader.h"
#include "config/core_flags.h"

enum { MAX_KEY = 512 };

typedef struct key_line {
  char key[MAX_KEY];
  char shape[64];
} key_line;

typedef struct key_list {
  key_line *lines;
  size_t count, cap;
} key_list;

static int push(key_list *l, const char *key, const char *suffix, const char *shape) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    key_line *p = realloc(l->lines, cap * sizeof *p);
    if (!p) return 0;
    l->lines = p;
    l->cap = cap;
  }
  key_line *k = &l->lines[l->count++];
  snprintf(k->key, sizeof k->key, "%s%s", key, suffix);
  snprintf(k->shape, sizeof k->shape, "%s", shape);
  return 1;
}

static void shape_text(const cnnb_param *p, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int32_t d = 0; d < p->ndims && d < 4 && len < size; d++)
    len += (size_t)snprintf(out + len, size - len, "%s%d", d ? "," : "", (int)p->dims[d]);
}

/* Every key of g in graph order: params and stats, then (extras) what the checkpoint
 * writer adds for each named batch norm. 0 when out of memory. */
static int collect(const cnnb_graph *g, int extras, key_list *out) {
  for (int32_t i = 0; i < cnnb_graph_num_params(g); i++) {
    char shape[64];
    shape_text(cnnb_graph_param(g, i), shape, sizeof shape);
    if (!push(out, cnnb_graph_param_key(g, i), "", shape)) return 0;
  }
  if (!extras) return 1;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *n = cnnb_graph_node(g, i);
    const char *prefix = cnnb_graph_node_checkpoint_name(g, i);
    if (!prefix || n->op != CNNB_OP_BATCH_NORM) continue;
    char c[16];
    snprintf(c, sizeof c, "%d", (int)n->shape.c);
    if (!n->attr.batch_norm.scale && !push(out, prefix, ".weight", c)) return 0;
    if (!push(out, prefix, ".num_batches_tracked", "")) return 0;
  }
  return 1;
}

static int by_key(const void *a, const void *b) {
  return strcmp(((const key_line *)a)->key, ((const key_line *)b)->key);
}

typedef struct tool {
  cnnb_flags *flags;
  cnnb_loader *loader;
  cnnb_ctx *ctx;
  int32_t num_classes; /* 0: the dataset's (ImageNet: 1001, as tf_cnn_benchmarks) */
} tool;

/* Builds `model` for `dataset` at batch 1. NULL with *offered = 0 when the plugin does
 * not offer it for this dataset; NULL with a message on stderr when building failed. */
static cnnb_graph *build(tool *t, const char *model, const cnnb_dataset_info *dataset,
                         int *offered) {
  *offered = 0;
  const cnnb_plugin *plugin;
  char err[2048];
  if (cnnb_loader_find(t->loader, CNNB_KIND_MODEL, model, &plugin, NULL, err, sizeof err) !=
      CNNB_OK) {
    fprintf(stderr, "checkpoint_keys: %s\n", err);
    return NULL;
  }
  const cnnb_model_vtable *vt = plugin->vtable;
  cnnb_ctx *ctx = cnnb_ctx_create_child(t->ctx, model);
  if (!ctx) return NULL;
  cnnb_model_info info = {.struct_size = sizeof info};
  if (vt->describe(ctx, model, dataset->kind, &info) != CNNB_OK) {
    cnnb_ctx_destroy(ctx);
    return NULL;
  }
  *offered = 1;
  int32_t classes = t->num_classes ? t->num_classes : dataset->num_classes;
  cnnb_graph *g = cnnb_graph_create(1, dataset->channels, info.image_size, info.image_size,
                                    classes);
  cnnb_status st = g ? vt->build(ctx, model, dataset->kind, g) : CNNB_ENOMEM;
  if (st == CNNB_OK && g && cnnb_graph_status(g) != CNNB_OK) st = cnnb_graph_status(g);
  if (st != CNNB_OK) {
    fprintf(stderr, "checkpoint_keys: building %s for %s: %s\n", model, dataset->name,
            *cnnb_error_message(ctx) ? cnnb_error_message(ctx)
            : g                      ? cnnb_graph_error(g)
                                     : "out of memory");
    cnnb_graph_destroy(g);
    g = NULL;
  }
  cnnb_ctx_destroy(ctx);
  return g;
}

static int print_model(tool *t, const char *model, const char *data_name, int extras) {
  const cnnb_dataset_info *dataset = cnnb_dataset_find(data_name);
  if (!dataset) {
    fprintf(stderr, "checkpoint_keys: --data_name=%s: no such dataset\n", data_name);
    return 2;
  }
  int offered;
  cnnb_graph *g = build(t, model, dataset, &offered);
  if (!g) {
    if (!offered) fprintf(stderr, "checkpoint_keys: %s has no %s variant\n", model, data_name);
    return 1;
  }
  key_list keys = {0};
  int ok = collect(g, extras, &keys);
  for (size_t i = 0; ok && i < keys.count; i++)
    printf("%s%s%s\n", keys.lines[i].key, *keys.lines[i].shape ? " " : "", keys.lines[i].shape);
  free(keys.lines);
  cnnb_graph_destroy(g);
  if (!ok) fprintf(stderr, "checkpoint_keys: out of memory\n");
  return ok ? 0 : 1;
}

/* --all: every model, every dataset it is offered for, keys unique. */
static int check_all(tool *t) {
  const char *names[512];
  size_t count = cnnb_loader_names(t->loader, CNNB_KIND_MODEL, names, 512);
  if (count > 512) count = 512;
  if (count == 0) {
    fprintf(stderr, "checkpoint_keys: no model plugin found\n");
    return 1;
  }
  int failures = 0, built = 0;
  for (size_t m = 0; m < count; m++)
    for (uint32_t d = 0; cnnb_dataset_at(d); d++) {
      const cnnb_dataset_info *dataset = cnnb_dataset_at(d);
      int offered;
      cnnb_graph *g = build(t, names[m], dataset, &offered);
      if (!g) {
        failures += offered;
        continue;
      }
      built++;
      key_list keys = {0};
      if (!collect(g, 1, &keys)) {
        fprintf(stderr, "checkpoint_keys: out of memory\n");
        return 1;
      }
      qsort(keys.lines, keys.count, sizeof *keys.lines, by_key);
      size_t named = 0, dup = 0;
      for (size_t i = 0; i < keys.count; i++) {
        if (!strchr(keys.lines[i].key, '/')) named++;
        if (i > 0 && strcmp(keys.lines[i].key, keys.lines[i - 1].key) == 0) {
          fprintf(stderr, "checkpoint_keys: %s (%s): key '%s' is saved twice\n", names[m],
                  dataset->name, keys.lines[i].key);
          dup++;
        }
      }
      printf("%s %s: %zu keys, %zu under checkpoint names, %s\n", names[m], dataset->name,
             keys.count, named, dup ? "REPEATED" : "unique");
      failures += dup != 0;
      free(keys.lines);
      cnnb_graph_destroy(g);
    }
  if (built == 0) {
    fprintf(stderr, "checkpoint_keys: no model could be built\n");
    return 1;
  }
  return failures ? 1 : 0;
}

static void usage(void) {
  fprintf(stderr, "usage: checkpoint_keys --model=NAME [--data_name=imagenet] "
                  "[--num_classes=N] [--extras]\n       checkpoint_keys --all [--num_classes=N]\n");
}

int main(int argc, char **argv) {
  const char *model = NULL, *data_name = "imagenet";
  int all = 0, extras = 0;
  tool t = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--model=", 8) == 0) model = a + 8;
    else if (strncmp(a, "--data_name=", 12) == 0) data_name = a + 12;
    else if (strncmp(a, "--num_classes=", 14) == 0) {
      char *end;
      long n = strtol(a + 14, &end, 10);
      if (*end || n < 1 || n > 1000000) {
        fprintf(stderr, "checkpoint_keys: %s: want an integer in [1, 1000000]\n", a);
        return 2;
      }
      t.num_classes = (int32_t)n;
    } else if (strcmp(a, "--all") == 0) all = 1;
    else if (strcmp(a, "--extras") == 0) extras = 1;
    else {
      fprintf(stderr, "checkpoint_keys: unknown argument '%s'\n", a);
      usage();
      return 2;
    }
  }
  if (!all == !model) {
    usage();
    return 2;
  }

  t.flags = cnnb_flags_create();
  t.loader = cnnb_loader_create(NULL);
  if (!t.flags || !t.loader || cnnb_flags_declare_core(t.flags) != CNNB_OK) {
    fprintf(stderr, "checkpoint_keys: out of memory\n");
    return 1;
  }
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (dir && *dir) cnnb_loader_set_install_dir(t.loader, dir);
  char err[4096];
  if (cnnb_loader_discover(t.loader, NULL, err, sizeof err) != CNNB_OK) {
    fprintf(stderr, "checkpoint_keys: %s\n", err);
    return 1;
  }
  /* Models read their own flags (--resnet_base_lr) at build: declared, at defaults. */
  cnnb_loader_register_flags(t.loader, t.flags);
  t.ctx = cnnb_ctx_create("checkpoint_keys", t.flags);
  if (!t.ctx) return 1;
  cnnb_ctx_set_log_level(t.ctx, CNNB_LOG_ERROR);

  int rc = all ? check_all(&t) : print_model(&t, model, data_name, extras);
  cnnb_ctx_destroy(t.ctx);
  cnnb_loader_destroy(t.loader);
  cnnb_flags_destroy(t.flags);
  return rc;
}
