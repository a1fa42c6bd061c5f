/* tune_space.c — what to search: the installed plugins as cnnbench lists them in JSON
 * (never a hard-coded name), the --space file that narrows or widens the default space,
 * and the candidates' command lines.
 *
 * The default space, per model: every strategy plugin's first name (independent apart,
 * as the ceiling), each with its own boolean flags that default to false tried both ways (a
 * flag defaulting to true, such as --cross_replica_sync, is left alone: turning it off
 * changes what is trained, not how fast); the layouts of --num_devices over processes;
 * batch sizes doubled from --min_batch_size (16) until the device refuses one for memory (or
 * --max_batch_size); each precision --precision accepts, kept when the device takes it;
 * --num_intra_threads 0 (the device's choice) and, under several processes, the cores
 * split between them. The space file's format is in docs/tuning.md. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tune.h"
#include "base/names.h"

/* ---- small helpers ------------------------------------------------------------- */

void *tune_alloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "cnnbench-tune: error: out of memory\n");
    exit(TUNE_EXIT_RUNTIME);
  }
  return p;
}

char *tune_format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = NULL;
  int n = vasprintf(&out, fmt, ap);
  va_end(ap);
  if (n < 0 || !out) {
    fprintf(stderr, "cnnbench-tune: error: out of memory\n");
    exit(TUNE_EXIT_RUNTIME);
  }
  return out;
}

void tune_strings_add(tune_strings *s, const char *text) {
  if (s->n + 1 >= s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 8;
    char **v = realloc(s->v, cap * sizeof *v);
    if (!v) {
      fprintf(stderr, "cnnbench-tune: error: out of memory\n");
      exit(TUNE_EXIT_RUNTIME);
    }
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = tune_format("%s", text ? text : "");
  s->v[s->n] = NULL;
}

bool tune_strings_has(const tune_strings *s, const char *text) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i], text) == 0) return true;
  return false;
}

void tune_strings_free(tune_strings *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* ---- the listing --------------------------------------------------------------- */

static char *shell_quote(const char *s) {
  size_t n = 3;
  for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
  char *out = tune_alloc(n), *q = out;
  *q++ = '\'';
  for (const char *p = s; *p; p++) {
    if (*p == '\'') {
      memcpy(q, "'\\''", 4);
      q += 4;
    } else {
      *q++ = *p;
    }
  }
  *q++ = '\'';
  *q = '\0';
  return out;
}

static void add_flags(tune_listing *l, json_t *array, const char *owner) {
  size_t i;
  json_t *f;
  json_array_foreach(array, i, f) {
    tune_flag *grown = realloc(l->flags, (l->num_flags + 1) * sizeof *grown);
    if (!grown) exit(TUNE_EXIT_RUNTIME);
    l->flags = grown;
    tune_flag *t = &l->flags[l->num_flags++];
    memset(t, 0, sizeof *t);
    const char *name = json_string_value(json_object_get(f, "name"));
    const char *type = json_string_value(json_object_get(f, "type"));
    json_t *def = json_object_get(f, "default");
    t->name = tune_format("%s", name ? name : "");
    t->type = tune_format("%s", type ? type : "string");
    t->owner = tune_format("%s", owner);
    if (json_is_string(def)) t->default_text = tune_format("%s", json_string_value(def));
    else if (json_is_boolean(def))
      t->default_text = tune_format("%s", json_is_true(def) ? "true" : "false");
    else if (json_is_integer(def))
      t->default_text = tune_format("%lld", (long long)json_integer_value(def));
    else if (json_is_real(def)) t->default_text = tune_format("%g", json_real_value(def));
    else t->default_text = tune_format("%s", "");
    size_t j;
    json_t *a;
    json_array_foreach(json_object_get(f, "allowed"), j, a)
        tune_strings_add(&t->allowed, json_string_value(a));
  }
}

bool tune_listing_load(const char *cnnbench, tune_listing *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  char *quoted = shell_quote(cnnbench);
  char *command = tune_format("%s --list_plugins --list_format=json", quoted);
  free(quoted);
  FILE *pipe = popen(command, "r");
  free(command);
  if (!pipe) {
    snprintf(err, err_size, "cannot run %s: %s", cnnbench, strerror(errno));
    return false;
  }
  json_error_t jerr;
  json_t *root = json_loadf(pipe, JSON_DISABLE_EOF_CHECK, &jerr);
  int status = pclose(pipe);
  if (!root || !json_is_object(root)) {
    snprintf(err, err_size,
             "%s --list_plugins --list_format=json gave no plugin list (exit status %d%s%s): "
             "is it a cnnbench of this version?",
             cnnbench, WIFEXITED(status) ? WEXITSTATUS(status) : -1, root ? "" : "; ",
             root ? "" : jerr.text);
    json_decref(root);
    return false;
  }
  const char *version = json_string_value(json_object_get(root, "cnnbench_version"));
  out->version = tune_format("%s", version ? version : "?");
  add_flags(out, json_object_get(root, "core_flags"), "core");
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(root, "plugins"), i, p) {
    const char *kind = json_string_value(json_object_get(p, "kind"));
    const char *plugin = json_string_value(json_object_get(p, "name"));
    if (!kind || !plugin) continue;
    add_flags(out, json_object_get(p, "flags"), plugin);
    bool available = !json_is_false(json_object_get(p, "available"));
    size_t j;
    json_t *n;
    json_array_foreach(json_object_get(p, "names"), j, n) {
      const char *name = json_string_value(n);
      if (!name) continue;
      if (strcmp(kind, "model") == 0) tune_strings_add(&out->models, name);
      if (strcmp(kind, "device") == 0 && available) tune_strings_add(&out->devices, name);
      if (strcmp(kind, "device") == 0 && !available) {
        const char *why = json_string_value(json_object_get(p, "unavailable_reason"));
        char *line = tune_format("%s: %s", name, why ? why : "cannot run here");
        tune_strings_add(&out->unavailable, line);
        free(line);
      }
      if (strcmp(kind, "strategy") == 0) {
        tune_strings_add(&out->strategies, name);
        tune_strings_add(&out->strategy_plugins, plugin);
      }
    }
  }
  json_decref(root);
  return true;
}

