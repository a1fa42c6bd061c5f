/* loader_datasets.c — the host's dataset table behind cnnb/dataset.h: what every loaded
 * datasource describes through its describe_dataset slot, checked and numbered once
 * when its loader has discovered the plugins, and dropped with that loader.
 *
 * One table per process, as the SDK's lookups take no context; each entry remembers the
 * loader that added it. Filled and emptied on the main thread before and after a run;
 * read from any thread in between (dataset.h). */
#define _GNU_SOURCE /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/dataset.h>
#include <cnnb/datasource.h>
#include "base/crash_guard.h"
#include "loader/loader_impl.h"

/* Far above any real set of datasets; a plugin answering without end stops here. */
enum { MAX_DATASETS_PER_PLUGIN = 64, MAX_NAME = 64 };

typedef struct dataset_entry {
  const cnnb_loader *owner;
  cnnb_dataset_info info; /* host-sized copy: kind assigned, name owned */
  char *path;             /* the plugin file that described it */
} dataset_entry;

static dataset_entry *table; /* in kind order */
static size_t table_len, table_cap;

const cnnb_dataset_info *cnnb_dataset_at(uint32_t index) {
  return index < table_len ? &table[index].info : NULL;
}

const cnnb_dataset_info *cnnb_dataset_lookup(uint32_t kind) {
  for (size_t i = 0; i < table_len; i++)
    if (table[i].info.kind == kind) return &table[i].info;
  return NULL;
}

const cnnb_dataset_info *cnnb_dataset_find(const char *name) {
  for (size_t i = 0; name && i < table_len; i++)
    if (strcmp(table[i].info.name, name) == 0) return &table[i].info;
  return NULL;
}

static const dataset_entry *entry_of_kind(uint32_t kind) {
  for (size_t i = 0; i < table_len; i++)
    if (table[i].info.kind == kind) return &table[i];
  return NULL;
}

static const dataset_entry *entry_named(const char *name) {
  for (size_t i = 0; i < table_len; i++)
    if (strcmp(table[i].info.name, name) == 0) return &table[i];
  return NULL;
}

static bool valid_name(const char *name) {
  size_t n = 0;
  for (; name[n] && n <= MAX_NAME; n++)
    if (!((name[n] >= 'a' && name[n] <= 'z') || (name[n] >= '0' && name[n] <= '9') ||
          name[n] == '_'))
      return false;
  return n > 0 && n <= MAX_NAME;
}

/* What is wrong with description `d`, or NULL when the table can take it. */
static const char *problem(const cnnb_dataset_info *d, char *buf, size_t size) {
  if (d->struct_size < offsetof(cnnb_dataset_info, width) + sizeof d->width)
    return "its struct_size is smaller than a 1.13 cnnb_dataset_info";
  if (!d->name || !valid_name(d->name))
    return "its name is not 1 to 64 lower-case letters, digits or '_'";
  const dataset_entry *same_name = entry_named(d->name), *same_kind = entry_of_kind(d->kind);
  if (same_name) {
    snprintf(buf, size, "'%s' is already described by %s", d->name, same_name->path);
    return buf;
  }
  if (d->kind > CNNB_DATASET_PINNED_KINDS) {
    snprintf(buf, size, "'%s' pins kind %u, and only 1 to %d are pinned", d->name,
             (unsigned)d->kind, CNNB_DATASET_PINNED_KINDS);
    return buf;
  }
  if (d->kind && same_kind) {
    snprintf(buf, size, "'%s' pins kind %u, which %s gives '%s'", d->name, (unsigned)d->kind,
             same_kind->path, same_kind->info.name);
    return buf;
  }
  if (d->num_classes < 2 || d->channels < 1 || d->channels > 4 || d->train_examples < 0 ||
      d->eval_examples < 0 || d->height < 0 || d->width < 0 ||
      (d->height == 0) != (d->width == 0)) {
    snprintf(buf, size,
             "'%s' has %d classes, %d channels, %dx%d images, %lld / %lld examples: want at "
             "least 2 classes, 1 to 4 channels, both sides set or both 0, no negative count",
             d->name, (int)d->num_classes, (int)d->channels, (int)d->height, (int)d->width,
             (long long)d->train_examples, (long long)d->eval_examples);
    return buf;
  }
  return NULL;
}

/* The lowest kind above the pinned ones that no entry has. */
static uint32_t free_kind(void) {
  uint32_t kind = CNNB_DATASET_PINNED_KINDS + 1;
  while (entry_of_kind(kind)) kind++;
  return kind;
}

static cnnb_status insert(const cnnb_loader *owner, const cnnb_dataset_info *d, const char *path) {
  if (table_len == table_cap) {
    size_t cap = table_cap ? 2 * table_cap : 8;
    dataset_entry *grown = realloc(table, cap * sizeof *grown);
    if (!grown) return CNNB_ENOMEM;
    table = grown;
    table_cap = cap;
  }
  dataset_entry e = {.owner = owner, .path = strdup(path)};
  size_t size = d->struct_size < sizeof e.info ? d->struct_size : sizeof e.info;
  memcpy(&e.info, d, size);
  e.info.struct_size = sizeof e.info;
  e.info.kind = d->kind ? d->kind : free_kind();
  e.info.name = strdup(d->name);
  if (!e.path || !e.info.name) {
    free(e.path);
    free((char *)e.info.name);
    return CNNB_ENOMEM;
  }
  size_t at = table_len;
  while (at > 0 && table[at - 1].info.kind > e.info.kind) at--;
  memmove(&table[at + 1], &table[at], (table_len - at) * sizeof *table);
  table[at] = e;
  table_len++;
  return CNNB_OK;
}

static cnnb_status add_from(cnnb_loader *l, const loader_plugin *p) {
  const cnnb_datasource_vtable *vt = &p->vtable.datasource;
  if (!vt->describe_dataset) return CNNB_OK;
  for (uint32_t i = 0; i < MAX_DATASETS_PER_PLUGIN; i++) {
    const cnnb_dataset_info *d = NULL;
    CNNB_GUARDED(p->path, "describe_dataset", p->desc.name, d = vt->describe_dataset(i));
    if (!d) return CNNB_OK;
    char buf[512];
    const char *why = problem(d, buf, sizeof buf);
    if (why) {
      cnnb_log(l->ctx, CNNB_LOG_WARN, "%s: dataset %u not offered: %s", p->path, (unsigned)i, why);
      continue;
    }
    cnnb_status st = insert(l, d, p->path);
    if (st != CNNB_OK) return st;
  }
  cnnb_log(l->ctx, CNNB_LOG_WARN, "%s: describes more than %d datasets: the rest are ignored",
           p->path, MAX_DATASETS_PER_PLUGIN);
  return CNNB_OK;
}

cnnb_status loader_add_datasets(cnnb_loader *l) {
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (p->why || p->kind != CNNB_KIND_DATASOURCE) continue;
    cnnb_status st = add_from(l, p);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

void loader_drop_datasets(const cnnb_loader *l) {
  size_t kept = 0;
  for (size_t i = 0; i < table_len; i++) {
    if (table[i].owner == l) {
      free(table[i].path);
      free((char *)table[i].info.name);
    } else {
      table[kept++] = table[i];
    }
  }
  table_len = kept;
  if (table_len == 0) {
    free(table);
    table = NULL;
    table_cap = 0;
  }
}
