/* loader.c — plugin discovery and name resolution: which directories and files are
 * searched and in what order, which plugin wins a name, and what a user is told when the
 * name they asked for is unknown, of another kind, or offered by a rejected plugin.
 * Loading and checking one file is loader_load.c; --list_plugins is loader_list.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/crash_guard.h"
#include "loader/loader_impl.h"
#include "base/names.h"
#include "loader/not_classification.h"

#ifndef CNNB_INSTALL_PLUGIN_DIR
#define CNNB_INSTALL_PLUGIN_DIR "/usr/local/lib/cnnbench/plugins"
#endif
#ifndef CNNB_PLUGIN_DIR_FROM_LIBDIR
#define CNNB_PLUGIN_DIR_FROM_LIBDIR "cnnbench/plugins"
#endif

/* Any object inside the core: dladdr() on it names the file it was loaded from (libcnnb,
 * or an executable that links the core statically). */
static const char libcnnb_anchor = 0;

/* ---- records -------------------------------------------------------------------- */

static void remove_name(loader_plugin *p, size_t index) {
  free(p->names[index]);
  memmove(&p->names[index], &p->names[index + 1], (p->num_names - index - 1) * sizeof p->names[0]);
  p->num_names--;
}

static bool has_name(const loader_plugin *p, const char *name) {
  for (size_t i = 0; i < p->num_names; i++)
    if (strcmp(p->names[i], name) == 0) return true;
  return false;
}

void loader_plugin_free(loader_plugin *p) {
  if (!p) return;
  if (p->handle) dlclose(p->handle);
  for (size_t i = 0; i < p->num_names; i++) free(p->names[i]);
  free(p->names);
  free(p->path);
  free(p->version);
  free(p->why);
  free(p);
}

/* ---- lifetime ------------------------------------------------------------------- */