const tune_flag *tune_listing_flag(const tune_listing *l, const char *name) {
  for (size_t i = 0; i < l->num_flags; i++)
    if (strcmp(l->flags[i].name, name) == 0) return &l->flags[i];
  return NULL;
}

void tune_listing_free(tune_listing *l) {
  free(l->version);
  tune_strings_free(&l->models);
  tune_strings_free(&l->devices);
  tune_strings_free(&l->strategies);
  tune_strings_free(&l->strategy_plugins);
  tune_strings_free(&l->unavailable);
  for (size_t i = 0; i < l->num_flags; i++) {
    free(l->flags[i].name);
    free(l->flags[i].type);
    free(l->flags[i].owner);
    free(l->flags[i].default_text);
    tune_strings_free(&l->flags[i].allowed);
  }
  free(l->flags);
  memset(l, 0, sizeof *l);
}

/* ---- the space ----------------------------------------------------------------- */

static const char independent[] = "independent";

/* Flags the tuner sets itself: a space file naming one is refused. */
static const char *const owned_flags[] = {
    "model",         "device",     "num_gpus",          "num_batches", "num_warmup_batches",
    "display_every", "num_epochs", "benchmark_log_dir", "flagfile",    NULL};

static void add_axis(tune_space *s, const char *flag, const char *strategy) {
  tune_axis *grown = realloc(s->knobs, (s->num_knobs + 1) * sizeof *grown);
  if (!grown) exit(TUNE_EXIT_RUNTIME);
  s->knobs = grown;
  tune_axis *a = &s->knobs[s->num_knobs++];
  memset(a, 0, sizeof *a);
  a->flag = tune_format("%s", flag);
  a->strategy = strategy ? tune_format("%s", strategy) : NULL;
}

