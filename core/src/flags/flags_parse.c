/* flags_parse.c — the command line, absl/TF style: --flag=value, --flag value, --bool,
 * --bool=false, --nobool; one dash works as well as two. Everything that is not a flag is
 * an error naming it (cnnbench takes no positional arguments), and an unknown name gets
 * "did you mean" when a declared one is close. Unknown names of the command line are all
 * named in one message at the end (a tf command line may carry several); any other error
 * stops the parse, as an unknown name in a flagfile does (naming its file and line).
 *
 * --flagfile=FILE reads more flags from FILE where it stands, absl's convention: one
 * --flag=value a line, blank lines and lines starting with '#' or '//' skipped, leading
 * and trailing blanks trimmed; a flagfile may name another (at most FLAGFILE_DEPTH
 * deep, which also stops a file that names itself). Later flags win, so a flag after
 * --flagfile on the command line overrides the file's. An error in a file names it and
 * the line ("run.flags:3: unknown flag --x"), and quotes at most CNNB_FLAG_QUOTE
 * characters of it.
 *
 * Each flagfile is read once (flagfile.h), however many passes parse the command line:
 * a pipe or FIFO gives its flags only once. What absl's convention has no place for is
 * refused, naming the line, rather than read as a strange value that some later check
 * refuses without saying where it came from: a NUL or other control byte, a line too
 * long to be a flag, a comment after a flag, a quoted value, two flags on one line. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags_internal.h"
#include "flags/flagfile.h"
#include "base/names.h"

const char *cnnb_flags_suggest(const cnnb_flags *flags, const char *name, bool *negated) {
  const char *best = NULL;
  int best_d = 0;
  bool best_neg = false;
  char no_name[256];
  for (size_t i = 0; flags && i < flags->n; i++) {
    const cnnb_flag_entry *f = &flags->v[i];
    int d = cnnb_edit_distance(name, f->name);
    if (!best || d < best_d) best = f->name, best_d = d, best_neg = false;
    if (f->type == CNNB_FLAG_BOOL) {
      snprintf(no_name, sizeof no_name, "no%s", f->name);
      d = cnnb_edit_distance(name, no_name);
      if (d < best_d) best = f->name, best_d = d, best_neg = true;
    }
  }
  for (size_t i = 0; flags && i < flags->naliases; i++) {
    int d = cnnb_edit_distance(name, flags->aliases[i].alias);
    if (!best || d < best_d) best = flags->aliases[i].alias, best_d = d, best_neg = false;
  }
  if (!best || !cnnb_names_close_enough(name, best_d)) return NULL;
  if (negated) *negated = best_neg;
  return best;
}

cnnb_status cnnb_flags_set(cnnb_flags *flags, const char *name, const char *value, char *err,
                           size_t err_size) {
  cnnb_flag_entry *f = cnnb_flags_find(flags, name);
  if (!f) {
    bool neg = false;
    const char *near = cnnb_flags_suggest(flags, name ? name : "", &neg);
    if (near)
      snprintf(err, err_size, "unknown flag --%s (did you mean --%s%s?)", name ? name : "",
               neg ? "no" : "", near);
    else
      snprintf(err, err_size, "unknown flag --%s (cnnbench --help lists the flags)",
               name ? name : "");
    return CNNB_EINVAL;
  }
  return cnnb_flags_assign(f, value, err, err_size);
}

/* Splits "--name=value" / "-name" into name (copied to buf) and value (NULL if no '='). */
static void split(const char *arg, char *buf, size_t size, const char **value) {
  const char *p = arg + 1;
  if (*p == '-') p++;
  const char *eq = strchr(p, '=');
  size_t len = eq ? (size_t)(eq - p) : strlen(p);
  if (len >= size) len = size - 1;
  memcpy(buf, p, len);
  buf[len] = '\0';
  *value = eq ? eq + 1 : NULL;
}

static bool is_flag(const char *arg) {
  /* "-" alone is a conventional stand-in for stdin, and "-1" is a number: neither is a
   * flag. "--" ends the flags. */
  return arg[0] == '-' && arg[1] != '\0' && !(arg[1] >= '0' && arg[1] <= '9') &&
         strcmp(arg, "--") != 0;
}

static cnnb_status positional(int argc, char **argv, int first, char *err, size_t err_size) {
  size_t len = (size_t)snprintf(err, err_size, "unexpected argument%s",
                                first + 1 < argc ? "s" : "");
  for (int i = first; i < argc && len < err_size; i++)
    len += (size_t)snprintf(err + len, err_size - len, "%s'%s'", i == first ? " " : ", ", argv[i]);
  if (len < err_size)
    snprintf(err + len, err_size - len, ": cnnbench takes only flags, written --name=value");
  return CNNB_EINVAL;
}