static bool same_dir(const char *a, const char *b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/* The plugin directory that belongs to the libcnnb running now: <its dir>/cnnbench/plugins
 * (an install, wherever its prefix went), or the build tree's plugin dir when libcnnb runs
 * from the build tree. The configured install path only when libcnnb cannot be located. */
static char *default_install_dir(void) {
  Dl_info info;
  if (!dladdr(&libcnnb_anchor, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
    return strdup(CNNB_INSTALL_PLUGIN_DIR);
  char *lib = strdup(info.dli_fname);
  if (!lib) return NULL;
  /* dli_fname is the path as found ("<prefix>/bin/../lib/libcnnb.so.1"): show it clean. */
  char real_dir[PATH_MAX];
  const char *dir = dirname(lib);
  if (realpath(dir, real_dir)) dir = real_dir;
  char *result = NULL;
#ifdef CNNB_BUILD_LIB_DIR
  /* libcnnb in the build tree, or a test or tool there that links the core statically
   * (the anchor then lies in the executable, in the build's bin directory). */
  if (same_dir(dir, CNNB_BUILD_LIB_DIR) || same_dir(dir, CNNB_BUILD_BIN_DIR)) {
    free(lib);
    return strdup(CNNB_BUILD_PLUGIN_DIR);
  }
#endif
  if (asprintf(&result, "%s/%s", dir, CNNB_PLUGIN_DIR_FROM_LIBDIR) < 0) result = NULL;
  free(lib);
  return result;
}

cnnb_loader *cnnb_loader_create(const cnnb_ctx *parent) {
  cnnb_loader *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->ctx = cnnb_ctx_create_child(parent, "loader");
  l->install_dir = default_install_dir();
  if (!l->ctx || !l->install_dir) {
    cnnb_loader_destroy(l);
    return NULL;
  }
  return l;
}

void cnnb_loader_destroy(cnnb_loader *l) {
  if (!l) return;
  loader_drop_datasets(l);
  /* Reverse order: a later plugin may hold pointers into an earlier one. */
  for (size_t i = l->num_plugins; i-- > 0;) loader_plugin_free(l->plugins[i]);
  free(l->plugins);
  free(l->install_dir);
  cnnb_ctx_destroy(l->ctx);
  free(l);
}

cnnb_status cnnb_loader_set_install_dir(cnnb_loader *l, const char *dir) {
  char *copy = NULL;
  if (dir && !(copy = strdup(dir))) return CNNB_ENOMEM;
  free(l->install_dir);
  l->install_dir = copy;
  return CNNB_OK;
}

const char *cnnb_loader_install_dir(const cnnb_loader *l) { return l->install_dir; }

/* ---- messages ------------------------------------------------------------------- */

/* Appends to a bounded message buffer; silently truncates (the start says the most). */
static void append(char *buf, size_t size, const char *fmt, ...) CNNB_PRINTF(3, 4);
static void append(char *buf, size_t size, const char *fmt, ...) {
  if (!buf || size == 0) return;
  size_t len = strnlen(buf, size);
  if (len + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, size - len, fmt, ap);
  va_end(ap);
}

const char *cnnb_loader_kind_flag(uint32_t kind) {
  switch (kind) {
    case CNNB_KIND_MODEL: return "model";
    case CNNB_KIND_DEVICE: return "device";
    case CNNB_KIND_STRATEGY: return "variable_update";
    case CNNB_KIND_DATASOURCE: return "datasource";
    default: return "plugin";
  }
}

/* ---- discovery ------------------------------------------------------------------ */

static loader_plugin *find_identity(const cnnb_loader *l, const struct stat *st) {
  for (size_t i = 0; i < l->num_plugins; i++) {
    loader_plugin *p = l->plugins[i];
    if (p->have_identity && p->dev == st->st_dev && p->ino == st->st_ino) return p;
  }
  return NULL;
}

static cnnb_status push(cnnb_loader *l, loader_plugin *p) {
  if (l->num_plugins == l->cap_plugins) {
    size_t cap = l->cap_plugins ? 2 * l->cap_plugins : 16;
    loader_plugin **grown = realloc(l->plugins, cap * sizeof *grown);
    if (!grown) return CNNB_ENOMEM;
    l->plugins = grown;
    l->cap_plugins = cap;
  }
  l->plugins[l->num_plugins++] = p;
  return CNNB_OK;
}

/* First on the path wins: drops the names an earlier plugin of the same kind already
 * offers, each with a warning. A plugin left with no name is rejected instead (it would
 * never be used), with one message naming every earlier plugin it collides with. */
static cnnb_status resolve_shadowing(cnnb_loader *l, loader_plugin *p) {
  const loader_plugin **winners = calloc(p->num_names ? p->num_names : 1, sizeof *winners);
  if (!winners) return CNNB_ENOMEM;
  size_t dropped = 0;
  for (size_t i = 0; i < p->num_names; i++) {
    for (size_t j = 0; j < l->num_plugins && !winners[i]; j++) {
      const loader_plugin *q = l->plugins[j];
      if (q != p && !q->why && q->kind == p->kind && has_name(q, p->names[i])) winners[i] = q;
    }
    dropped += winners[i] != NULL;
  }
  cnnb_status st = CNNB_OK;
  if (dropped > 0 && dropped == p->num_names) {
    /* "offers 'x' already offered by A, 'y' already offered by B: ignored (...)" */
    char *why = NULL;
    size_t why_len = 0;
    FILE *out = open_memstream(&why, &why_len);
    if (!out) {
      free(winners);
      return CNNB_ENOMEM;
    }
    fputs("offers ", out);
    for (size_t i = 0; i < p->num_names; i++)
      fprintf(out, "%s'%s' already offered by %s", i ? ", " : "", p->names[i], winners[i]->path);
    fputs(": ignored (the first plugin found wins; rename it, or take the other off the plugin "
          "path)",
          out);
    if (fclose(out) != 0 || !why) st = CNNB_ENOMEM;
    free(p->why);
    p->why = why;
    memset(&p->desc, 0, sizeof p->desc); /* names stay: find() still explains them */
    dlclose(p->handle);
    p->handle = NULL;
  } else {
    for (size_t i = 0; i < p->num_names; i++)
      if (winners[i])
        cnnb_log(l->ctx, CNNB_LOG_WARN,
                 "%s offers '%s' already offered by %s: ignored (the first plugin found wins)",
                 p->path, p->names[i], winners[i]->path);
    for (size_t i = p->num_names; i-- > 0;)
      if (winners[i]) remove_name(p, i);
  }
  free(winners);
  return st;
}

/* Reports a rejection: a warning for a discovered plugin, an error line for an explicit one. */
static void report_rejection(cnnb_loader *l, const loader_plugin *p, cnnb_status *result, char *err,
                             size_t err_size) {
  if (!p->why) return;
  if (!p->is_explicit) {
    cnnb_log(l->ctx, CNNB_LOG_WARN, "%s: %s", p->path, p->why);
    return;
  }
  if (*result == CNNB_OK) {
    *result = CNNB_EINVAL;
    if (err && err_size) err[0] = '\0';
  } else {
    append(err, err_size, "\n");
  }
  append(err, err_size, "%s: %s", p->path, p->why);
}

static const char *file_type(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

static cnnb_status add_file(cnnb_loader *l, const char *path, bool is_explicit, cnnb_status *result,
                            char *err, size_t err_size) {
  struct stat st;
  bool have_stat = stat(path, &st) == 0;
  int stat_errno = errno;
  if (have_stat) {
    loader_plugin *seen = find_identity(l, &st);
    /* One file reached twice (a dir on the path twice, --plugin of an installed one). */
    if (seen) {
      if (is_explicit && !seen->is_explicit) {
        seen->is_explicit = true;
        report_rejection(l, seen, result, err, err_size);
      }
      return CNNB_OK;
    }
  }
  loader_plugin *p = calloc(1, sizeof *p);
  if (!p || !(p->path = strdup(path))) {
    free(p);
    return CNNB_ENOMEM;
  }
  p->is_explicit = is_explicit;
  cnnb_status status = CNNB_OK;
  if (!have_stat) {
    int e = stat_errno;
    if (asprintf(&p->why, "%s%s", e == ENOENT ? "no such file" : "cannot be read: ",
                 e == ENOENT ? "" : strerror(e)) < 0)
      p->why = NULL;
  } else if (S_ISDIR(st.st_mode)) {
    p->why = strdup("is a directory: --plugin takes a .so file; put directories on "
                    "CNNB_PLUGIN_PATH");
  } else if (!S_ISREG(st.st_mode)) {
    /* Opening a FIFO waits for a writer forever; a device file is no plugin either. */
    if (asprintf(&p->why,
                 "is not a regular file (%s): a plugin is a .so file; remove it "
                 "from the plugin path",
                 file_type(st.st_mode)) < 0)
      p->why = NULL;
  } else {
    p->dev = st.st_dev;
    p->ino = st.st_ino;
    p->have_identity = true;
    status = loader_load_file(l, p);
    if (status == CNNB_OK && !p->why) status = resolve_shadowing(l, p);
  }
  if (!p->why && !p->handle) status = CNNB_ENOMEM; /* a message we could not allocate */
  if (!p->version && !(p->version = strdup(""))) status = CNNB_ENOMEM;
  if (status != CNNB_OK && !p->why) {
    loader_plugin_free(p);
    return status;
  }
  if (push(l, p) != CNNB_OK) {
    loader_plugin_free(p);
    return CNNB_ENOMEM;
  }
  report_rejection(l, p, result, err, err_size);
  return status;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with_so(const char *name) {
  size_t n = strlen(name);
  return n > 3 && strcmp(name + n - 3, ".so") == 0;
}

/* Every *.so in `dir`, in name order so "first found" does not depend on the file system. */
static cnnb_status scan_dir(cnnb_loader *l, const char *dir, bool warn_missing, cnnb_status *result,
                            char *err, size_t err_size) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR) {
      if (warn_missing)
        cnnb_log(l->ctx, CNNB_LOG_WARN, "CNNB_PLUGIN_PATH entry '%s' %s: ignored", dir,
                 errno == ENOENT ? "does not exist"
                                 : "is not a directory (give files with --plugin=FILE)");
    } else {
      cnnb_log(l->ctx, CNNB_LOG_WARN, "plugin directory '%s' cannot be read (%s): ignored", dir,
               strerror(errno));
    }
    return CNNB_OK;
  }
  char **files = NULL;
  size_t n = 0, cap = 0;
  cnnb_status status = CNNB_OK;
  for (struct dirent *e; (e = readdir(d));) {
    if (!ends_with_so(e->d_name)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **grown = realloc(files, cap * sizeof *grown);
      if (!grown) {
        status = CNNB_ENOMEM;
        break;
      }
      files = grown;
    }
    if (!(files[n] = strdup(e->d_name))) {
      status = CNNB_ENOMEM;
      break;
    }
    n++;
  }
  closedir(d);
  if (files) qsort(files, n, sizeof *files, compare_names);
  size_t dir_len = strlen(dir);
  bool slash = dir_len > 0 && dir[dir_len - 1] == '/';
  for (size_t i = 0; i < n && status == CNNB_OK; i++) {
    char *path = NULL;
    if (asprintf(&path, "%s%s%s", dir, slash ? "" : "/", files[i]) < 0) {
      status = CNNB_ENOMEM;
      break;
    }
    struct stat st;
    /* Subdirectories named *.so are not plugins; broken links are worth a warning. */
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
      status = add_file(l, path, false, result, err, err_size);
    free(path);
  }
  for (size_t i = 0; i < n; i++) free(files[i]);
  free(files);
  return status;
}

/* Calls fn(l, entry, ...) for each non-empty entry of a ':'-separated list. */
static cnnb_status each_entry(cnnb_loader *l, const char *list, bool files, cnnb_status *result,
                              char *err, size_t err_size) {
  if (!list) return CNNB_OK;
  char *copy = strdup(list);
  if (!copy) return CNNB_ENOMEM;
  cnnb_status status = CNNB_OK;
  char *save = NULL;
  for (char *entry = strtok_r(copy, ":", &save); entry && status == CNNB_OK;
       entry = strtok_r(NULL, ":", &save)) {
    status = files ? add_file(l, entry, true, result, err, err_size)
                   : scan_dir(l, entry, true, result, err, err_size);
  }
  free(copy);
  return status;
}

cnnb_status cnnb_loader_discover(cnnb_loader *l, const char *explicit_files, char *err,
                                 size_t err_size) {
  if (err && err_size) err[0] = '\0';
  cnnb_status result = CNNB_OK, status = CNNB_OK;
  if (l->install_dir) status = scan_dir(l, l->install_dir, false, &result, err, err_size);
  if (status == CNNB_OK)
    status = each_entry(l, getenv("CNNB_PLUGIN_PATH"), false, &result, err, err_size);
  if (status == CNNB_OK) status = each_entry(l, explicit_files, true, &result, err, err_size);
  if (status == CNNB_OK) status = loader_add_datasets(l);
  if (status != CNNB_OK) {
    if (err && err_size) snprintf(err, err_size, "loading plugins: %s", cnnb_status_name(status));
    return status;
  }
  return result;
}

/* ---- resolving names ------------------------------------------------------------ */

size_t cnnb_loader_names(const cnnb_loader *l, uint32_t kind, const char **names, size_t max) {
  size_t count = 0;
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (p->why || p->kind != kind) continue;
    for (size_t j = 0; j < p->num_names; j++, count++)
      if (names && count < max) names[count] = p->names[j];
  }
  return count;
}

static const loader_plugin *find_named(const cnnb_loader *l, const char *name, bool accepted,
                                       uint32_t kind, bool same_kind) {
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if ((p->why == NULL) != accepted) continue;
    if ((p->kind == kind) != same_kind) continue;
    if (has_name(p, name)) return p;
  }
  return NULL;
}

