/* flags.c — the flag table: declaring flags (core themes and plugin groups), storing
 * typed values, and reading them back, from core code (cnnb_flags_*) and from plugins
 * through their ctx (cnnb_flag_*). Parsing is flags_parse.c; --help is flags_help.c.
 *
 * A value is parsed once, when set, by the same code for defaults and for the command
 * line, so a declared default that would not parse is refused at declaration time. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/ctx_internal.h"
#include "flags/flags_internal.h"
#include "base/names.h"

cnnb_flags *cnnb_flags_create(void) { return calloc(1, sizeof(cnnb_flags)); }

static void free_entry(cnnb_flag_entry *f) {
  free(f->name);
  free(f->help);
  free(f->default_text);
  free(f->s);
  free(f->origin);
  if (f->choices) {
    for (char **c = f->choices; *c; c++) free(*c);
    free(f->choices);
  }
}

void cnnb_flags_destroy(cnnb_flags *flags) {
  if (!flags) return;
  for (size_t i = 0; i < flags->n; i++) free_entry(&flags->v[i]);
  free(flags->v);
  for (size_t i = 0; i < flags->ngroups; i++) {
    free(flags->groups[i].name);
    free(flags->groups[i].registry);
  }
  free(flags->groups);
  for (size_t i = 0; i < flags->naliases; i++) free(flags->aliases[i].alias);
  free(flags->aliases);
  free(flags);
}

const char *cnnb_flags_error(const cnnb_flags *flags) { return flags ? flags->error : ""; }

const char *cnnb_flag_type_name(cnnb_flag_type type) {
  switch (type) {
    case CNNB_FLAG_BOOL: return "bool";
    case CNNB_FLAG_INT: return "int";
    case CNNB_FLAG_FLOAT: return "float";
    case CNNB_FLAG_STRING: return "string";
  }
  return "unknown";
}

/* ---- groups ------------------------------------------------------------------- */

static cnnb_flag_registry *group_registry(cnnb_flags *flags, const char *name, bool theme) {
  if (!flags || !name || !name[0]) return NULL;
  for (size_t i = 0; i < flags->ngroups; i++)
    if (flags->groups[i].theme == theme && strcmp(flags->groups[i].name, name) == 0)
      return flags->groups[i].registry;
  if (flags->ngroups == flags->gcap) {
    size_t cap = flags->gcap ? 2 * flags->gcap : 8;
    cnnb_flag_group *g = realloc(flags->groups, cap * sizeof *g);
    if (!g) return NULL;
    flags->groups = g;
    flags->gcap = cap;
  }
  cnnb_flag_registry *r = malloc(sizeof *r);
  char *copy = strdup(name);
  if (!r || !copy) {
    free(r);
    free(copy);
    return NULL;
  }
  r->flags = flags;
  r->group = flags->ngroups;
  flags->groups[flags->ngroups++] = (cnnb_flag_group){copy, theme, r};
  return r;
}

cnnb_flag_registry *cnnb_flags_registry(cnnb_flags *flags, const char *group) {
  return group_registry(flags, group, false);
}

cnnb_flag_registry *cnnb_flags_theme_registry(cnnb_flags *flags, const char *theme) {
  return group_registry(flags, theme, true);
}

/* ---- declaring ---------------------------------------------------------------- */

static cnnb_status refuse(cnnb_flags *flags, const char *group, const char *fmt, ...)
    CNNB_PRINTF(3, 4);
static cnnb_status refuse(cnnb_flags *flags, const char *group, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(flags->error, sizeof flags->error, fmt, ap);
  va_end(ap);
  cnnb_log_component(group, CNNB_LOG_ERROR, "%s", flags->error);
  return CNNB_EINVAL;
}

static void describe_group(const cnnb_flags *flags, size_t group, char *out, size_t size) {
  const cnnb_flag_group *g = &flags->groups[group];
  snprintf(out, size, g->theme ? "the core (%s)" : "plugin %s", g->name);
}

static bool valid_name(const char *name) {
  if (!name || !isalpha((unsigned char)name[0])) return false;
  for (const char *p = name; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '_') return false;
  return true;
}