/* Appends one unknown name (and its "did you mean") to the list in err. */
static void note_unknown(const cnnb_flags *flags, const char *name, char *err, size_t err_size,
                         int *count) {
  size_t len = strlen(err);
  if (len >= err_size) return;
  bool neg = false;
  const char *near = cnnb_flags_suggest(flags, name, &neg);
  len += (size_t)snprintf(err + len, err_size - len, "%s--%s", *count ? ", " : "", name);
  if (near && len < err_size)
    snprintf(err + len, err_size - len, " (did you mean --%s%s?)", neg ? "no" : "", near);
  ++*count;
}

/* The unknown names of the command line, named together at the end. */
typedef struct unknown_list {
  char names[4096];
  int count;
} unknown_list;

enum { FLAGFILE_DEPTH = 8 };

/* One parse: the table it fills, the flagfiles it reads, whether it forgives. */
typedef struct parser {
  cnnb_flags *flags;
  cnnb_flagfiles *files;
  bool lenient;
} parser;

static cnnb_status parse_args(const parser *ps, int argc, char **argv, int depth,
                              const char *origin, unknown_list *unknown, char *err,
                              size_t err_size);

/* Prefixes err with "where: " (the flagfile and its line). */
static void prefix_error(char *err, size_t err_size, const char *where) {
  size_t len = strlen(err), add = strlen(where) + 2;
  if (len + add + 1 > err_size) len = err_size > add + 1 ? err_size - add - 1 : 0;
  memmove(err + add, err, len);
  err[add + len] = '\0';
  memcpy(err, where, add - 2);
  memcpy(err + add - 2, ": ", 2);
}

/* Whether `line` holds whitespace followed by `what` (a comment or a second flag). */
static bool blank_then(const char *line, const char *what) {
  for (const char *p = line; *p; p++)
    if ((*p == ' ' || *p == '\t') && strncmp(p + 1, what, strlen(what)) == 0) return true;
  return false;
}

/* What absl's flagfile convention has no place for, in a line that looks like a flag:
 * each would otherwise reach the flag as part of its value ("trivial # comment") and be
 * refused later by whatever checks the value, without the file and line. Writes why
 * into err (without the place) and returns false. */
static bool line_is_one_flag(const char *line, char *err, size_t err_size) {
  char q[CNNB_FLAG_QUOTE + 4];
  const char *eq = strchr(line, '=');
  if (blank_then(line, "#") || blank_then(line, "//")) {
    snprintf(err, err_size,
             "'%s': a comment after a flag; in a flagfile a comment is a line of its own "
             "(starting with '#' or '//')",
             cnnb_flags_quote(line, q, sizeof q));
    return false;
  }
  const char *dashes = line[1] == '-' ? line + 2 : line + 1;
  if (blank_then(dashes, "--")) {
    snprintf(err, err_size, "'%s': two flags on one line; a flagfile holds one --flag=value a line",
             cnnb_flags_quote(line, q, sizeof q));
    return false;
  }
  size_t name_len = eq ? (size_t)(eq - line) : strlen(line);
  if (strcspn(line, " \t") < name_len) {
    snprintf(err, err_size,
             "'%s': in a flagfile a value follows '=' on the flag's line (write --flag=value)",
             cnnb_flags_quote(line, q, sizeof q));
    return false;
  }
  size_t vlen = eq ? strlen(eq + 1) : 0;
  if (vlen >= 2 && (eq[1] == '"' || eq[1] == '\'') && eq[vlen] == eq[1]) {
    snprintf(err, err_size,
             "'%s': quotes in a flagfile stay part of the value (absl's convention); write the "
             "value without them",
             cnnb_flags_quote(line, q, sizeof q));
    return false;
  }
  return true;
}

/* The first byte of line[0, len) that is no part of a text line, or NULL. Tabs are blanks;
 * a '\r' is allowed before the end only (a CRLF file). */
static const char *binary_byte(const char *line, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)line[i];
    if (c == '\t' || (c == '\r' && i + 1 == len)) continue;
    if (c < 0x20 || c == 0x7f) return line + i;
  }
  return NULL;
}

