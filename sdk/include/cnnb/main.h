/* cnnb/main.h — the cnnbench program as one call, for the cnnbench executable and for
 * programs that embed it (a driver that runs benchmarks in-process). Plugins never call
 * it. Not part of cnnb.h.
 *
 * [main-thread] Call it from one thread, once at a time: it parses argv, loads the
 * plugins it needs, runs, prints the report on stdout and logs on stderr, and returns. */
#ifndef CNNB_MAIN_H
#define CNNB_MAIN_H

#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs cnnbench with argv[1..argc) as its flags and returns its exit status: 0 success,
 * 2 bad input (flags, plugin names, rejected --plugin files, data the run cannot use),
 * 1 a failure while running (out of memory, device or I/O error, divergence). */
CNNB_EXPORT int cnnb_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