static cnnb_status declare(cnnb_flag_registry *registry, const char *name, cnnb_flag_type type,
                           const char *default_value, const char *const *choices, char separator,
                           const char *help) {
  if (!registry || !registry->flags) return CNNB_EINVAL;
  cnnb_flags *flags = registry->flags;
  const char *group = flags->groups[registry->group].name;
  flags->error[0] = '\0';
  if (!valid_name(name))
    return refuse(flags, group,
                  "cannot declare flag '%s': a flag name is a letter followed "
                  "by letters, digits or '_'",
                  name ? name : "(null)");
  if (type < CNNB_FLAG_BOOL || type > CNNB_FLAG_STRING)
    return refuse(flags, group, "cannot declare flag --%s: unknown type %d", name, (int)type);
  cnnb_flag_entry *old = cnnb_flags_find(flags, name);
  /* Two plugins of one kind may read one flag of tf_cnn_benchmarks (--distortions, read
   * by each image datasource): the same name, type and default from plugin groups is one
   * flag, its help telling what each plugin does with it. Anything else is a clash. */
  if (old && !flags->groups[old->group].theme && !flags->groups[registry->group].theme &&
      old->group != registry->group && old->type == type && !choices && !old->choices &&
      separator == '\0' && old->separator == '\0' && strcmp(old->name, name) == 0 &&
      strcmp(old->default_text, default_value ? default_value : old->default_text) == 0) {
    char also[160];
    snprintf(also, sizeof also, "Plugin %s:", group);
    if (cnnb_flags_append_help(flags, name, also) != CNNB_OK ||
        cnnb_flags_append_help(flags, name, help ? help : "") != CNNB_OK)
      return CNNB_ENOMEM;
    return CNNB_OK;
  }
  if (old) {
    char by[160];
    describe_group(flags, old->group, by, sizeof by);
    return refuse(flags, group, "cannot declare flag --%s: %s already declares it", name, by);
  }
  if (flags->n == flags->cap) {
    size_t cap = flags->cap ? 2 * flags->cap : 64;
    cnnb_flag_entry *v = realloc(flags->v, cap * sizeof *v);
    if (!v) return CNNB_ENOMEM;
    flags->v = v;
    flags->cap = cap;
  }
  if (!default_value)
    default_value = type == CNNB_FLAG_BOOL ? "false" : type == CNNB_FLAG_STRING ? "" : "0";
  cnnb_flag_entry f = {0};
  f.type = type;
  f.group = registry->group;
  f.separator = separator;
  f.name = strdup(name);
  f.help = strdup(help ? help : "");
  f.default_text = strdup(default_value);
  bool ok = f.name && f.help && f.default_text;
  if (ok && choices) {
    size_t k = 0;
    while (choices[k]) k++;
    f.choices = calloc(k + 1, sizeof *f.choices);
    ok = f.choices != NULL;
    for (size_t j = 0; ok && j < k; j++) ok = (f.choices[j] = strdup(choices[j])) != NULL;
  }
  if (!ok) {
    free_entry(&f);
    return CNNB_ENOMEM;
  }
  char err[256];
  if (cnnb_flags_assign(&f, default_value, err, sizeof err) != CNNB_OK) {
    free_entry(&f);
    return refuse(flags, group, "cannot declare flag --%s: its default does not parse: %s", name,
                  err);
  }
  f.is_set = false;
  flags->v[flags->n++] = f;
  return CNNB_OK;
}

cnnb_status cnnb_flag_declare(cnnb_flag_registry *registry, const char *name, cnnb_flag_type type,
                              const char *default_value, const char *help) {
  return declare(registry, name, type, default_value, NULL, '\0', help);
}

cnnb_status cnnb_flag_mark_per_rank(cnnb_flag_registry *registry, const char *name) {
  if (!registry || !registry->flags) return CNNB_EINVAL;
  cnnb_flags *flags = registry->flags;
  flags->error[0] = '\0';
  cnnb_flag_entry *f = cnnb_flags_find(flags, name);
  /* Only the declarer's own flag: one plugin cannot loosen what another's means. */
  if (!f || f->group != registry->group)
    return refuse(flags, flags->groups[registry->group].name,
                  "cannot mark --%s as per-rank: this component did not declare it",
                  name ? name : "(null)");
  f->per_rank = true;
  return CNNB_OK;
}

cnnb_status cnnb_flags_declare_choice(cnnb_flag_registry *registry, const char *name,
                                      const char *default_value, const char *const *allowed,
                                      const char *help) {
  if (!allowed || !allowed[0]) {
    if (!registry || !registry->flags) return CNNB_EINVAL;
    return refuse(registry->flags, registry->flags->groups[registry->group].name,
                  "cannot declare flag --%s: a choice needs at least one allowed value",
                  name ? name : "(null)");
  }
  return declare(registry, name, CNNB_FLAG_STRING, default_value ? default_value : allowed[0],
                 allowed, '\0', help);
}