/* Parses one line of a flagfile (number `number`, `len` bytes without its '\n'). */
static cnnb_status parse_line(const parser *ps, const char *path, long number, const char *raw,
                              size_t len, int depth, char *err, size_t err_size) {
  char where[1024], q[CNNB_FLAG_QUOTE + 4];
  snprintf(where, sizeof where, "%s:%ld", path, number);
  if (len > CNNB_FLAGFILE_MAX_LINE) {
    snprintf(err, err_size,
             "a line of %zu bytes, longer than %d (the most a flagfile line may hold): '%.*s...'",
             len, CNNB_FLAGFILE_MAX_LINE, CNNB_FLAG_QUOTE - 3, raw);
    prefix_error(err, err_size, where);
    return CNNB_EINVAL;
  }
  const char *bad = binary_byte(raw, len);
  if (bad) {
    snprintf(err, err_size,
             "byte 0x%02x at column %zu: a flagfile is text, one --flag=value a line (is it "
             "the file you meant?)",
             (unsigned)(unsigned char)*bad, (size_t)(bad - raw) + 1);
    prefix_error(err, err_size, where);
    return CNNB_EINVAL;
  }
  char *line = malloc(len + 1);
  if (!line) {
    snprintf(err, err_size, "%s: out of memory", where);
    return CNNB_ENOMEM;
  }
  memcpy(line, raw, len);
  line[len] = '\0';
  char *p = line, *end = line + len;
  while (*p == ' ' || *p == '\t') p++;
  while (end > p && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t')) *--end = '\0';
  cnnb_status st = CNNB_OK;
  if (!*p || *p == '#' || strncmp(p, "//", 2) == 0) {
    /* blank or a comment */
  } else if (!is_flag(p)) {
    snprintf(err, err_size, "'%s' is not a flag (a flagfile holds one --flag=value a line)",
             cnnb_flags_quote(p, q, sizeof q));
    st = CNNB_EINVAL;
  } else if (!line_is_one_flag(p, err, err_size)) {
    st = CNNB_EINVAL;
  } else {
    char *args[2] = {(char *)path, p};
    st = parse_args(ps, 2, args, depth + 1, where, NULL, err, err_size);
  }
  /* A nested flagfile's error keeps its own place after this one: "a:3: b:1: ...". */
  if (st != CNNB_OK) prefix_error(err, err_size, where);
  free(line);
  return st;
}

/* Parses the flags of one flagfile, each line as one argument of its own. */
static cnnb_status parse_flagfile(const parser *ps, const char *path, int depth, char *err,
                                  size_t err_size) {
  if (!path || !path[0]) {
    snprintf(err, err_size, "flag --flagfile: missing value (write --flagfile=FILE)");
    return CNNB_EINVAL;
  }
  if (depth >= FLAGFILE_DEPTH) {
    snprintf(err, err_size,
             "--flagfile=%s: flagfiles nested more than %d deep (does one name itself?)", path,
             FLAGFILE_DEPTH);
    return CNNB_EINVAL;
  }
  const char *text = NULL;
  size_t len = 0;
  cnnb_status st = cnnb_flagfiles_get(ps->files, path, &text, &len, err, err_size);
  long number = 1;
  for (size_t at = 0; st == CNNB_OK && at < len; number++) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t line_len = nl ? (size_t)(nl - (text + at)) : len - at;
    st = parse_line(ps, path, number, text + at, line_len, depth, err, err_size);
    /* The forgiving pass skips a line it cannot use and reads on. */
    if (ps->lenient && st == CNNB_EINVAL) st = CNNB_OK;
    at += line_len + 1;
  }
  return st;
}

/* The parse behind every entry point. lenient: skip what strict parsing would refuse
 * (unknown names, stray arguments, bad values), so a first pass can read the flags it
 * knows before the rest of the table exists. files: the flagfiles read so far (NULL: a
 * cache of this parse's own). */
static cnnb_status parse(cnnb_flags *flags, cnnb_flagfiles *files, int argc, char **argv,
                         bool lenient, char *err, size_t err_size) {
  if (err && err_size) err[0] = '\0';
  char scratch[256]; /* the lenient pass reports nothing; its messages land here */
  if (!err || !err_size) err = scratch, err_size = sizeof scratch;
  if (!flags) {
    snprintf(err, err_size, "no flag table");
    return CNNB_EINVAL;
  }
  cnnb_flagfiles *own = files ? NULL : cnnb_flagfiles_create();
  if (!files && !own) {
    snprintf(err, err_size, "out of memory reading the command line");
    return CNNB_ENOMEM;
  }
  parser ps = {.flags = flags, .files = files ? files : own, .lenient = lenient};
  unknown_list unknown = {.count = 0};
  cnnb_status st = parse_args(&ps, argc, argv, 0, NULL, &unknown, err, err_size);
  cnnb_flagfiles_destroy(own);
  if (st != CNNB_OK || !unknown.count) return st;
  if (unknown.count == 1 && !strstr(unknown.names, "(did you mean"))
    snprintf(err, err_size, "unknown flag %s (cnnbench --help lists the flags)", unknown.names);
  else if (unknown.count == 1) snprintf(err, err_size, "unknown flag %s", unknown.names);
  else snprintf(err, err_size, "unknown flags %s: cnnbench --help lists the flags", unknown.names);
  return CNNB_EINVAL;
}