static void unknown_name(const cnnb_loader *l, uint32_t kind, const char *name, char *err,
                         size_t err_size) {
  const char *kn = cnnb_kind_name(kind);
  append(err, err_size, "no %s plugin offers '%s'", kn, name);
  size_t count = cnnb_loader_names(l, kind, NULL, 0);
  const char **names = count ? calloc(count, sizeof *names) : NULL;
  if (names) {
    cnnb_loader_names(l, kind, names, count);
    const char *best = cnnb_closest_name(name, names, count);
    if (best) append(err, err_size, " (did you mean '%s'?)", best);
    for (size_t i = 0; i < count; i++)
      append(err, err_size, "%s%s", i ? ", " : "; known names: ", names[i]);
    free(names);
  }
  if (count == 0)
    append(err, err_size, "; no %s plugin was found at all (plugin directory: %s)", kn,
           l->install_dir ? l->install_dir : "none");
  append(err, err_size,
         ". See --list_plugins; add plugins with CNNB_PLUGIN_PATH=DIR or --plugin=FILE");
}

cnnb_status cnnb_loader_find(cnnb_loader *l, uint32_t kind, const char *name,
                             const cnnb_plugin **out, const char **path, char *err,
                             size_t err_size) {
  if (err && err_size) err[0] = '\0';
  if (out) *out = NULL;
  if (path) *path = NULL;
  if (!name) name = "";
  const loader_plugin *p = find_named(l, name, true, kind, true);
  if (p) {
    if (out) *out = &p->desc;
    if (path) *path = p->path;
    return CNNB_OK;
  }
  append(err, err_size, "--%s=%s: ", cnnb_loader_kind_flag(kind), name);
  /* A rejected plugin of this kind first: it is most likely the one the user means. */
  p = find_named(l, name, false, kind, true);
  if (!p) {
    const loader_plugin *other = find_named(l, name, true, kind, false);
    if (other) {
      append(err, err_size, "'%s' is a %s plugin (%s), not a %s; pick it with --%s=%s", name,
             cnnb_kind_name(other->kind), other->path, cnnb_kind_name(kind),
             cnnb_loader_kind_flag(other->kind), name);
      return CNNB_EINVAL;
    }
    p = find_named(l, name, false, kind, false);
  }
  if (p) {
    append(err, err_size, "%s, which offers '%s', was rejected: %s", p->path, name, p->why);
    return CNNB_EINVAL;
  }
  /* Only now: a plugin that brings one of these models offers it as any other. */
  const char *other_task = kind == CNNB_KIND_MODEL ? cnnb_not_classification_model(name) : NULL;
  if (other_task) {
    append(err, err_size,
           "'%s' is %s, not an image-classification model: cnnbench trains and benchmarks "
           "image classifiers only (--list_plugins lists them)",
           name, other_task);
    return CNNB_EUNSUPPORTED;
  }
  unknown_name(l, kind, name, err, err_size);
  return CNNB_ENOTFOUND;
}

