/* cli.h — the cnnbench command line (cli.c); cnnb_main (cnnb/main.h) is it without hooks.
 * Host-internal: tools that run cnnbench with a hook (tests/tools/train_params.c) call
 * it. */
#ifndef CNNB_CLI_CLI_H
#define CNNB_CLI_CLI_H

#include "run/benchmark.h"

/* The cnnbench command line, with `hooks` (NULL: none) handed to the run. */
int cnnb_cli_main(int argc, char **argv, const cnnb_run_hooks *hooks);

#endif