static void default_knobs(const tune_listing *l, tune_space *s) {
  for (size_t i = 0; i < l->strategies.n; i++) {
    const char *strategy = l->strategies.v[i], *plugin = l->strategy_plugins.v[i];
    if (strcmp(strategy, independent) == 0 || !tune_strings_has(&s->strategies, strategy)) continue;
    for (size_t f = 0; f < l->num_flags; f++) {
      const tune_flag *flag = &l->flags[f];
      if (strcmp(flag->owner, plugin) != 0 || strcmp(flag->type, "bool") != 0 ||
          strcmp(flag->default_text, "false") != 0)
        continue;
      add_axis(s, flag->name, strategy);
      tune_strings_add(&s->knobs[s->num_knobs - 1].values, "");
      tune_strings_add(&s->knobs[s->num_knobs - 1].values, "true");
    }
  }
}

static int *int_list(const tune_strings *values, int min, const char *flag, char *err,
                     size_t err_size, size_t *count) {
  int *out = tune_alloc(values->n * sizeof *out);
  for (size_t i = 0; i < values->n; i++) {
    char *end;
    errno = 0;
    long v = strtol(values->v[i], &end, 10);
    if (!values->v[i][0] || *end || errno || v < min || v > 1 << 20) {
      snprintf(err, err_size, "%s: '%s' is not a whole number of at least %d", flag, values->v[i],
               min);
      free(out);
      return NULL;
    }
    out[i] = (int)v;
  }
  *count = values->n;
  return out;
}

static char *trim(char *p) {
  while (isspace((unsigned char)*p)) p++;
  char *end = p + strlen(p);
  while (end > p && isspace((unsigned char)end[-1])) *--end = '\0';
  return p;
}

/* A value a flag would refuse: not one of its allowed values, or not of its type. */
static bool check_value(const tune_flag *f, const char *value, char *why, size_t size) {
  if (!value[0]) return true; /* unset: the default */
  if (f->allowed.n && !tune_strings_has(&f->allowed, value)) {
    size_t len = (size_t)snprintf(why, size, "--%s=%s is not allowed (one of", f->name, value);
    for (size_t i = 0; i < f->allowed.n && len < size; i++)
      len += (size_t)snprintf(why + len, size - len, " %s", f->allowed.v[i]);
    if (len < size) snprintf(why + len, size - len, ")");
    return false;
  }
  char *end;
  if (strcmp(f->type, "int") == 0) {
    (void)strtoll(value, &end, 0);
    if (*end) return snprintf(why, size, "--%s=%s: not an integer", f->name, value), false;
  } else if (strcmp(f->type, "float") == 0) {
    (void)strtod(value, &end);
    if (*end) return snprintf(why, size, "--%s=%s: not a number", f->name, value), false;
  } else if (strcmp(f->type, "bool") == 0) {
    if (strcmp(value, "true") && strcmp(value, "false"))
      return snprintf(why, size, "--%s=%s: not true or false", f->name, value), false;
  }
  return true;
}

static void unknown_flag(const tune_listing *l, const char *name, char *why, size_t size) {
  const char **names = tune_alloc((l->num_flags + 1) * sizeof *names);
  size_t n = 0;
  for (size_t i = 0; i < l->num_flags; i++) names[n++] = l->flags[i].name;
  names[n++] = "processes";
  const char *near = cnnb_closest_name(name, names, n);
  if (near) snprintf(why, size, "unknown flag --%s (did you mean --%s?)", name, near);
  else snprintf(why, size, "unknown flag --%s (cnnbench --help lists the flags)", name);
  free(names);
}

/* One line of the space file into s; false with why. `key` gets what the line sets
 * ("flag" or "flag@strategy"), for the check that no two lines set the same. */
