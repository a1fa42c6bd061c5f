/* loader_load.c — loads one plugin file and checks it against the ABI: dlopen, the entry
 * symbol, the descriptor's version and sizes, its kind, names and vtable. Every way a
 * file can fail gets its own reason, phrased as what is wrong and how to fix it, because
 * the person reading it is often not the one who built the plugin.
 *
 * The host reads a plugin's structs only inside both sizes (the plugin's struct_size and
 * the host's sizeof): it copies that much into host-sized, zeroed structs, so the rest of
 * the host reads the copies without ever looking past what the plugin provided. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash_guard.h"
#include "loader/loader_impl.h"

#ifndef CNNB_VERSION_STRING
#define CNNB_VERSION_STRING "0.0.0"
#endif

/* What the host tells every plugin; static because a plugin may keep the pointer. */
static const cnnb_host host_info = {
    .struct_size = (uint32_t)sizeof(cnnb_host),
    .abi_major = CNNB_ABI_MAJOR,
    .abi_minor = CNNB_ABI_MINOR,
    .reserved = 0,
    .host_version = CNNB_VERSION_STRING,
};

/* The smallest structs ABI 1.0 defines. When a struct grows in 1.x these stay the 1.0
 * sizes: an older plugin is still valid, and its missing fields read as zero. */
#define HEAD_SIZE (offsetof(cnnb_plugin, description) + sizeof(const char *))
#define DESC_SIZE_1_0 sizeof(cnnb_plugin)
/* A descriptor offering more names than this is taken for one with a missing NULL. */
#define MAX_OFFERS 4096

typedef struct fn_field {
  const char *name;
  size_t offset;
} fn_field;