/* Assigns value to f and records where it came from (origin: "FILE:LINE", or NULL for
 * the command line), so a later refusal of the value can name the flagfile's line. */
static cnnb_status assign_from(cnnb_flag_entry *f, const char *value, const char *origin, char *err,
                               size_t err_size) {
  cnnb_status st = cnnb_flags_assign(f, value, err, err_size);
  if (st != CNNB_OK) return st;
  free(f->origin);
  f->origin = origin ? strdup(origin) : NULL; /* out of memory: only the place is lost */
  return CNNB_OK;
}

/* `unknown` collects the unknown names; NULL (a flagfile's line): the first is an error.
 * origin: the flagfile line these arguments are ("FILE:LINE"), NULL for the command line. */
static cnnb_status parse_args(const parser *ps, int argc, char **argv, int depth,
                              const char *origin, unknown_list *unknown, char *err,
                              size_t err_size) {
  cnnb_flags *flags = ps->flags;
  bool lenient = ps->lenient;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!arg) continue;
    if (strcmp(arg, "--") == 0) {
      if (i + 1 < argc && !lenient) return positional(argc, argv, i + 1, err, err_size);
      break;
    }
    if (!is_flag(arg)) {
      if (lenient) continue;
      /* Name every stray argument before the next flag, not just the first. */
      int last = i;
      while (last + 1 < argc && argv[last + 1] && !is_flag(argv[last + 1])) last++;
      return positional(last + 1, argv, i, err, err_size);
    }
    char name[256];
    const char *value;
    split(arg, name, sizeof name, &value);
    if (strcmp(name, "flagfile") == 0) {
      if (!value && i + 1 < argc && argv[i + 1] && strncmp(argv[i + 1], "--", 2) != 0)
        value = argv[++i];
      cnnb_status st = parse_flagfile(ps, value, depth, err, err_size);
      if (st != CNNB_OK && !lenient) return st;
      cnnb_flag_entry *record = cnnb_flags_find(flags, "flagfile");
      if (record && value) cnnb_flags_assign(record, value, err, err_size);
      continue;
    }
    cnnb_flag_entry *f = cnnb_flags_find(flags, name);
    if (!f && strncmp(name, "no", 2) == 0) {
      cnnb_flag_entry *pos = cnnb_flags_find(flags, name + 2);
      if (pos && pos->type == CNNB_FLAG_BOOL) {
        if (value) {
          char q[CNNB_FLAG_QUOTE + 4];
          snprintf(err, err_size, "flag --%s takes no value (write --%s=%s instead)", name,
                   name + 2, cnnb_flags_quote(value, q, sizeof q));
          return CNNB_EINVAL;
        }
        cnnb_status st = assign_from(pos, "false", origin, err, err_size);
        if (st != CNNB_OK && !lenient) return st;
        continue;
      }
    }
    if (!f) {
      if (lenient) continue;
      if (!unknown) return cnnb_flags_set(flags, name, value, err, err_size); /* the message */
      if (unknown->count == 0) unknown->names[0] = '\0';
      note_unknown(flags, name, unknown->names, sizeof unknown->names, &unknown->count);
      /* "--name value": the value goes with the unknown name, not on as an argument. */
      if (!value && i + 1 < argc && argv[i + 1] && !is_flag(argv[i + 1])) i++;
      continue;
    }
    if (!value) {
      if (f->type == CNNB_FLAG_BOOL) {
        value = "true";
      } else if (i + 1 < argc && argv[i + 1] && strncmp(argv[i + 1], "--", 2) != 0) {
        value = argv[++i];
      } else {
        if (lenient) continue;
        snprintf(err, err_size, "flag --%s: missing value (write --%s=VALUE)", name, name);
        return CNNB_EINVAL;
      }
    }
    cnnb_status st = assign_from(f, value, origin, err, err_size);
    if (st != CNNB_OK && !lenient) return st;
  }
  return CNNB_OK;
}

cnnb_status cnnb_flags_parse(cnnb_flags *flags, int argc, char **argv, char *err, size_t err_size) {
  return parse(flags, NULL, argc, argv, false, err, err_size);
}

void cnnb_flags_parse_known(cnnb_flags *flags, int argc, char **argv) {
  parse(flags, NULL, argc, argv, true, NULL, 0);
}

cnnb_status cnnb_flags_parse_files(cnnb_flags *flags, cnnb_flagfiles *files, int argc, char **argv,
                                   char *err, size_t err_size) {
  return parse(flags, files, argc, argv, false, err, err_size);
}

void cnnb_flags_parse_known_files(cnnb_flags *flags, cnnb_flagfiles *files, int argc, char **argv) {
  parse(flags, files, argc, argv, true, NULL, 0);
}
