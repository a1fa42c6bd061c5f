/* tf_flags.h — every flag of tf_cnn_benchmarks and what it does here, so a tf command
 * line runs unchanged or says why not. The facts are one TSV, core/src/config/tf_flags.tsv
 * (the build makes the C table below from it; docs/flags.md's table is made from it too).
 *
 * A row is honoured (a flag of the core or of a plugin, with tf's meaning), no-effect
 * (declared here so it parses; given, it costs one warning line saying why it changes
 * nothing) or refused (declared here; given, the run stops with what to do instead: tf's
 * distributed mode gets the mpirun command line that runs the same job). */
#ifndef CNNB_CONFIG_TF_FLAGS_H
#define CNNB_CONFIG_TF_FLAGS_H

#include <stddef.h>

#include "flags/flags.h"

typedef enum cnnb_tf_status {
  CNNB_TF_HONOURED = 1,
  CNNB_TF_NO_EFFECT = 2,
  CNNB_TF_REFUSED = 3
} cnnb_tf_status;

typedef struct cnnb_tf_flag {
  const char *name;
  const char *tf_type;    /* tf's DEFINE_*: boolean, integer, float, string, enum, list */
  const char *tf_default; /* as tf spells it; "None" for not given */
  cnnb_tf_status status;
  const char *note; /* honoured: where it departs; else why, or what to do instead */
} cnnb_tf_flag;

extern const cnnb_tf_flag cnnb_tf_flags[];
extern const size_t cnnb_tf_flags_count;

/* The theme the no-effect and refused rows are declared under (--help shows it). */
#define CNNB_TF_FLAGS_THEME "tf_cnn_benchmarks flags without their effect here"

/* The row called `name`, or NULL. */
const cnnb_tf_flag *cnnb_tf_flag_find(const char *name);
/* Declares the no-effect and refused rows (with the core's flags, config/core_flags.c). */
cnnb_status cnnb_tf_flags_declare(cnnb_flags *flags);
/* After plugins declared theirs: an honoured row that nothing declared belongs to a
 * plugin not installed here; it is declared as no-effect, so the line still parses. */
cnnb_status cnnb_tf_flags_declare_unserved(cnnb_flags *flags);
/* Before a run: one warning line per no-effect flag given; CNNB_EINVAL with every refused
 * flag given (and what to do instead) in err. argv: the command line, for the mpirun
 * line that replaces tf's distributed mode. */
cnnb_status cnnb_tf_flags_check(const cnnb_flags *flags, int argc, char *const *argv, char *err,
                                size_t err_size);

#endif