cnnb_status cnnb_flags_declare_repeated(cnnb_flag_registry *registry, const char *name,
                                        char separator, const char *help) {
  return declare(registry, name, CNNB_FLAG_STRING, "", NULL, separator ? separator : ':', help);
}

cnnb_status cnnb_flags_alias(cnnb_flags *flags, const char *alias, const char *name) {
  if (!flags) return CNNB_EINVAL;
  flags->error[0] = '\0';
  cnnb_flag_entry *target = cnnb_flags_find(flags, name);
  if (!target)
    return refuse(flags, "cnnbench", "cannot alias --%s to --%s: no such flag",
                  alias ? alias : "(null)", name ? name : "(null)");
  if (!valid_name(alias) || cnnb_flags_find(flags, alias))
    return refuse(flags, "cnnbench", "cannot alias --%s to --%s: the name is invalid or taken",
                  alias ? alias : "(null)", name);
  if (flags->naliases == flags->acap) {
    size_t cap = flags->acap ? 2 * flags->acap : 8;
    cnnb_flag_alias *a = realloc(flags->aliases, cap * sizeof *a);
    if (!a) return CNNB_ENOMEM;
    flags->aliases = a;
    flags->acap = cap;
  }
  char *copy = strdup(alias);
  if (!copy) return CNNB_ENOMEM;
  flags->aliases[flags->naliases++] = (cnnb_flag_alias){copy, (size_t)(target - flags->v)};
  return CNNB_OK;
}

cnnb_status cnnb_flags_append_help(cnnb_flags *flags, const char *name, const char *text) {
  cnnb_flag_entry *f = cnnb_flags_find(flags, name);
  if (!f || !text) return CNNB_EINVAL;
  size_t have = strlen(f->help), add = strlen(text);
  char *help = realloc(f->help, have + 1 + add + 1);
  if (!help) return CNNB_ENOMEM;
  if (have) help[have++] = ' ';
  memcpy(help + have, text, add + 1);
  f->help = help;
  return CNNB_OK;
}

bool cnnb_flags_declared(const cnnb_flags *flags, const char *name) {
  return cnnb_flags_find(flags, name) != NULL;
}

cnnb_flag_entry *cnnb_flags_find(const cnnb_flags *flags, const char *name) {
  if (!flags || !name) return NULL;
  for (size_t i = 0; i < flags->n; i++)
    if (strcmp(flags->v[i].name, name) == 0) return &flags->v[i];
  for (size_t i = 0; i < flags->naliases; i++)
    if (strcmp(flags->aliases[i].alias, name) == 0) return &flags->v[flags->aliases[i].target];
  return NULL;
}

/* ---- values ------------------------------------------------------------------- */

static bool parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"true", "t", "1", "yes", "y"};
  static const char *const no[] = {"false", "f", "0", "no", "n"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = true, true;
    if (strcasecmp(s, no[i]) == 0) return *out = false, true;
  }
  return false;
}

const char *cnnb_flags_quote(const char *text, char *buf, size_t size) {
  if (strlen(text) <= CNNB_FLAG_QUOTE) return text;
  snprintf(buf, size, "%.*s...", CNNB_FLAG_QUOTE - 3, text);
  return buf;
}

