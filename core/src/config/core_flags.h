/* core_flags.h — the core's own flags, tf_cnn_benchmarks' names and defaults, declared
 * into a flag table (core_flags.c); run_config.c reads them once. Adding a flag:
 * docs/architecture.md, "Adding a core flag". */
#ifndef CNNB_CONFIG_CORE_FLAGS_H
#define CNNB_CONFIG_CORE_FLAGS_H

#include "flags/flags.h"

/* Declares every core flag, grouped by theme for --help. */
cnnb_status cnnb_flags_declare_core(cnnb_flags *flags);

#endif
