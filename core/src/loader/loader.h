/* loader.h — finding, loading and checking plugins, and resolving the names users pick
 * them by (--model=resnet50). Host-internal: the CLI and tests use it; plugins never see it.
 *
 * Discovery order (docs/architecture.md, "The plugin ABI"): the install's plugin directory, then
 * each directory of $CNNB_PLUGIN_PATH (colon list), then each --plugin=FILE. In a directory only
 * files named *.so are tried, in name order; --plugin takes any path. When two plugins of
 * one kind offer one name, the first found wins and the other is named in a warning.
 *
 * A plugin that fails a check (not a shared object, no entry symbol, ABI major differs,
 * descriptor or vtable too small, ...) is rejected with a message naming the file, what is
 * wrong and the fix. A discovered plugin's rejection is a warning and the run goes on
 * without it; an explicit --plugin=FILE's rejection makes cnnb_loader_discover() fail. A
 * user who names a rejected plugin (--model=foo) gets its rejection from cnnb_loader_find().
 *
 * The descriptor and vtable find() hands out are the host's own copies, sized as this
 * host's structs: fields the plugin did not know (it was built for an older minor) read
 * as zero/NULL, and what a newer-minor plugin appended is not there. Their struct_size is
 * the smaller of the plugin's and the host's, i.e. how much of the copy the plugin filled.
 *
 * Not thread-safe: one thread discovers and resolves before the run starts. Everything
 * returned stays valid until cnnb_loader_destroy(), which dlcloses the plugins. */
#ifndef CNNB_LOADER_H
#define CNNB_LOADER_H

#include <stdbool.h>
#include <stdio.h>
#include "flags/flags.h"

typedef struct cnnb_loader cnnb_loader;

/* NULL only when out of memory. Its warnings log as `parent`'s family does (its level;
 * parent NULL: the defaults). */
cnnb_loader *cnnb_loader_create(const cnnb_ctx *parent);
void cnnb_loader_destroy(cnnb_loader *l);

/* Replaces the install's plugin directory for this loader (tests; NULL: none). By default
 * it is <dir of libcnnb>/cnnbench/plugins, so the build tree (<build>/lib) and any install
 * prefix, even one moved after installing, find their own plugins; when libcnnb's own path
 * cannot be found it is the configured CNNB_INSTALL_PLUGIN_DIR. Call before discover. */
cnnb_status cnnb_loader_set_install_dir(cnnb_loader *l, const char *dir);
/* The install's plugin directory this loader searches first (NULL: none). */
const char *cnnb_loader_install_dir(const cnnb_loader *l);

/* Loads every plugin in discovery order. `explicit_files` is the ':'-joined --plugin list
 * (NULL or "" for none). Rejections of discovered plugins are logged as warnings (through
 * a ctx named "loader"). Returns CNNB_OK, or when an explicit file was rejected,
 * CNNB_EINVAL with "FILE: why" in err (one line per rejected explicit file); the loader
 * still holds everything found, so --list_plugins can show it. Call once. */
cnnb_status cnnb_loader_discover(cnnb_loader *l, const char *explicit_files, char *err,
                                 size_t err_size);

/* The user's choice for one kind: `name` as given to the kind's flag (see
 * cnnb_loader_kind_flag). On CNNB_OK, *out is the plugin's descriptor (host copy) and
 * *path its file (either pointer may be NULL). Otherwise err holds a message that starts
 * with "--<flag>=<name>: ", and the status is
 *  - CNNB_ENOTFOUND: nothing offers the name; lists the names of that kind (and "did you
 *    mean" when one is close);
 *  - CNNB_EINVAL: only a plugin of another kind offers it ("'independent' is a strategy
 *    plugin (FILE), not a model"), or the plugin that offers it was rejected (with why);
 *  - CNNB_EUNSUPPORTED: a model nothing offers that is one of tf_cnn_benchmarks' models
 *    of another task than image classification (ssd300, ...: not_classification.h). */
cnnb_status cnnb_loader_find(cnnb_loader *l, uint32_t kind, const char *name,
                             const cnnb_plugin **out, const char **path, char *err,
                             size_t err_size);

/* Lets each accepted plugin declare its flags (register_flags), grouped under the
 * plugin's name. A refusal is logged as a warning naming the plugin; the rest go on. */
void cnnb_loader_register_flags(cnnb_loader *l, cnnb_flags *flags);

/* --list_plugins: the accepted plugins (kind, names, version, ABI, file) in aligned
 * columns, then a "Rejected" section with each file and why. */
void cnnb_loader_print(const cnnb_loader *l, FILE *out);
/* `--list_plugins --list_format=json`: the same facts as one JSON object for tools
 * (cnnbench-tune asks it what to search), with every flag of `flags` — the core's, and
 * each plugin's under its plugin — by type, default and allowed values. CNNB_ENOMEM, or
 * CNNB_EIO when `out` failed. */
cnnb_status cnnb_loader_print_json(const cnnb_loader *l, const cnnb_flags *flags, FILE *out);

/* The names users can pick for `kind`, in discovery order. Fills up to `max` entries and
 * returns how many there are in all. */
size_t cnnb_loader_names(const cnnb_loader *l, uint32_t kind, const char **names, size_t max);

/* Plugins accepted and rejected so far. */
size_t cnnb_loader_num_accepted(const cnnb_loader *l);
size_t cnnb_loader_num_rejected(const cnnb_loader *l);
/* The index-th rejection (in discovery order): its file and why (without the file name).
 * False when there is no such rejection. */
bool cnnb_loader_rejection(const cnnb_loader *l, size_t index, const char **path, const char **why);

/* The vtable slots of `kind` the loader refuses to see NULL (the SDK tags them
 * [required]), in vtable order. Fills up to `max` names and returns how many there are. */
size_t cnnb_loader_required_slots(uint32_t kind, const char **names, size_t max);

/* The flag users pick a plugin of `kind` with, without dashes: "model", "device",
 * "variable_update" (strategies, tf_cnn_benchmarks' name), "datasource". */
const char *cnnb_loader_kind_flag(uint32_t kind);

#endif