cnnb_status cnnb_flags_assign(cnnb_flag_entry *f, const char *value, char *err, size_t err_size) {
  if (!value) value = "";
  /* A value is quoted in part: a long one must not push the reason out of the message. */
  char q[CNNB_FLAG_QUOTE + 4];
  const char *shown = cnnb_flags_quote(value, q, sizeof q);
  switch (f->type) {
    case CNNB_FLAG_BOOL: {
      bool b;
      if (!parse_bool(value, &b)) {
        snprintf(err, err_size, "flag --%s: '%s' is not a boolean (use true or false)", f->name,
                 shown);
        return CNNB_EINVAL;
      }
      f->b = b;
      break;
    }
    case CNNB_FLAG_INT: {
      char *end = NULL;
      errno = 0;
      long long v = strtoll(value, &end, 10);
      if (!value[0] || isspace((unsigned char)value[0]) || *end) {
        snprintf(err, err_size, "flag --%s: '%s' is not an integer", f->name, shown);
        return CNNB_EINVAL;
      }
      if (errno == ERANGE) {
        snprintf(err, err_size, "flag --%s: '%s' is out of range for a 64-bit integer", f->name,
                 shown);
        return CNNB_EINVAL;
      }
      f->i = (int64_t)v;
      break;
    }
    case CNNB_FLAG_FLOAT: {
      char *end = NULL;
      errno = 0;
      double v = strtod(value, &end);
      if (!value[0] || isspace((unsigned char)value[0]) || *end) {
        snprintf(err, err_size, "flag --%s: '%s' is not a number", f->name, shown);
        return CNNB_EINVAL;
      }
      if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) {
        snprintf(err, err_size, "flag --%s: '%s' is out of range for a finite float", f->name,
                 shown);
        return CNNB_EINVAL;
      }
      f->f = v;
      break;
    }
    case CNNB_FLAG_STRING: {
      if (f->choices) {
        bool found = false;
        for (char **c = f->choices; *c && !found; c++) found = strcmp(*c, value) == 0;
        if (!found) {
          size_t len = (size_t)snprintf(err, err_size, "flag --%s: '%s' is not one of ", f->name,
                                        shown);
          const char *best = NULL;
          int best_d = 0;
          for (char **c = f->choices; *c; c++) {
            if (len < err_size)
              len += (size_t)snprintf(err + len, err_size - len, "%s%s",
                                      c == f->choices ? "" : ", ", *c);
            int d = cnnb_edit_distance(value, *c);
            if (!best || d < best_d) best = *c, best_d = d;
          }
          if (best && cnnb_names_close_enough(value, best_d) && len < err_size)
            snprintf(err + len, err_size - len, " (did you mean %s?)", best);
          return CNNB_EINVAL;
        }
      }
      char *copy;
      if (f->separator && f->is_set && f->s && f->s[0]) {
        size_t have = strlen(f->s), add = strlen(value);
        copy = malloc(have + 1 + add + 1);
        if (copy) {
          memcpy(copy, f->s, have);
          copy[have] = f->separator;
          memcpy(copy + have + 1, value, add + 1);
        }
      } else {
        copy = strdup(value);
      }
      if (!copy) {
        snprintf(err, err_size, "flag --%s: out of memory", f->name);
        return CNNB_ENOMEM;
      }
      free(f->s);
      f->s = copy;
      break;
    }
  }
  f->is_set = true;
  return CNNB_OK;
}

/* ---- reading ------------------------------------------------------------------ */

/* The entry for a getter, or NULL after logging why it cannot be read as `type`. */
static const cnnb_flag_entry *lookup(const cnnb_flags *flags, const char *name, cnnb_flag_type type,
                                     const char *component) {
  const cnnb_flag_entry *f = cnnb_flags_find(flags, name);
  if (!f) {
    cnnb_log_component(component, CNNB_LOG_ERROR,
                       "flag --%s is read but nobody declared it (reads as %s zero)",
                       name ? name : "(null)", cnnb_flag_type_name(type));
    return NULL;
  }
  if (f->type != type) {
    cnnb_log_component(component, CNNB_LOG_ERROR, "flag --%s is of type %s, read as %s", f->name,
                       cnnb_flag_type_name(f->type), cnnb_flag_type_name(type));
    return NULL;
  }
  return f;
}

int64_t cnnb_flags_int(const cnnb_flags *flags, const char *name) {
  const cnnb_flag_entry *f = lookup(flags, name, CNNB_FLAG_INT, "cnnbench");
  return f ? f->i : 0;
}

double cnnb_flags_float(const cnnb_flags *flags, const char *name) {
  const cnnb_flag_entry *f = lookup(flags, name, CNNB_FLAG_FLOAT, "cnnbench");
  return f ? f->f : 0.0;
}

bool cnnb_flags_bool(const cnnb_flags *flags, const char *name) {
  const cnnb_flag_entry *f = lookup(flags, name, CNNB_FLAG_BOOL, "cnnbench");
  return f ? f->b : false;
}

const char *cnnb_flags_string(const cnnb_flags *flags, const char *name) {
  const cnnb_flag_entry *f = lookup(flags, name, CNNB_FLAG_STRING, "cnnbench");
  return f && f->s ? f->s : "";
}

