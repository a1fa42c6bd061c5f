/* fuzz_values.c — the parsers of flag values with a grammar of their own, on arbitrary
 * text: --piecewise_learning_rate_schedule (cnnb_lr_config_check, exec/lr_schedule.c),
 * --all_reduce_spec (the replicated strategy's all_reduce_spec.c) and --kmp_affinity
 * (cli/openmp_env.c). The first byte picks the parser, the rest is the value (up to its
 * first NUL, as a command line gives it). Besides the sanitizers' checks: a refusal
 * names its flag; a spec that parses has 1..16 ranges, limits that increase, shards in
 * 1..1024, and picks a range for every bucket size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "all_reduce_spec.h"
#include "cli/openmp_env.h"
#include "exec/lr_schedule.h"
#include "base/host_ctx.h"

static void piecewise(const char *text) {
  cnnb_lr_config cfg = {.piecewise = text, .global_batch_size = 32};
  char err[1024] = "";
  cnnb_status st = cnnb_lr_config_check(&cfg, err, sizeof err);
  if (st != CNNB_OK && (st != CNNB_EINVAL || !strstr(err, "--piecewise_learning_rate_schedule")))
    abort();
}

static void all_reduce(cnnb_ctx *ctx, const char *text) {
  all_reduce_spec spec;
  memset(&spec, 0xa5, sizeof spec); /* no field may be read without being set */
  cnnb_status st = all_reduce_spec_parse(ctx, text, &spec);
  if (st != CNNB_OK) {
    if (st != CNNB_EINVAL || !strstr(cnnb_error_message(ctx), "--all_reduce_spec")) abort();
    return;
  }
  if (spec.num_ranges < 1 || spec.num_ranges > ALL_REDUCE_SPEC_MAX_RANGES) abort();
  for (int32_t i = 0; i < spec.num_ranges; i++) {
    const reduce_range *r = &spec.ranges[i];
    if (r->shards < 1 || r->shards > ALL_REDUCE_SPEC_MAX_SHARDS) abort();
    if (i > 0 && r->limit <= spec.ranges[i - 1].limit) abort();
    if (!memchr(r->text, '\0', sizeof r->text)) abort();
  }
  if (spec.ranges[spec.num_ranges - 1].limit != INT64_MAX) abort();
  static const int64_t counts[] = {0, 1, 1024, 1 << 20, INT64_MAX};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    if (!all_reduce_spec_pick(&spec, counts[i])) abort();
  char described[512];
  all_reduce_spec_describe(&spec, described, sizeof described);
  if (!memchr(described, '\0', sizeof described)) abort();
}

static void kmp_affinity(const char *text) {
  cnnb_openmp_env env;
  char err[1024] = "";
  cnnb_status st = cnnb_openmp_env_from_tf(200, text, 0, 4, 1000.0, &env, err, sizeof err);
  if (st != CNNB_OK && (st != CNNB_EINVAL || !strstr(err, "--kmp_affinity"))) abort();
  if (st == CNNB_OK && env.n > CNNB_OPENMP_MAX_VARS) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static cnnb_ctx *ctx;
  if (!ctx) {
    ctx = cnnb_ctx_create("fuzz_values", NULL);
    if (!ctx) return 0;
  }
  cnnb_clear_error(ctx); /* the first error recorded wins: each input starts clean */
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  switch (data[0] % 3) {
    case 0: piecewise(text); break;
    case 1: all_reduce(ctx, text); break;
    default: kmp_affinity(text); break;
  }
  free(text);
  return 0;
}
