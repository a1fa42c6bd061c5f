/* train_params.c — `cnnbench` that also saves what training ended with, for the strategy
 * equivalence tests: after the timed steps every replica's parameter arena is written to
 * $CNNB_PARAMS_OUT.<rank>.<replica> (raw fp32, host byte order). Flags, output and exit
 * status are cnnbench's. Never installed. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

static cnnb_status save_params(cnnb_run *run, void *user) {
  const char *prefix = user;
  int64_t count = cnnb_executor_param_count(run->replicas[0].executor);
  float *host = malloc((size_t)(count ? count : 1) * sizeof *host);
  if (!host) return cnnb_error(run->ctx, CNNB_ENOMEM, "train_params: out of memory");
  cnnb_status st = CNNB_OK;
  for (int32_t r = 0; st == CNNB_OK && r < run->facts.replicas; r++) {
    if ((st = cnnb_executor_download_params(run->replicas[r].executor, host, NULL)) != CNNB_OK)
      break;
    char path[4096];
    snprintf(path, sizeof path, "%s.%d.%d", prefix, (int)run->facts.world.rank, (int)r);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(host, sizeof *host, (size_t)count, f) != (size_t)count || fclose(f) != 0)
      st = cnnb_error(run->ctx, CNNB_EIO, "train_params: cannot write %s", path);
  }
  free(host);
  return st;
}

int main(int argc, char **argv) {
  const char *prefix = getenv("CNNB_PARAMS_OUT");
  if (!prefix || !*prefix) {
    fprintf(stderr, "train_params: set CNNB_PARAMS_OUT to the files' prefix\n");
    return 2;
  }
  cnnb_run_hooks hooks = {.after_steps = save_params, .user = (void *)prefix};
  return cnnb_cli_main(argc, argv, &hooks);
}