bool cnnb_flags_is_set(const cnnb_flags *flags, const char *name) {
  const cnnb_flag_entry *f = cnnb_flags_find(flags, name);
  if (!f) {
    cnnb_log_component("cnnbench", CNNB_LOG_ERROR, "flag --%s is read but nobody declared it",
                       name ? name : "(null)");
    return false;
  }
  return f->is_set;
}

const char *cnnb_flags_origin(const cnnb_flags *flags, const char *name) {
  const cnnb_flag_entry *f = cnnb_flags_find(flags, name);
  return f ? f->origin : NULL;
}

void cnnb_flags_locate_error(const cnnb_flags *flags, char *err, size_t err_size) {
  if (!err || strncmp(err, "--", 2) != 0) return;
  size_t len = strcspn(err + 2, "=: ");
  if (len == 0 || len >= 256 || !strchr("=: ", err[2 + len])) return;
  char name[256];
  memcpy(name, err + 2, len);
  name[len] = '\0';
  const char *origin = cnnb_flags_origin(flags, name);
  size_t olen = origin ? strlen(origin) : 0;
  size_t elen = strlen(err);
  if (!origin || olen + 2 >= err_size) return;
  if (elen + olen + 2 >= err_size) elen = err_size - olen - 3; /* cut the end, keep the place */
  memmove(err + olen + 2, err, elen);
  memcpy(err, origin, olen);
  memcpy(err + olen, ": ", 2);
  err[olen + 2 + elen] = '\0';
}

/* Through a ctx: a ctx without flags (unit tests) reads zeros quietly. */
static const cnnb_flag_entry *ctx_lookup(const cnnb_ctx *ctx, const char *name,
                                         cnnb_flag_type type) {
  if (!ctx || !ctx->flags) {
    cnnb_log(ctx, CNNB_LOG_DEBUG, "flag --%s read without a flag table: zero",
             name ? name : "(null)");
    return NULL;
  }
  return lookup(ctx->flags, name, type, cnnb_ctx_component(ctx));
}

int64_t cnnb_flag_int(const cnnb_ctx *ctx, const char *name) {
  const cnnb_flag_entry *f = ctx_lookup(ctx, name, CNNB_FLAG_INT);
  return f ? f->i : 0;
}

double cnnb_flag_float(const cnnb_ctx *ctx, const char *name) {
  const cnnb_flag_entry *f = ctx_lookup(ctx, name, CNNB_FLAG_FLOAT);
  return f ? f->f : 0.0;
}

bool cnnb_flag_bool(const cnnb_ctx *ctx, const char *name) {
  const cnnb_flag_entry *f = ctx_lookup(ctx, name, CNNB_FLAG_BOOL);
  return f ? f->b : false;
}

const char *cnnb_flag_string(const cnnb_ctx *ctx, const char *name) {
  const cnnb_flag_entry *f = ctx_lookup(ctx, name, CNNB_FLAG_STRING);
  return f && f->s ? f->s : "";
}

bool cnnb_flag_declared(const cnnb_ctx *ctx, const char *name) {
  return ctx && ctx->flags && name && cnnb_flags_find(ctx->flags, name) != NULL;
}

bool cnnb_flag_is_set(const cnnb_ctx *ctx, const char *name) {
  if (!ctx || !ctx->flags) return false;
  const cnnb_flag_entry *f = cnnb_flags_find(ctx->flags, name);
  if (!f) {
    cnnb_log(ctx, CNNB_LOG_ERROR, "flag --%s is read but nobody declared it",
             name ? name : "(null)");
    return false;
  }
  return f->is_set;
}

/* ---- walking the table --------------------------------------------------------- */

size_t cnnb_flags_count(const cnnb_flags *flags) { return flags ? flags->n : 0; }

bool cnnb_flags_at(const cnnb_flags *flags, size_t index, cnnb_flag_view *view) {
  if (!flags || index >= flags->n) return false;
  const cnnb_flag_entry *f = &flags->v[index];
  const cnnb_flag_group *g = &flags->groups[f->group];
  *view = (cnnb_flag_view){
      .name = f->name,
      .group = g->name,
      .plugin = !g->theme,
      .type = f->type,
      .is_set = f->is_set,
      .i = f->i,
      .f = f->f,
      .b = f->b,
      .s = f->s ? f->s : "",
      .default_text = f->default_text,
      .help = f->help,
      .choices = (const char *const *)f->choices,
      .repeated = f->separator != '\0',
      .per_rank = f->per_rank,
  };
  return true;
}
