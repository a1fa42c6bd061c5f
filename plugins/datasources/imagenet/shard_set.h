/* shard_set.h — whether a split's TFRecord files are a whole set. TensorFlow's converters
 * name shard i of n "<subset>-%05d-of-%05d" (train-00003-of-01024): the names say how
 * many shards there must be, so a deleted shard, or shards renamed to claim a count they
 * do not have, can be told before a single step trains on part of the data. */
#ifndef IMAGENET_SHARD_SET_H
#define IMAGENET_SHARD_SET_H

#include <stddef.h>

/* files[0, *count): full paths of the split's files matching "<subset>-*-of-*", sorted.
 * Files whose name is not "<subset>-<digits>-of-<digits>" (a converter's leftover
 * ".tmp", say) are no shard: they are dropped from the list (freed, *count shrinks) and
 * named in `warning`. A set with a shard missing or an index not below the count is
 * refused: -1 with err naming the missing shards (the first few and how many) and the
 * flag that reads the rest anyway; with allow_missing, 0 and the same words in
 * `warning`. Names disagreeing on the count are several sets, refused even with
 * allow_missing (reading them all would count examples once per set): -1 with err naming
 * each count and its number of files. warning is "" when there is nothing to say. */
int shard_set_check(const char *dir, const char *subset, char **files, size_t *count,
                    int allow_missing, char *warning, size_t warning_size, char *err,
                    size_t err_size);

/* "<subset>-<index>-of-<total>" exactly, both numbers of 1 to 9 digits: 0 with both, else
 * -1. The names shard_set_check reads as shards, and those cnnbench-mkrecords will not
 * replace unless told --overwrite. */
int shard_set_parse_name(const char *name, const char *subset, long *index, long *total);

/* The flag that accepts an incomplete set (the imagenet plugin's), for messages. */
#define SHARD_SET_ALLOW_FLAG "allow_missing_shards"

#endif