void cnnb_loader_register_flags(cnnb_loader *l, cnnb_flags *flags) {
  for (size_t i = 0; i < l->num_plugins; i++) {
    loader_plugin *p = l->plugins[i];
    if (p->why || !p->desc.register_flags) continue;
    cnnb_flag_registry *registry = cnnb_flags_registry(flags, p->desc.name);
    cnnb_status st = CNNB_ENOMEM;
    if (registry)
      CNNB_GUARDED(p->path, "register_flags", p->desc.name, st = p->desc.register_flags(registry));
    if (st != CNNB_OK)
      cnnb_log(l->ctx, CNNB_LOG_WARN,
               "%s (%s): declaring its flags failed (%s)%s%s; they are missing from this run",
               p->desc.name, p->path, cnnb_status_name(st), cnnb_flags_error(flags)[0] ? ": " : "",
               cnnb_flags_error(flags));
  }
}

/* ---- inspection ----------------------------------------------------------------- */

size_t cnnb_loader_num_accepted(const cnnb_loader *l) {
  size_t n = 0;
  for (size_t i = 0; i < l->num_plugins; i++) n += l->plugins[i]->why == NULL;
  return n;
}

size_t cnnb_loader_num_rejected(const cnnb_loader *l) {
  return l->num_plugins - cnnb_loader_num_accepted(l);
}

bool cnnb_loader_rejection(const cnnb_loader *l, size_t index, const char **path,
                           const char **why) {
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (!p->why) continue;
    if (index-- == 0) {
      if (path) *path = p->path;
      if (why) *why = p->why;
      return true;
    }
  }
  return false;
}
