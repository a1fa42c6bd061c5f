/* flags_internal.h — the flag table behind cnnb_flags, shared by flags.c (declaring,
 * reading), flags_parse.c (the command line) and flags_help.c (--help). Core-private.
 *
 * The table is small (a few hundred flags at most) and read a handful of times per run,
 * so lookups are linear scans in declaration order, which is also --help's order. */
#ifndef CNNB_FLAGS_INTERNAL_H
#define CNNB_FLAGS_INTERNAL_H

#include "flags/flags.h"

typedef struct cnnb_flag_entry {
  char *name;
  cnnb_flag_type type;
  size_t group; /* index into cnnb_flags.groups */
  char *help;
  char *default_text; /* as declared, command-line spelling */
  char **choices;     /* NULL-terminated allowed values, or NULL for any */
  char separator;     /* repeated flags: values joined by it; '\0' = last one wins */
  bool is_set;        /* given on the command line */
  bool per_rank;      /* may differ between the ranks of a job (cnnb_flag_mark_per_rank) */
  char *origin;       /* "FILE:LINE" of a value read from a flagfile; NULL otherwise */
  int64_t i;          /* the value, in the member of its type */
  double f;
  bool b;
  char *s;
} cnnb_flag_entry;

typedef struct cnnb_flag_group {
  char *name;
  bool theme; /* a core theme ("Devices"), printed before plugin groups */
  cnnb_flag_registry *registry;
} cnnb_flag_group;

typedef struct cnnb_flag_alias {
  char *alias;
  size_t target; /* index into cnnb_flags.v */
} cnnb_flag_alias;

struct cnnb_flag_registry {
  cnnb_flags *flags;
  size_t group;
};

struct cnnb_flags {
  cnnb_flag_entry *v;
  size_t n, cap;
  cnnb_flag_group *groups;
  size_t ngroups, gcap;
  cnnb_flag_alias *aliases;
  size_t naliases, acap;
  char error[512]; /* why the last declaration was refused */
};

/* The entry called `name` (or aliased so), or NULL. */
cnnb_flag_entry *cnnb_flags_find(const cnnb_flags *flags, const char *name);
/* Parses `value` for entry `f` and stores it (appends, for repeated flags); on a bad
 * value writes a message naming the flag into err and returns CNNB_EINVAL. */
cnnb_status cnnb_flags_assign(cnnb_flag_entry *f, const char *value, char *err, size_t err_size);
/* The declared name closest to `name` within the "did you mean" distance, or NULL.
 * Bools are also matched in their --noname spelling; *negated says that one won. */
const char *cnnb_flags_suggest(const cnnb_flags *flags, const char *name, bool *negated);
const char *cnnb_flag_type_name(cnnb_flag_type type);
/* `text` for a message: itself when at most CNNB_FLAG_QUOTE bytes, else its start and
 * "..." in buf (at least CNNB_FLAG_QUOTE + 1 bytes), so a huge value cannot push the
 * reason out of a message. */
enum { CNNB_FLAG_QUOTE = 80 };
const char *cnnb_flags_quote(const char *text, char *buf, size_t size);

#endif