#define FN(type, field) \
  { #field, offsetof(type, field) }
/* The slots each kind's header tags [required]; the host checks every [optional] one
 * before calling it. test_loader (slot_tags_match_the_loader) keeps this table and the tags in
 * step. */
static const fn_field model_required[] = {
    FN(cnnb_model_vtable, describe), FN(cnnb_model_vtable, build), {NULL, 0}};
static const fn_field device_required[] = {FN(cnnb_device_vtable, create),
                                           FN(cnnb_device_vtable, destroy),
                                           FN(cnnb_device_vtable, alloc),
                                           FN(cnnb_device_vtable, free),
                                           FN(cnnb_device_vtable, copy_to_device),
                                           FN(cnnb_device_vtable, copy_to_host),
                                           FN(cnnb_device_vtable, fill_zero),
                                           FN(cnnb_device_vtable, synchronize),
                                           FN(cnnb_device_vtable, tensor_bytes),
                                           FN(cnnb_device_vtable, tensor_from_host),
                                           FN(cnnb_device_vtable, tensor_to_host),
                                           FN(cnnb_device_vtable, prepare),
                                           FN(cnnb_device_vtable, release),
                                           FN(cnnb_device_vtable, forward),
                                           FN(cnnb_device_vtable, backward),
                                           FN(cnnb_device_vtable, update),
                                           {NULL, 0}};
static const fn_field strategy_required[] = {
    FN(cnnb_strategy_vtable, create),           FN(cnnb_strategy_vtable, destroy),
    FN(cnnb_strategy_vtable, broadcast_params), FN(cnnb_strategy_vtable, bucket_ready),
    FN(cnnb_strategy_vtable, finish_step),      {NULL, 0}};
static const fn_field datasource_required[] = {FN(cnnb_datasource_vtable, create),
                                               FN(cnnb_datasource_vtable, destroy),
                                               FN(cnnb_datasource_vtable, next_batch),
                                               {NULL, 0}};
#undef FN

typedef struct kind_info {
  size_t vtable_size_1_0; /* the smallest vtable a 1.x plugin may have */
  size_t host_size;       /* this host's sizeof: what it copies at most */
  const fn_field *required;
} kind_info;

static const kind_info *kind_lookup(uint32_t kind) {
  /* {1.0 size: up to the first slot a minor appended, host size, required}. */
  static const kind_info model = {offsetof(cnnb_model_vtable, learning_rate_at),
                                  sizeof(cnnb_model_vtable), model_required};
  static const kind_info device = {offsetof(cnnb_device_vtable, supports_op),
                                   sizeof(cnnb_device_vtable), device_required};
  static const kind_info strategy = {offsetof(cnnb_strategy_vtable, get_extension),
                                     sizeof(cnnb_strategy_vtable), strategy_required};
  static const kind_info datasource = {offsetof(cnnb_datasource_vtable, probe),
                                       sizeof(cnnb_datasource_vtable), datasource_required};
  switch (kind) {
    case CNNB_KIND_MODEL: return &model;
    case CNNB_KIND_DEVICE: return &device;
    case CNNB_KIND_STRATEGY: return &strategy;
    case CNNB_KIND_DATASOURCE: return &datasource;
    default: return NULL;
  }
}

size_t cnnb_loader_required_slots(uint32_t kind, const char **names, size_t max) {
  const kind_info *ki = kind_lookup(kind);
  size_t count = 0;
  for (const fn_field *f = ki ? ki->required : NULL; f && f->name; f++, count++)
    if (names && count < max) names[count] = f->name;
  return count;
}

/* Records why the file is rejected. Returns CNNB_ENOMEM only when the message itself
 * cannot be stored (the plugin is then still rejected, with a generic reason). */
static cnnb_status reject(loader_plugin *p, const char *fmt, ...) CNNB_PRINTF(2, 3);
static cnnb_status reject(loader_plugin *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *why = NULL;
  int n = vasprintf(&why, fmt, ap);
  va_end(ap);
  free(p->why);
  if (n < 0) {
    p->why = NULL;
    return CNNB_ENOMEM;
  }
  p->why = why;
  return CNNB_OK;
}

/* "undefined symbol: foo, version X" -> "foo" */
static void symbol_after(const char *text, const char *marker, char *out, size_t size) {
  const char *s = strstr(text, marker);
  out[0] = '\0';
  if (!s) return;
  s += strlen(marker);
  size_t n = strcspn(s, ", \t\n()");
  if (n >= size) n = size - 1;
  memcpy(out, s, n);
  out[n] = '\0';
}

/* dlopen failed: say why in plain words, and keep dlopen's own text for the expert. */
static cnnb_status reject_dlopen(loader_plugin *p, const char *dlerr) {
  char elf[256];
  if (!dlerr) dlerr = "(no message)";
  if (loader_elf_problem(p->path, elf, sizeof elf)) {
    if (strstr(elf, "truncated"))
      return reject(p,
                    "%s: the copy is incomplete or damaged: rebuild or reinstall it (dlopen: %s)",
                    elf, dlerr);
    return reject(p,
                  "%s: it is not a cnnbench plugin for this machine; a plugin is a .so built "
                  "with cnnb_add_plugin() (dlopen: %s)",
                  elf, dlerr);
  }
  char sym[256];
  symbol_after(dlerr, "undefined symbol: ", sym, sizeof sym);
  /* An SDK function this host lacks: the plugin was built against a newer minor SDK and
   * uses what that minor added (ops, services), which this older libcnnb cannot offer. */
  if (strncmp(sym, "cnnb_", 5) == 0)
    return reject(p,
                  "needs '%s', which this host's SDK (cnnbench %s, ABI %d.%d) does not have: "
                  "the plugin was built against a newer cnnbench SDK; upgrade cnnbench, or "
                  "rebuild the plugin against the %d.%d SDK (dlopen: %s)",
                  sym, CNNB_VERSION_STRING, CNNB_ABI_MAJOR, CNNB_ABI_MINOR, CNNB_ABI_MAJOR,
                  CNNB_ABI_MINOR, dlerr);
  if (sym[0])
    return reject(p,
                  "undefined symbol '%s': the plugin was linked without -Wl,-z,defs against "
                  "a library that is not loaded; link the library that defines '%s' into it "
                  "(cnnb_add_plugin(... LIBRARIES ...) links with -z,defs, which catches this "
                  "when it is built) (dlopen: %s)",
                  sym, sym, dlerr);
  const char *missing = strstr(dlerr, ": cannot open shared object file");
  if (missing) {
    int n = (int)(missing - dlerr);
    return reject(p,
                  "needs %.*s, which cannot be found: install it, or add its directory to "
                  "LD_LIBRARY_PATH (dlopen: %s)",
                  n, dlerr, dlerr);
  }
  return reject(p, "cannot be loaded: check it with `ldd -r` (dlopen: %s)", dlerr);
}

bool loader_add_name(loader_plugin *p, const char *name) {
  char **grown = realloc(p->names, (p->num_names + 1) * sizeof *grown);
  if (!grown) return false;
  p->names = grown;
  if (!(p->names[p->num_names] = strdup(name))) return false;
  p->num_names++;
  return true;
}

/* The file stem users would guess from the name: "libfoo.so" -> "foo". */
static bool add_stem_name(loader_plugin *p) {
  const char *base = strrchr(p->path, '/');
  base = base ? base + 1 : p->path;
  if (strncmp(base, "lib", 3) == 0 && base[3] != '\0') base += 3;
  size_t n = strlen(base);
  if (n > 3 && strcmp(base + n - 3, ".so") == 0) n -= 3;
  if (n == 0) return true;
  char *stem = strndup(base, n);
  if (!stem) return false;
  bool ok = true;
  for (size_t i = 0; i < p->num_names; i++)
    if (strcmp(p->names[i], stem) == 0) goto done;
  ok = loader_add_name(p, stem);
done:
  free(stem);
  return ok;
}

/* Reads the descriptor head, which never moves across ABI majors, so even a plugin this
 * host refuses can be listed with its name and version. */
static cnnb_status read_head(loader_plugin *p, const cnnb_plugin *d) {
  p->abi_major = d->abi_major;
  p->abi_minor = d->abi_minor;
  if (d->struct_size < HEAD_SIZE) return CNNB_OK;
  p->kind = d->kind;
  if (d->version) {
    free(p->version);
    p->version = strdup(d->version);
    if (!p->version) return CNNB_ENOMEM;
  }
  if (d->name && d->name[0] && !loader_add_name(p, d->name)) return CNNB_ENOMEM;
  return CNNB_OK;
}

static cnnb_status check_names(loader_plugin *p) {
  const cnnb_plugin *d = &p->desc;
  if (!d->name || !d->name[0])
    return reject(p, "has no name (descriptor .name is NULL or empty): set it with "
                     "CNNB_PLUGIN_HEAD()");
  /* From here on names[] holds what the plugin offers, nothing else. */
  for (size_t i = 0; i < p->num_names; i++) free(p->names[i]);
  p->num_names = 0;
  if (!d->offers) return loader_add_name(p, d->name) ? CNNB_OK : CNNB_ENOMEM;
  size_t i = 0;
  for (; d->offers[i] && i < MAX_OFFERS; i++) {
    if (!d->offers[i][0]) return reject(p, "offers an empty name (.offers[%zu]): remove it", i);
    bool seen = false;
    for (size_t j = 0; j < p->num_names; j++) seen |= strcmp(p->names[j], d->offers[i]) == 0;
    if (!seen && !loader_add_name(p, d->offers[i])) return CNNB_ENOMEM;
  }
  if (i == MAX_OFFERS)
    return reject(p, "offers %d names or more: is .offers missing its terminating NULL?",
                  MAX_OFFERS);
  if (i == 0)
    return reject(p, "offers no names (.offers is empty): list the names users pick it by, "
                     "then NULL");
  return CNNB_OK;
}

static cnnb_status check_vtable(loader_plugin *p, const kind_info *ki) {
  const char *kind = cnnb_kind_name(p->kind);
  const void *vt = p->desc.vtable;
  if (!vt)
    return reject(p,
                  "%s plugin without a vtable (descriptor .vtable is NULL): point .vtable "
                  "at its cnnb_%s_vtable",
                  kind, kind);
  uint32_t size = *(const uint32_t *)vt; /* every vtable starts with its struct_size */
  if (size < ki->vtable_size_1_0)
    return reject(p,
                  "its cnnb_%s_vtable is %u bytes, ABI %d.0 needs at least %zu: set "
                  ".struct_size = sizeof(cnnb_%s_vtable) and rebuild it against the %d.x SDK",
                  kind, size, CNNB_ABI_MAJOR, ki->vtable_size_1_0, kind, CNNB_ABI_MAJOR);
  size_t copy = size < ki->host_size ? size : ki->host_size;
  memset(&p->vtable, 0, sizeof p->vtable);
  memcpy(&p->vtable, vt, copy);
  memcpy(&p->vtable, &(uint32_t){(uint32_t)copy}, sizeof(uint32_t));
  p->desc.vtable = &p->vtable;
  for (const fn_field *f = ki->required; f->name; f++) {
    void (*fn)(void);
    memcpy(&fn, (const char *)&p->vtable + f->offset, sizeof fn);
    if (!fn)
      return reject(p,
                    "cnnb_%s_vtable.%s is NULL, but the SDK marks it [required] "
                    "(cnnb/%s.h): implement it, then rebuild the plugin",
                    kind, f->name, kind);
  }
  return CNNB_OK;
}

static cnnb_status check_descriptor(cnnb_loader *l, loader_plugin *p, const cnnb_plugin *d) {
  cnnb_status st = read_head(p, d);
  if (st != CNNB_OK) return st;
  if (d->abi_major != CNNB_ABI_MAJOR)
    return reject(p,
                  "built for cnnbench ABI %u.%u, this host speaks %d.x: rebuild it against "
                  "the %d.x SDK",
                  d->abi_major, d->abi_minor, CNNB_ABI_MAJOR, CNNB_ABI_MAJOR);
  if (d->struct_size < DESC_SIZE_1_0)
    return reject(p,
                  "its descriptor is %u bytes, ABI %d.0 needs at least %zu: fill it with "
                  "CNNB_PLUGIN_HEAD(), set its other fields, and rebuild it against the %d.x SDK",
                  d->struct_size, CNNB_ABI_MAJOR, DESC_SIZE_1_0, CNNB_ABI_MAJOR);
  memcpy(&p->desc, d, sizeof p->desc); /* d->struct_size >= sizeof: what the host knows */
  p->desc.struct_size = (uint32_t)sizeof p->desc;
  const kind_info *ki = kind_lookup(d->kind);
  if (!ki)
    return reject(p,
                  "declares kind %u, which this host does not know (1 model, 2 device, "
                  "3 strategy, 4 datasource): it may need a newer cnnbench",
                  d->kind);
  st = check_names(p);
  if (st != CNNB_OK || p->why) return st;
  st = check_vtable(p, ki);
  if (st != CNNB_OK || p->why) return st;
  if (d->abi_minor > CNNB_ABI_MINOR)
    cnnb_log(l->ctx, CNNB_LOG_INFO,
             "%s: built for cnnbench ABI %u.%u, newer than this host's %d.%d: loaded; what "
             "ABI %u.%u added to its descriptor and vtable is ignored",
             p->path, d->abi_major, d->abi_minor, CNNB_ABI_MAJOR, CNNB_ABI_MINOR, d->abi_major,
             d->abi_minor);
  return CNNB_OK;
}

static cnnb_status load(cnnb_loader *l, loader_plugin *p) {
  /* A path without '/' would make dlopen search the library path instead of the file. */
  char local[PATH_MAX];
  const char *open_path = p->path;
  if (!strchr(p->path, '/')) {
    snprintf(local, sizeof local, "./%s", p->path);
    open_path = local;
  }
  dlerror();
  void *handle;
  CNNB_GUARDED(p->path, "dlopen (its constructors)", NULL,
               handle = dlopen(open_path, RTLD_NOW | RTLD_LOCAL));
  if (!handle) return reject_dlopen(p, dlerror());
  dlerror();
  void *sym = dlsym(handle, CNNB_PLUGIN_ENTRY_SYMBOL);
  if (!sym) {
    dlclose(handle);
    return reject(p, "does not export " CNNB_PLUGIN_ENTRY_SYMBOL ": is it a cnnbench plugin? "
                     "build it with cnnb_add_plugin(), and define the entry with "
                     "CNNB_PLUGIN_ENTRY");
  }
  cnnb_plugin_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry); /* POSIX: object pointer to function pointer */
  const cnnb_plugin *d;
  CNNB_GUARDED(p->path, CNNB_PLUGIN_ENTRY_SYMBOL, NULL, d = entry(&host_info));
  cnnb_status st;
  if (!d)
    st = reject(p,
                CNNB_PLUGIN_ENTRY_SYMBOL
                " returned NULL: the plugin refused to load into "
                "this host (cnnbench %s, ABI %d.%d); rebuild it against this SDK, or see "
                "its documentation for what it needs",
                CNNB_VERSION_STRING, CNNB_ABI_MAJOR, CNNB_ABI_MINOR);
  else st = check_descriptor(l, p, d);
  if (st != CNNB_OK || p->why) {
    dlclose(handle);
    return st;
  }
  p->handle = handle;
  return CNNB_OK;
}

cnnb_status loader_load_file(cnnb_loader *l, loader_plugin *p) {
  cnnb_status st = load(l, p);
  if (st == CNNB_ENOMEM && !p->why) p->why = strdup("out of memory while loading it");
  if (p->why) {
    /* A rejected plugin's pointers into its (now closed) memory must not survive. */
    memset(&p->desc, 0, sizeof p->desc);
    memset(&p->vtable, 0, sizeof p->vtable);
    if (!add_stem_name(p)) st = CNNB_ENOMEM;
  }
  if (!p->version && !(p->version = strdup(""))) st = CNNB_ENOMEM;
  return st;
}
