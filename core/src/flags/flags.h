/* flags.h — the flag table (never installed): every flag of a command line in one
 * cnnb_flags, the core's (declared by config/core_flags.c, grouped by theme) and each
 * plugin's (declared through its register_flags, grouped under the plugin's name).
 * Parsing happens once, after every plugin declared its flags; plugins read theirs
 * through their ctx (cnnb/ctx.h), the core reads the table once into its run
 * configuration (config/run_config.h). */
#ifndef CNNB_FLAGS_FLAGS_H
#define CNNB_FLAGS_FLAGS_H

#include <stdio.h>
#include <cnnb/cnnb.h>

#include "base/host_ctx.h"

cnnb_flags *cnnb_flags_create(void);
void cnnb_flags_destroy(cnnb_flags *flags);

/* A registry that declares flags under `group` ("Model and data", or a plugin name). */
cnnb_flag_registry *cnnb_flags_registry(cnnb_flags *flags, const char *group);

/* Parses argv[1..argc). `--flag=value`, `--flag value`, `--bool` and `--nobool`.
 * On an unknown flag or a bad value: returns CNNB_EINVAL with a message in err naming
 * the flag (and "did you mean --x?" when a declared name is close). */
cnnb_status cnnb_flags_parse(cnnb_flags *flags, int argc, char **argv, char *err, size_t err_size);
/* The same parse, forgiving: unknown names, stray arguments and bad values are skipped,
 * not refused. For a first pass that reads the flags it knows before the plugins that
 * declare the others are loaded; the strict parse then judges the whole line. */
void cnnb_flags_parse_known(cnnb_flags *flags, int argc, char **argv);
/* The same two parses reading each --flagfile through `files` (flags/flagfile.h), so a
 * command line parsed twice reads each file once: a pipe or FIFO has its flags only
 * once. The two above read through a cache of their own call. */
typedef struct cnnb_flagfiles cnnb_flagfiles;
cnnb_status cnnb_flags_parse_files(cnnb_flags *flags, cnnb_flagfiles *files, int argc, char **argv,
                                   char *err, size_t err_size);
void cnnb_flags_parse_known_files(cnnb_flags *flags, cnnb_flagfiles *files, int argc, char **argv);
/* Sets one flag from its command-line spelling, as parsing would. */
cnnb_status cnnb_flags_set(cnnb_flags *flags, const char *name, const char *value, char *err,
                           size_t err_size);
/* Adds a sentence to a declared flag's help ("Installed here: cpu."), for facts known
 * only after plugins load. CNNB_EINVAL for an unknown flag. */
cnnb_status cnnb_flags_append_help(cnnb_flags *flags, const char *name, const char *text);
/* --help: every group, its flags, type, default and help text. */
void cnnb_flags_print_help(const cnnb_flags *flags, FILE *out);

/* The same getters plugins use through a ctx, for core code. */
int64_t cnnb_flags_int(const cnnb_flags *flags, const char *name);
double cnnb_flags_float(const cnnb_flags *flags, const char *name);
bool cnnb_flags_bool(const cnnb_flags *flags, const char *name);
const char *cnnb_flags_string(const cnnb_flags *flags, const char *name);
bool cnnb_flags_is_set(const cnnb_flags *flags, const char *name);
/* Whether `name` is declared (or an alias of a declared flag). */
bool cnnb_flags_declared(const cnnb_flags *flags, const char *name);

/* Every declared flag in declaration order (the core's themes first, then each plugin's
 * group), for records that show the whole configuration (the benchmark log). */
typedef struct cnnb_flag_view {
  const char *name;
  const char *group;   /* the core's theme ("Model and data") or the plugin's name */
  bool plugin;         /* declared by a plugin */
  cnnb_flag_type type; /* which of i, f, b, s holds the value */
  bool is_set;         /* given on the command line */
  int64_t i;
  double f;
  bool b;
  const char *s;              /* never NULL for a string flag; borrowed from the table */
  const char *default_text;   /* the declared default, command-line spelling */
  const char *help;           /* the help text, with what was appended */
  const char *const *choices; /* NULL-terminated allowed values, or NULL for any */
  bool repeated;              /* a flag that may be given several times */
  bool per_rank;              /* may differ between the ranks of a job */
} cnnb_flag_view;
size_t cnnb_flags_count(const cnnb_flags *flags);
/* Flag number `index` (< cnnb_flags_count) into *view; false past the end. */
bool cnnb_flags_at(const cnnb_flags *flags, size_t index, cnnb_flag_view *view);

/* What the ranks of one job must agree on: one "name\tvalue\n" line per declared flag
 * not marked per-rank (cnnb_flag_mark_per_rank), in declaration order, each value in one
 * spelling whatever the command line's (a float in the fewest digits that read back
 * the same double, a bool true/false). Two ranks agree on their flags when their texts
 * are equal. Malloc'ed and NUL-terminated (*len without the NUL); NULL when out of
 * memory. */
char *cnnb_flags_agreement_text(const cnnb_flags *flags, size_t *len);

/* ---- kinds of declaration beyond cnnb_flag_declare (host side) ------------------ */

/* A registry for one of the core's own themed groups ("General", "Devices"). --help
 * prints theme groups first, in the order first asked for, then every plugin group
 * (from cnnb_flags_registry) under "Plugin <name>". */
cnnb_flag_registry *cnnb_flags_theme_registry(cnnb_flags *flags, const char *theme);
/* A string flag whose value must be one of `allowed` (NULL-terminated list, copied);
 * any other value is refused when parsed, with a message listing the allowed ones. */
cnnb_status cnnb_flags_declare_choice(cnnb_flag_registry *registry, const char *name,
                                      const char *default_value, const char *const *allowed,
                                      const char *help);
/* A string flag that may be given several times: the values are kept in order, joined
 * by `separator` (--plugin=a.so --plugin=b.so reads "a.so:b.so"); the default is "". */
cnnb_status cnnb_flags_declare_repeated(cnnb_flag_registry *registry, const char *name,
                                        char separator, const char *help);
/* A second name for a declared flag (--tf_random_seed for --seed), so tf_cnn_benchmarks
 * command lines keep working; shown in --help beside the flag. */
cnnb_status cnnb_flags_alias(cnnb_flags *flags, const char *alias, const char *name);
/* Where the value of flag `name` in effect came from when a flagfile gave it
 * ("run.flags:3"); NULL when the command line or the default did. */
const char *cnnb_flags_origin(const cnnb_flags *flags, const char *name);
/* A refusal about one flag names the flagfile line that gave its value: when err starts
 * with "--NAME" (then '=', ':' or ' ') and a flagfile gave NAME, err becomes
 * "FILE:LINE: " + err (cut to err_size). Otherwise err is left as it is. */
void cnnb_flags_locate_error(const cnnb_flags *flags, char *err, size_t err_size);
/* Why the last declaration on these flags was refused ("" when none). The refusal is
 * also logged, so a loader that only checks the status still shows it. */
const char *cnnb_flags_error(const cnnb_flags *flags);

#endif
