/* fuzz_tune_space.c — cnnbench-tune's --space file parser (core/tune/tune_space.c,
 * tune_space_parse) on arbitrary bytes, against a fixed listing of what cnnbench would
 * list: four strategies, a replicated knob, typed and enumerated flags. Besides the
 * sanitizers' checks: a refused file says where ("fuzz.space:LINE: ..."), a taken one
 * leaves a space the tuner can search (a precision, whole positive batch sizes and
 * process counts dividing the devices, every knob with a value). */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

static void add_flag(tune_listing *l, const char *name, const char *type, const char *owner,
                     const char *def, const char *allowed) {
  tune_flag *grown = realloc(l->flags, (l->num_flags + 1) * sizeof *grown);
  if (!grown) abort();
  l->flags = grown;
  tune_flag *f = &l->flags[l->num_flags++];
  memset(f, 0, sizeof *f);
  f->name = tune_format("%s", name);
  f->type = tune_format("%s", type);
  f->owner = tune_format("%s", owner);
  f->default_text = tune_format("%s", def);
  char *copy = tune_format("%s", allowed), *save = NULL;
  for (char *v = strtok_r(copy, ",", &save); v; v = strtok_r(NULL, ",", &save))
    tune_strings_add(&f->allowed, v);
  free(copy);
}

static void make_listing(tune_listing *l) {
  memset(l, 0, sizeof *l);
  l->version = tune_format("fuzz");
  tune_strings_add(&l->models, "trivial");
  tune_strings_add(&l->devices, "cpu");
  const char *strategies[][2] = {{"independent", "independent"},
                                 {"replicated", "replicated"},
                                 {"distributed_replicated", "replicated"},
                                 {"parameter_server", "parameter_server"},
                                 {"horovod", "horovod"}};
  for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
    tune_strings_add(&l->strategies, strategies[i][0]);
    tune_strings_add(&l->strategy_plugins, strategies[i][1]);
  }
  add_flag(l, "precision", "string", "core", "fp32", "fp32,fp16,bf16");
  add_flag(l, "variable_update", "string", "core", "independent", "");
  add_flag(l, "batch_size", "int", "core", "0", "");
  add_flag(l, "num_intra_threads", "int", "core", "0", "");
  add_flag(l, "data_name", "string", "core", "", "");
  add_flag(l, "image_size", "int", "core", "0", "");
  add_flag(l, "learning_rate", "float", "core", "0", "");
  add_flag(l, "gradient_bucket_mb", "float", "replicated", "4", "");
  add_flag(l, "overlap", "bool", "replicated", "false", "");
  add_flag(l, "horovod_hierarchical_allreduce", "bool", "horovod", "false", "");
  add_flag(l, "local_parameter_device", "string", "parameter_server", "cpu", "cpu,gpu");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static tune_listing l;
  static bool ready;
  if (!ready) {
    make_listing(&l);
    ready = true;
  }
  tune_options o = {.num_devices = 4, .min_batch_size = 16, .max_batch_size = 128};
  /* The space tune_space_build starts from, before the file. */
  tune_space s = {0};
  tune_strings_add(&s.strategies, "replicated");
  tune_strings_add(&s.strategies, "parameter_server");
  s.have_independent = true;
  tune_strings_add(&s.precisions, "fp32");
  s.batch_start = 16;
  s.processes = tune_alloc(3 * sizeof *s.processes);
  s.processes[0] = 1, s.processes[1] = 2, s.processes[2] = 4;
  s.num_processes = 3;
  char err[4096] = "";
  bool knob_lines = false;
  bool ok = tune_space_parse(&l, &o, &s, "fuzz.space", (const char *)data, size, &knob_lines, err,
                             sizeof err);
  if (!ok) {
    long line = 0;
    char rest = 0;
    if (strncmp(err, "fuzz.space:", 11) != 0 || sscanf(err + 11, "%ld:%c", &line, &rest) != 2 ||
        line < 1)
      abort();
  } else {
    if (strlen(err) != 0) abort();
    for (size_t i = 0; i < s.num_batches; i++)
      if (s.batches[i] < 1) abort();
    for (size_t i = 0; i < s.num_processes; i++)
      if (s.processes[i] < 1 || o.num_devices % s.processes[i] != 0) abort();
    for (size_t i = 0; i < s.num_threads; i++)
      if (s.threads[i] < 0) abort();
    for (size_t i = 0; i < s.num_knobs; i++)
      if (!s.knobs[i].flag || !s.knobs[i].values.n) abort();
    for (size_t i = 0; i < s.strategies.n; i++)
      if (!tune_strings_has(&l.strategies, s.strategies.v[i])) abort();
  }
  tune_space_free(&s);
  return 0;
}
