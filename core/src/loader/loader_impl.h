/* loader_impl.h — what the loader's files share: the record kept for each plugin file
 * (accepted or rejected), the loader itself, and the steps each file implements.
 * Core-private: only core/src/loader*.c include it. */
#ifndef CNNB_LOADER_IMPL_H
#define CNNB_LOADER_IMPL_H

#include <stdbool.h>
#include <sys/types.h>
#include "loader/loader.h"

/* One plugin file. Every string here is owned by the record; desc's strings and offers
 * point into the plugin's memory and stay valid while `handle` is open. */
typedef struct loader_plugin {
  char *path;       /* as the user sees it: dir/file.so, or --plugin's argument */
  bool is_explicit; /* given with --plugin=FILE */
  dev_t dev;        /* file identity, so one file reached twice loads once */
  ino_t ino;
  bool have_identity;

  /* Accepted: why == NULL, handle open, desc/vtable filled. */
  void *handle;
  cnnb_plugin desc; /* host-sized copy; desc.vtable points at `vtable` */
  union {
    cnnb_model_vtable model;
    cnnb_device_vtable device;
    cnnb_strategy_vtable strategy;
    cnnb_datasource_vtable datasource;
  } vtable;
  uint32_t abi_major, abi_minor; /* as the plugin declared them (0.0 when unreadable) */
  uint32_t kind;                 /* 0 when unknown (rejected before the descriptor was read) */
  char *version;                 /* copy, "" when unknown */

  /* Names: what it offers users (accepted: only those not shadowed by an earlier plugin);
   * for a rejected plugin, the names it would have offered, so find() can say why. */
  char **names;
  size_t num_names;

  /* Rejected: why != NULL ("does not export cnnb_plugin_entry: ..."), handle closed. */
  char *why;
} loader_plugin;

struct cnnb_loader {
  cnnb_ctx *ctx;           /* "loader": warnings and info lines */
  char *install_dir;       /* NULL: none */
  loader_plugin **plugins; /* discovery order; pointers stay put (find hands out &desc) */
  size_t num_plugins, cap_plugins;
};

/* loader_load.c: loads and checks one file into `p` (path, is_explicit already set). On
 * return either p->why is NULL (accepted) or it says why the file was rejected. Returns
 * CNNB_ENOMEM only when out of memory, CNNB_OK otherwise. */
cnnb_status loader_load_file(cnnb_loader *l, loader_plugin *p);

/* loader_elf.c: NULL when `path` looks like a shared object this host can load;
 * otherwise writes a plain-words reason ("not a shared object (no ELF header)",
 * "truncated or corrupt ELF file (...)") into buf and returns buf. */
const char *loader_elf_problem(const char *path, char *buf, size_t size);

/* loader_load.c: appends a copy of `name` to p->names; false when out of memory. */
bool loader_add_name(loader_plugin *p, const char *name);

/* loader_datasets.c: adds what each accepted datasource describes to the dataset table
 * (cnnb/dataset.h), warning about and skipping a description it cannot take; called once
 * discovery is done. CNNB_ENOMEM or CNNB_OK. */
cnnb_status loader_add_datasets(cnnb_loader *l);
/* loader_datasets.c: takes what `l` added out of the table (before its plugins close). */
void loader_drop_datasets(const cnnb_loader *l);

/* loader.c: frees a record and what it holds (closing its handle). */
void loader_plugin_free(loader_plugin *p);

#endif