static bool space_line(const tune_listing *l, const tune_options *o, tune_space *s, char *line,
                       bool *knob_lines, char *key, size_t key_size, char *why, size_t size) {
  bool fixed = false;
  char *eq = strstr(line, ":=");
  if (eq) {
    fixed = true;
    *eq = '\0';
    eq += 2;
  } else if ((eq = strchr(line, '='))) {
    *eq++ = '\0';
  } else {
    snprintf(why, size, "'%s' is not 'flag = values' or 'flag := value'", line);
    return false;
  }
  char *name = trim(line), *rest = trim(eq), *strategy = strchr(name, '@');
  if (strategy) {
    *strategy++ = '\0';
    name = trim(name);
    strategy = trim(strategy);
    if (!tune_strings_has(&l->strategies, strategy)) {
      const char *near = cnnb_closest_name(strategy, (const char *const *)l->strategies.v,
                                           l->strategies.n);
      snprintf(why, size, "no strategy '%s' is installed%s%s%s", strategy,
               near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
      return false;
    }
  }
  if (name[0] == '-') name += name[1] == '-' ? 2 : 1;
  snprintf(key, key_size, "%s%s%s", name, strategy ? "@" : "", strategy ? strategy : "");
  for (const char *const *owned = owned_flags; *owned; owned++)
    if (strcmp(name, *owned) == 0) {
      snprintf(why, size,
               "--%s is set by cnnbench-tune itself (--models, --device, "
               "--num_devices, the run's length and log)",
               name);
      return false;
    }
  const tune_flag *flag = tune_listing_flag(l, name);
  if (!flag && strcmp(name, "processes") != 0) {
    unknown_flag(l, name, why, size);
    return false;
  }
  tune_strings values = {0};
  if (fixed) {
    tune_strings_add(&values, rest);
  } else {
    for (char *tok = rest, *next; tok; tok = next) {
      next = strchr(tok, ',');
      if (next) *next++ = '\0';
      tune_strings_add(&values, trim(tok));
    }
  }
  bool ok = true;
  for (size_t i = 0; ok && flag && i < values.n; i++)
    ok = check_value(flag, values.v[i], why, size);
  bool special = !strategy && !fixed &&
                 (strcmp(name, "variable_update") == 0 || strcmp(name, "precision") == 0 ||
                  strcmp(name, "batch_size") == 0 || strcmp(name, "processes") == 0 ||
                  strcmp(name, "num_intra_threads") == 0);
  if (!ok) {
  } else if (fixed) {
    char *f = tune_format("--%s=%s", name, values.v[0]);
    tune_strings_add(&s->fixed, f);
    free(f);
  } else if (special && strcmp(name, "variable_update") == 0) {
    tune_strings_free(&s->strategies);
    for (size_t i = 0; ok && i < values.n; i++) {
      if (!tune_strings_has(&l->strategies, values.v[i])) {
        snprintf(why, size, "variable_update: no strategy '%s' is installed", values.v[i]);
        ok = false;
      } else if (strcmp(values.v[i], independent) != 0) {
        tune_strings_add(&s->strategies, values.v[i]);
      }
    }
  } else if (special && strcmp(name, "precision") == 0) {
    tune_strings_free(&s->precisions);
    for (size_t i = 0; i < values.n; i++)
      if (values.v[i][0]) tune_strings_add(&s->precisions, values.v[i]);
  } else if (special && strcmp(name, "batch_size") == 0) {
    free(s->batches);
    ok = (s->batches = int_list(&values, 1, "batch_size", why, size, &s->num_batches)) != NULL;
  } else if (special && strcmp(name, "num_intra_threads") == 0) {
    free(s->threads);
    ok = (s->threads = int_list(&values, 0, "num_intra_threads", why, size, &s->num_threads)) !=
         NULL;
  } else if (special) { /* processes */
    free(s->processes);
    s->processes = int_list(&values, 1, "processes", why, size, &s->num_processes);
    ok = s->processes != NULL;
    for (size_t i = 0; ok && i < s->num_processes; i++)
      if (o->num_devices % s->processes[i] != 0) {
        snprintf(why, size, "processes: %d does not divide --num_devices=%d", s->processes[i],
                 o->num_devices);
        ok = false;
      }
  } else {
    *knob_lines = true;
    add_axis(s, name, strategy);
    for (size_t i = 0; i < values.n; i++)
      tune_strings_add(&s->knobs[s->num_knobs - 1].values, values.v[i]);
  }
  tune_strings_free(&values);
  return ok;
}

/* The lines so far, by what each sets: a second line setting the same is refused (as
 * absl refuses a flag defined twice) rather than silently replacing the first. */
typedef struct seen_keys {
  tune_strings keys;
  long *lines;
} seen_keys;

static long seen_line(seen_keys *seen, const char *key, long number) {
  for (size_t i = 0; i < seen->keys.n; i++)
    if (strcmp(seen->keys.v[i], key) == 0) return seen->lines[i];
  long *grown = realloc(seen->lines, (seen->keys.n + 1) * sizeof *grown);
  if (!grown) exit(TUNE_EXIT_RUNTIME);
  seen->lines = grown;
  seen->lines[seen->keys.n] = number;
  tune_strings_add(&seen->keys, key);
  return 0;
}

bool tune_space_parse(const tune_listing *l, const tune_options *o, tune_space *s, const char *name,
                      const char *text, size_t text_size, bool *knob_lines, char *err,
                      size_t err_size) {
  seen_keys seen = {0};
  bool ok = true;
  const char *p = text, *end = text + text_size;
  for (long number = 1; ok && p < end; number++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    const char *next = nl ? nl + 1 : end;
    if (memchr(p, '\0', len)) {
      snprintf(err, err_size, "%s:%ld: a NUL byte: not a text file", name, number);
      ok = false;
      break;
    }
    char *line = tune_alloc(len + 1);
    memcpy(line, p, len);
    line[len] = '\0';
    p = next;
    /* '#' starts a comment at the line's start or after a blank: xring#2 is a value. */
    for (char *hash = line; (hash = strchr(hash, '#')); hash++)
      if (hash == line || hash[-1] == ' ' || hash[-1] == '\t') {
        *hash = '\0';
        break;
      }
    char *body = trim(line);
    char why[768], key[256];
    long first;
    if (!*body) {
    } else if (!space_line(l, o, s, body, knob_lines, key, sizeof key, why, sizeof why)) {
      snprintf(err, err_size, "%s:%ld: %s", name, number, why);
      ok = false;
    } else if ((first = seen_line(&seen, key, number)) != 0) {
      snprintf(err, err_size,
               "%s:%ld: %s is set twice: here and at %s:%ld (one line per flag; put its "
               "values on one line, comma-separated)",
               name, number, key, name, first);
      ok = false;
    }
    free(line);
  }
  tune_strings_free(&seen.keys);
  free(seen.lines);
  return ok;
}

/* The whole file, read before any of it is parsed (a file that shrinks or grows while it
 * is read is still one text). */
static bool read_space_file(const tune_listing *l, const tune_options *o, tune_space *s,
                            bool *knob_lines, char *err, size_t err_size) {
  FILE *in = fopen(o->space_file, "r");
  if (!in) {
    snprintf(err, err_size, "--space=%s: cannot open: %s", o->space_file, strerror(errno));
    return false;
  }
  size_t size = 0, cap = 4096;
  char *text = tune_alloc(cap);
  for (size_t got; (got = fread(text + size, 1, cap - size, in)) > 0;) {
    size += got;
    if (size == cap) {
      if (cap >= (size_t)64 << 20) break; /* refused below */
      char *grown = realloc(text, cap *= 2);
      if (!grown) exit(TUNE_EXIT_RUNTIME);
      text = grown;
    }
  }
  bool failed = ferror(in), huge = size == cap;
  int e = errno;
  fclose(in);
  bool ok = false;
  if (failed) snprintf(err, err_size, "--space=%s: cannot read: %s", o->space_file, strerror(e));
  else if (huge)
    snprintf(err, err_size, "--space=%s: larger than %zu MiB: not a space file", o->space_file,
             cap >> 20);
  else ok = tune_space_parse(l, o, s, o->space_file, text, size, knob_lines, err, err_size);
  free(text);
  return ok;
}

bool tune_space_build(const tune_listing *l, const tune_options *o, tune_space *s, char *err,
                      size_t err_size) {
  memset(s, 0, sizeof *s);
  /* A plugin's first name is its strategy; the others are other spellings of it
   * (replicated's distributed_replicated), searched only when the space file names them. */
  for (size_t i = 0; i < l->strategies.n; i++) {
    bool first = i == 0 || strcmp(l->strategy_plugins.v[i], l->strategy_plugins.v[i - 1]) != 0;
    if (strcmp(l->strategies.v[i], independent) == 0) s->have_independent = true;
    else if (first) tune_strings_add(&s->strategies, l->strategies.v[i]);
  }
  const tune_flag *precision = tune_listing_flag(l, "precision");
  for (size_t i = 0; precision && i < precision->allowed.n; i++)
    tune_strings_add(&s->precisions, precision->allowed.v[i]);
  if (!s->precisions.n) tune_strings_add(&s->precisions, "fp32");
  s->batch_start = o->min_batch_size;

  /* Layouts: processes p dividing the devices, each with devices/p replicas. */
  int only = 0;
  if (strcmp(o->processes, "auto") != 0) only = atoi(o->processes);
  s->processes = tune_alloc((size_t)o->num_devices * sizeof *s->processes);
  for (int p = 1; p <= o->num_devices; p++)
    if (o->num_devices % p == 0 && (!only || p == only)) s->processes[s->num_processes++] = p;

  bool knob_lines = false;
  if (o->space_file && !read_space_file(l, o, s, &knob_lines, err, err_size)) return false;
  if (!knob_lines) default_knobs(l, s);
  if (!s->strategies.n) {
    snprintf(err, err_size, "no strategy to search besides independent (installed:%s%s)",
             l->strategies.n ? " " : " none", l->strategies.n ? l->strategies.v[0] : "");
    return false;
  }
  if (!s->precisions.n) {
    snprintf(err, err_size, "no precision left to search");
    return false;
  }

  /* Without mpirun (or srun in an allocation), only layouts of one process. */
  if (o->srun) {
    char *note = tune_format("inside Slurm job %s: each configuration runs as a job step on "
                             "its nodes (srun --ntasks=P, with --mpi=pmix over several "
                             "processes)",
                             o->slurm_job);
    tune_strings_add(&s->notes, note);
    free(note);
  }
  size_t kept = 0;
  for (size_t i = 0; i < s->num_processes; i++) {
    if (s->processes[i] > 1 && !o->mpirun && !o->srun) {
      char *note = tune_format("%d processes x %d replicas: left out, mpirun is not on PATH",
                               s->processes[i], o->num_devices / s->processes[i]);
      tune_strings_add(&s->notes, note);
      free(note);
      continue;
    }
    s->processes[kept++] = s->processes[i];
  }
  s->num_processes = kept;
  if (!kept) {
    snprintf(err, err_size,
             "no layout left to search: --processes=%s needs mpirun, which is not on PATH",
             o->processes);
    return false;
  }
  return true;
}

void tune_space_free(tune_space *s) {
  tune_strings_free(&s->strategies);
  tune_strings_free(&s->precisions);
  free(s->batches);
  free(s->processes);
  free(s->threads);
  for (size_t i = 0; i < s->num_knobs; i++) {
    free(s->knobs[i].flag);
    free(s->knobs[i].strategy);
    tune_strings_free(&s->knobs[i].values);
  }
  free(s->knobs);
  tune_strings_free(&s->fixed);
  tune_strings_free(&s->notes);
  memset(s, 0, sizeof *s);
}

/* ---- candidates ---------------------------------------------------------------- */

char *tune_argv_join(char *const *argv) {
  size_t len = 1;
  for (size_t i = 0; argv[i]; i++) len += strlen(argv[i]) + 1;
  char *out = tune_alloc(len), *q = out;
  for (size_t i = 0; argv[i]; i++) q += sprintf(q, "%s%s", i ? " " : "", argv[i]);
  return out;
}

static void add_flag(tune_strings *s, const char *name, const char *value) {
  char *f = tune_format("--%s=%s", name, value);
  tune_strings_add(s, f);
  free(f);
}

tune_candidate *tune_candidate_new(const char *model, const tune_options *o, const tune_space *s,
                                   const char *strategy, int processes, int threads, int batch,
                                   const char *precision, const tune_strings *knobs) {
  tune_candidate *c = tune_alloc(sizeof *c);
  c->strategy = tune_format("%s", strategy);
  c->precision = tune_format("%s", precision);
  c->batch = batch;
  c->processes = processes;
  c->replicas = o->num_devices / processes;
  c->threads = threads;
  c->ceiling = strcmp(strategy, independent) == 0;
  for (size_t i = 0; knobs && i < knobs->n; i++) tune_strings_add(&c->knobs, knobs->v[i]);
  char number[32];
  add_flag(&c->flags, "model", model);
  add_flag(&c->flags, "device", o->device);
  snprintf(number, sizeof number, "%d", c->replicas);
  add_flag(&c->flags, "num_gpus", number);
  add_flag(&c->flags, "variable_update", strategy);
  for (size_t i = 0; i < c->knobs.n; i++) tune_strings_add(&c->flags, c->knobs.v[i]);
  snprintf(number, sizeof number, "%d", batch);
  add_flag(&c->flags, "batch_size", number);
  add_flag(&c->flags, "precision", precision);
  snprintf(number, sizeof number, "%d", threads);
  add_flag(&c->flags, "num_intra_threads", number);
  for (size_t i = 0; i < s->fixed.n; i++) tune_strings_add(&c->flags, s->fixed.v[i]);
  char *joined = tune_argv_join(c->flags.v);
  c->key = processes > 1 ? tune_format("mpirun -np %d %s", processes, joined)
                         : tune_format("%s", joined);
  free(joined);
  /* The label: strategy, replicas x processes, batch per device, precision, threads, and
   * each knob without its dashes. */
  size_t len = 0, cap = 256;
  char *label = tune_alloc(cap);
  len += (size_t)snprintf(label, cap, "%s %dx%d b%d %s t%d", strategy, c->replicas, processes,
                          batch, precision, threads);
  for (size_t i = 0; i < c->knobs.n; i++) {
    const char *k = c->knobs.v[i] + 2;
    if (len + strlen(k) + 2 >= cap) {
      cap = 2 * (len + strlen(k) + 2);
      char *grown = realloc(label, cap);
      if (!grown) exit(TUNE_EXIT_RUNTIME);
      label = grown;
    }
    len += (size_t)snprintf(label + len, cap - len, " %s", k);
  }
  c->label = label;
  return c;
}

void tune_candidate_free(tune_candidate *c) {
  if (!c) return;
  free(c->strategy);
  free(c->precision);
  free(c->key);
  free(c->label);
  tune_strings_free(&c->knobs);
  tune_strings_free(&c->flags);
  free(c);
}

char **tune_candidate_argv(const tune_candidate *c, const char *model, const tune_options *o,
                           int steps, int warmup, const char *log_dir) {
  (void)model;
  tune_strings a = {0};
  char np[16];
  snprintf(np, sizeof np, "%d", c->processes);
  if (o->srun) {
    /* A job step on the allocation's nodes; one failed task ends the step, as one failed
     * rank ends mpirun. */
    tune_strings_add(&a, o->srun);
    tune_strings_add(&a, "--ntasks");
    tune_strings_add(&a, np);
    tune_strings_add(&a, "--kill-on-bad-exit=1");
    if (c->processes > 1) tune_strings_add(&a, "--mpi=pmix");
  } else if (c->processes > 1) {
    tune_strings_add(&a, o->mpirun);
    tune_strings_add(&a, "-np");
    tune_strings_add(&a, np);
  }
  tune_strings_add(&a, o->cnnbench);
  for (size_t i = 0; i < c->flags.n; i++) tune_strings_add(&a, c->flags.v[i]);
  char number[32];
  snprintf(number, sizeof number, "%d", steps);
  add_flag(&a, "num_batches", number);
  snprintf(number, sizeof number, "%d", warmup);
  add_flag(&a, "num_warmup_batches", number);
  add_flag(&a, "display_every", "1");
  add_flag(&a, "benchmark_log_dir", log_dir);
  return a.v; /* NULL-terminated by tune_strings_add */
}

void tune_argv_free(char **argv) {
  for (size_t i = 0; argv && argv[i]; i++) free(argv[i]);
  free(argv);
}
