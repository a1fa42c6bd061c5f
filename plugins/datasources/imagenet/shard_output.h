/* shard_output.h — cnnbench-mkrecords' output directory, changed whole or not at all.
 * A set of shards is one thing to a reader (shard_set.h: every name claims the count),
 * so the converter never leaves part of one: the shards are written under temporary
 * names that no reader takes for a shard (".<name>-00000-of-00004.tmp-<pid>": hidden,
 * and not "<name>-*-of-*"), and only when every one is complete are they renamed into
 * place. A directory already holding shards of the name is refused unless the caller
 * asked to overwrite; then the new set replaces the old one, whose other shards are
 * removed, so no mix of two counts is left behind. */
#ifndef IMAGENET_SHARD_OUTPUT_H
#define IMAGENET_SHARD_OUTPUT_H

#include <stddef.h>

typedef struct shard_output {
  char *dir, *name;
  long num_shards;
  char **final, **temp; /* [num_shards]: the shard's name in dir, and its temporary name */
  char **old;           /* the shards of the name already in dir (full paths) */
  size_t num_old;
  int made_dir; /* dir did not exist: this run made it, and a failure removes it */
} shard_output;

enum { SHARD_OUTPUT_REFUSED = 2, SHARD_OUTPUT_FAILED = 1 };

/* Readies dir for num_shards shards named "<name>-%05ld-of-%05ld": 0; or
 * SHARD_OUTPUT_REFUSED when dir holds shards of the name (names as shard_set_parse_name
 * reads them) and !overwrite, or one of them is a directory; or SHARD_OUTPUT_FAILED when
 * dir cannot be listed or made. err names the directory and the reason (or the first
 * few shards found and the flag). Creates dir when missing; nothing else is written. */
int shard_output_open(shard_output *o, const char *dir, const char *name, long num_shards,
                      int overwrite, char *err, size_t err_size);

/* Renames every temporary into place over any same-named file, removes the old shards
 * the new set does not replace, and syncs dir so the renames last: 0, or -1 with err.
 * Call once every temporary is written, closed and synced. */
int shard_output_commit(shard_output *o, char *err, size_t err_size);

/* A failed run: removes every temporary (written or not), and dir when this run made
 * it, so dir is as it was found. The old shards are untouched. */
void shard_output_abandon(shard_output *o);

void shard_output_free(shard_output *o);

#endif
