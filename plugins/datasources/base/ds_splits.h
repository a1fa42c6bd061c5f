/* ds_splits.h — a datasource's splits, read into memory once per process and shared
 * read-only by every instance that reads the same one (replicas, the evaluation set).
 *
 * A split is known by a key the datasource makes (its files' path, and whether it is the
 * training split); the first instance to ask loads it through the datasource's loader,
 * the last to let go frees it. create and destroy run on the main thread (datasource.h),
 * but a process may hold several runs' hosts (tests), so the list is locked anyway: it
 * costs nothing. Each plugin links its own copy of this library, so plugins never share
 * a list. */
#ifndef DS_SPLITS_H
#define DS_SPLITS_H

#include <stddef.h>
#include <cnnb/cnnb.h>

/* Loads the split `arg` describes into a new *set: CNNB_OK, or a status with err (a
 * sentence naming the file at fault). */
typedef cnnb_status (*ds_split_load_fn)(const void *arg, void **set, char *err, size_t err_size);
typedef void (*ds_split_free_fn)(void *set);

typedef struct ds_split ds_split;

/* The split called `key`, loaded by load(arg) when no instance holds it yet; NULL with
 * *status and err when it cannot be. free_set frees it after the last release. */
ds_split *ds_split_acquire(const char *key, ds_split_load_fn load, ds_split_free_fn free_set,
                           const void *arg, cnnb_status *status, char *err, size_t err_size);
/* The loaded set, as load made it. */
const void *ds_split_set(const ds_split *split);
/* NULL is a no-op. */
void ds_split_release(ds_split *split);

#endif
