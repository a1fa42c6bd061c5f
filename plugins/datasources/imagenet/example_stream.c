/* example_stream.c — the reader's side of the pipeline (example_stream.h). */
#define _POSIX_C_SOURCE 200809L
#include "example_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "prep_rng.h"
#include <tfrecord/tfrecord.h>

/* What one pass over a TFRecord file gives the stream, counted from its record headers
 * (stream_skip): its records up to a damaged header, and the damage as one bad item. */
typedef struct file_items {
  int64_t records;
  int corrupt;
} file_items;

/* A TFRecord file being read: one slot of the interleave. */
typedef struct open_file {
  tfrecord_reader *reader; /* NULL: the slot is free */
  const char *path;
  size_t file;     /* its index in the layout */
  int64_t records; /* records of it read (or skipped) so far */
} open_file;

/* A whole file's bytes, kept (--datasets_use_caching). */
typedef struct cached_bytes {
  uint8_t *bytes;
  size_t size;
  int loaded;
} cached_bytes;

/* The source: this shard's examples in epoch order, before the shuffle buffer. */
struct example_stream {
  stream_config cfg;
  int64_t epoch;
  size_t *order;   /* this epoch's permutation of files (TFRecord) or images */
  size_t count;    /* entries in order */
  size_t position; /* next entry of order this shard visits */
  int64_t yielded_this_epoch;
  int64_t visited_this_epoch; /* entries visited this epoch, readable or not */
  /* TFRecord: the files open at once (cfg.interleave of them, a record from each in
   * turn) and the record index over the epoch (record sharding). */
  open_file *open;
  int32_t num_open;    /* slots of open: cfg.interleave, at least 1 */
  int32_t turn;        /* the slot whose record comes next */
  int64_t *file_first; /* [files] each file's first record in the split (counted) */
  cached_bytes *cache; /* cfg.cache: [files] or [images], each kept once read */
  size_t cached_bytes; /* held in cache */
  stream_item sample;  /* cfg.repeat_first: the example repeated, once read */
  int have_sample;
  int record_sharding;
  int64_t record_index;
  file_items *file_items; /* [number of files], counted by the first stream_skip */
  /* Shuffle buffer (training, TFRecord). */
  stream_item *buffer;
  int64_t buffer_size, buffer_filled;
  prep_rng rng;
  int draining;                 /* the epoch ended: empty the buffer before the next one */
  stream_item next_epoch_first; /* meanwhile, the next epoch's first example */
  int failed_io;                /* the last failure was I/O or memory (stream_failed_io) */
};

/* A failure of the machine, not of the data (stream_failed_io): -1, remembered. */
static int io_failure(example_stream *s) {
  s->failed_io = 1;
  return -1;
}

void stream_item_free(stream_item *item) {
  free(item->data);
  memset(item, 0, sizeof *item);
}

static int reserve(stream_item *item, size_t size) {
  if (size <= item->capacity) return 0;
  size_t capacity = item->capacity ? item->capacity : 1 << 16;
  while (capacity < size) capacity *= 2;
  uint8_t *grown = realloc(item->data, capacity);
  if (!grown) return -1;
  item->data = grown;
  item->capacity = capacity;
  return 0;
}

/* Hands out the item as bad, saying why. */
static int bad_item(stream_item *item, const char *what, const char *detail) {
  item->bad = 1;
  item->size = 0;
  item->num_boxes = 0;
  snprintf(item->why, sizeof item->why, "%s%s", what, detail);
  return 0;
}

/* Orders the epoch: identical on every shard (the seed and the epoch only), shuffled only
 * for training. */
static void start_epoch(example_stream *s) {
  for (size_t i = 0; i < s->count; i++) s->order[i] = i;
  if (s->cfg.shuffle) {
    prep_rng order = prep_rng_stream(s->cfg.seed, (uint64_t)s->epoch);
    for (size_t i = s->count; i > 1; i--) {
      size_t j = (size_t)(prep_rng_next(&order) % i);
      size_t t = s->order[i - 1];
      s->order[i - 1] = s->order[j];
      s->order[j] = t;
    }
  }
  s->position = s->record_sharding ? 0 : (size_t)s->cfg.shard;
  s->turn = 0;
  s->record_index = 0;
  s->yielded_this_epoch = 0;
  s->visited_this_epoch = 0;
}

static int end_epoch(example_stream *s, char *err, size_t err_size) {
  if (s->yielded_this_epoch == 0) {
    snprintf(err, err_size,
             "%s: a whole epoch of shard %d of %d gave no example (%lld records or files visited)",
             s->cfg.layout->where, (int)s->cfg.shard, (int)s->cfg.num_shards,
             (long long)s->visited_this_epoch);
    return -1;
  }
  s->epoch++;
  start_epoch(s);
  return 0;
}

static int check_label(example_stream *s, int64_t label, const char *origin, char *err,
                       size_t err_size) {
  if (label >= 0 && label < s->cfg.num_classes) return 0;
  snprintf(err, err_size,
           "%s: label %lld is outside the model's %d classes (--num_classes; "
           "ImageNet shards store 1..1000 for 1001 classes)",
           origin, (long long)label, (int)s->cfg.num_classes);
  return -1;
}

/* --datasets_use_caching: a copy of bytes kept as c. 0, or -1 with err (out of memory:
 * the cache holds every file read, and this one did not fit). */
static int keep(example_stream *s, cached_bytes *c, const uint8_t *bytes, size_t size,
                const char *path, char *err, size_t err_size) {
  if (!(c->bytes = malloc(size ? size : 1))) {
    snprintf(err, err_size,
             "%s: out of memory for its %zu bytes in --datasets_use_caching's cache (%zu bytes "
             "held already: the data does not fit in memory; run without the flag)",
             path, size, s->cached_bytes);
    return io_failure(s);
  }
  memcpy(c->bytes, bytes, size);
  c->size = size;
  c->loaded = 1;
  s->cached_bytes += size;
  return 0;
}

/* A TFRecord file read whole into c (--datasets_use_caching). 0, or -1 with err. */
static int load_file(example_stream *s, cached_bytes *c, const char *path, char *err,
                     size_t err_size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_size, "%s: %s", path, strerror(errno));
    return io_failure(s);
  }
  uint8_t *bytes = NULL;
  size_t size = 0, cap = 0;
  for (;;) {
    if (size == cap) {
      size_t grown = cap ? 2 * cap : 1 << 20;
      uint8_t *p = realloc(bytes, grown);
      if (!p) {
        free(bytes);
        fclose(f);
        snprintf(err, err_size,
                 "%s: out of memory reading it into --datasets_use_caching's "
                 "cache (%zu bytes held already: run without the flag)",
                 path, s->cached_bytes);
        return io_failure(s);
      }
      bytes = p;
      cap = grown;
    }
    size_t got = fread(bytes + size, 1, cap - size, f);
    size += got;
    if (got == 0) break;
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    free(bytes);
    snprintf(err, err_size, "%s: read error", path);
    return io_failure(s);
  }
  c->bytes = bytes;
  c->size = size;
  c->loaded = 1;
  s->cached_bytes += size;
  return 0;
}

/* item NULL (stream_skip): the same walk, reading nothing. */
static int next_folder_example(example_stream *s, stream_item *item, char *err, size_t err_size) {
  const image_folder *folder = &s->cfg.layout->folder;
  for (;;) {
    if (s->position >= s->count && end_epoch(s, err, err_size) != 0) return -1;
    size_t index = s->order[s->position];
    s->position += (size_t)s->cfg.num_shards;
    s->visited_this_epoch++;
    if (!item) return 0;
    const char *path = folder->paths[index];
    snprintf(item->origin, sizeof item->origin, "%s", path);
    item->label = folder->labels[index];
    item->unit = (int64_t)index;
    if (s->cache && s->cache[index].loaded) { /* read once already: from memory */
      const cached_bytes *c = &s->cache[index];
      if (reserve(item, c->size + 1) != 0) {
        snprintf(err, err_size, "%s: out of memory for %zu bytes", path, c->size);
        return io_failure(s);
      }
      memcpy(item->data, c->bytes, c->size);
      item->bad = 0;
      item->size = c->size;
      item->num_boxes = 0;
      return check_label(s, item->label, path, err, err_size);
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
      /* A file this process may not read, or one gone since the listing, is an unreadable
       * example like a corrupt one; running out of descriptors or memory is no property
       * of the file. */
      int e = errno;
      if (e == EMFILE || e == ENFILE || e == ENOMEM || e == EINTR) {
        snprintf(err, err_size, "%s: %s", path, strerror(e));
        return io_failure(s);
      }
      return bad_item(item, "cannot be opened: ", strerror(e));
    }
    int rc = fseek(f, 0, SEEK_END);
    long size = rc == 0 ? ftell(f) : -1;
    rc = size >= 0 ? fseek(f, 0, SEEK_SET) : -1;
    if (rc == 0 && reserve(item, (size_t)size + 1) != 0) {
      fclose(f);
      snprintf(err, err_size, "%s: out of memory for %ld bytes", path, size);
      return io_failure(s);
    }
    size_t got = rc == 0 ? fread(item->data, 1, (size_t)size, f) : 0;
    int read_error = rc != 0 || ferror(f) || got != (size_t)size;
    fclose(f);
    if (read_error) {
      snprintf(err, err_size, "%s: read error", path);
      return io_failure(s);
    }
    if (size == 0) return bad_item(item, "empty file", "");
    item->bad = 0;
    item->size = (size_t)size;
    item->num_boxes = 0;
    if (check_label(s, item->label, path, err, err_size) != 0) return -1;
    if (s->cache && keep(s, &s->cache[index], item->data, item->size, path, err, err_size) != 0)
      return -1;
    return 0;
  }
}

/* Opens layout file `file` in slot f: from the cache (read whole the first time) under
 * --datasets_use_caching, else from the disk. An unreadable shard is not bad data: -1. */
static int open_file_at(example_stream *s, open_file *f, size_t file, char *err, size_t err_size) {
  const char *path = s->cfg.layout->files[file];
  tfrecord_result r;
  if (s->cache) {
    cached_bytes *c = &s->cache[file];
    if (!c->loaded && load_file(s, c, path, err, err_size) != 0) return -1;
    r = tfrecord_open_memory(path, c->bytes, c->size, &f->reader, err, err_size);
  } else {
    r = tfrecord_open(path, &f->reader, err, err_size);
  }
  if (r != TFRECORD_OK) return io_failure(s);
  f->path = path;
  f->file = file;
  f->records = 0;
  return 0;
}

static void close_slot(open_file *f) {
  tfrecord_close(f->reader);
  f->reader = NULL;
}

/* The reader's message without the file name it starts with (the item's origin has it). */
static const char *without_path(const char *why, const char *path) {
  size_t n = strlen(path);
  return strncmp(why, path, n) == 0 && strncmp(why + n, ": ", 2) == 0 ? why + n + 2 : why;
}

/* The item for a file whose framing is lost at `offset`: what cannot be read of it. */
static int lost_framing(example_stream *s, const open_file *f, stream_item *item, uint64_t offset,
                        const char *why) {
  uint64_t size = tfrecord_file_size(f->reader);
  uint64_t lost = size > offset ? size - offset : 0;
  int64_t before = f->records;
  item->lost_bytes = lost;
  item->lost_records = before > 0 ? (int64_t)((lost * (uint64_t)before + offset / 2) / offset) : -1;
  if (item->lost_records == 0 && lost > 0) item->lost_records = 1;
  item->unit = s->file_first ? s->cfg.layout->examples + (int64_t)f->file : (int64_t)f->file;
  snprintf(item->origin, sizeof item->origin, "%s", f->path);
  bad_item(item, "", "");
  if (before > 0)
    snprintf(item->why, sizeof item->why,
             "%s: framing lost, the rest of the file is not read: %llu of its %llu bytes "
             "(about %lld records at the average size of the %lld before)",
             without_path(why, f->path), (unsigned long long)lost, (unsigned long long)size,
             (long long)item->lost_records, (long long)before);
  else
    snprintf(item->why, sizeof item->why,
             "%s: framing lost, the rest of the file is not read: %llu of its %llu bytes",
             without_path(why, f->path), (unsigned long long)lost, (unsigned long long)size);
  return 0;
}

/* The next record of the interleave: slot `turn`'s file (a free slot takes the epoch's
 * next file; one with none left is passed over), then the next slot's, as tf.data's
 * parallel_interleave with block length 1 (deterministic). The epoch ends when every slot
 * is empty and no file is left. item NULL (stream_skip): the same walk over record
 * headers only (no data, no CRC of it, no tf.Example parsed). */
static int next_record_example(example_stream *s, stream_item *item, char *err, size_t err_size) {
  size_t step = s->record_sharding ? 1 : (size_t)s->cfg.num_shards;
  for (;;) {
    open_file *f = &s->open[s->turn];
    if (!f->reader) {
      if (s->position < s->count) {
        size_t file = s->order[s->position];
        s->position += step;
        if (open_file_at(s, f, file, err, err_size) != 0) return -1;
      } else {
        int busy = 0;
        for (int32_t k = 0; k < s->num_open; k++) busy |= s->open[k].reader != NULL;
        if (!busy && end_epoch(s, err, err_size) != 0) return -1;
        if (busy) s->turn = (s->turn + 1) % s->num_open;
        continue;
      }
    }
    const uint8_t *data = NULL;
    size_t size = 0;
    char why[512];
    uint64_t offset = tfrecord_offset(f->reader);
    tfrecord_result r = item ? tfrecord_next(f->reader, &data, &size, why, sizeof why)
                             : tfrecord_skip(f->reader, why, sizeof why);
    if (r == TFRECORD_CORRUPT) {
      /* Framing is lost: the rest of the file is unreachable, one bad item. */
      s->visited_this_epoch++;
      int rc = item ? lost_framing(s, f, item, offset, why) : 0;
      close_slot(f);
      return rc;
    }
    if (r == TFRECORD_END) { /* the slot takes the next file, in its own turn */
      close_slot(f);
      continue;
    }
    if (r != TFRECORD_OK && r != TFRECORD_BAD_DATA) { /* TFRECORD_IO: a read error */
      snprintf(err, err_size, "%s", why);
      return io_failure(s);
    }
    s->turn = (s->turn + 1) % s->num_open;
    int64_t index = s->record_index++;
    int64_t in_file = f->records++;
    if (s->record_sharding && index % s->cfg.num_shards != s->cfg.shard) continue;
    s->visited_this_epoch++;
    if (!item) return 0;
    snprintf(item->origin, sizeof item->origin, "%s, record at byte %llu", f->path,
             (unsigned long long)offset);
    item->unit = s->file_first ? s->file_first[f->file] + in_file : (int64_t)f->file;
    /* Its length's CRC held: this record alone is lost, the next one is read. */
    if (r == TFRECORD_BAD_DATA) {
      snprintf(item->origin, sizeof item->origin, "%s", f->path); /* why has the byte */
      return bad_item(item, "", without_path(why, f->path));
    }
    example_view view;
    if (example_parse(data, size, &view, why, sizeof why) != 0)
      return bad_item(item, "not a tf.Example: ", why);
    if (!view.has_label) {
      snprintf(err, err_size, "%s: the tf.Example has no image/class/label", item->origin);
      return -1;
    }
    if (check_label(s, view.label, item->origin, err, err_size) != 0) return -1;
    if (reserve(item, view.image_size + 1) != 0) {
      snprintf(err, err_size, "%s: out of memory for %zu bytes", item->origin, view.image_size);
      return io_failure(s);
    }
    memcpy(item->data, view.image, view.image_size);
    item->size = view.image_size;
    item->label = (int32_t)view.label;
    item->num_boxes = view.num_boxes;
    item->bad = 0;
    memcpy(item->boxes, view.boxes, (size_t)view.num_boxes * sizeof *view.boxes);
    return 0;
  }
}

static int next_source_example(example_stream *s, stream_item *item, char *err, size_t err_size) {
  if (item) {
    item->unit = -1;
    item->lost_bytes = 0;
    item->lost_records = 0;
  }
  int rc = s->cfg.layout->kind == LAYOUT_FOLDER ? next_folder_example(s, item, err, err_size)
                                                : next_record_example(s, item, err, err_size);
  if (rc == 0) s->yielded_this_epoch++;
  if (rc == 0 && item) item->epoch = s->epoch;
  return rc;
}

static void swap_items(stream_item *a, stream_item *b) {
  stream_item t = *a;
  *a = *b;
  *b = t;
}

static int next_shuffled(example_stream *s, stream_item *item, char *err, size_t err_size) {
  if (!s->buffer) return next_source_example(s, item, err, err_size);
  /* tf.data's shuffle(buffer).repeat(): a random element of the buffer goes out and the
   * next example takes its place; epochs do not mix, so at an epoch's end the buffer
   * drains before the next epoch's first example (held aside) goes in. Items swap their
   * storage, so nothing is copied. */
  for (;;) {
    while (!s->draining && s->buffer_filled < s->buffer_size) {
      int64_t epoch = s->epoch;
      stream_item *slot = &s->buffer[s->buffer_filled];
      if (next_source_example(s, slot, err, err_size) != 0) return -1;
      if (s->epoch != epoch && s->buffer_filled > 0) {
        swap_items(slot, &s->next_epoch_first);
        s->draining = 1;
        break;
      }
      s->buffer_filled++;
    }
    if (s->buffer_filled > 0) {
      int64_t j = (int64_t)(prep_rng_next(&s->rng) % (uint64_t)s->buffer_filled);
      swap_items(item, &s->buffer[j]);
      /* Keep the filled part dense: the last element moves into the hole. */
      swap_items(&s->buffer[j], &s->buffer[s->buffer_filled - 1]);
      s->buffer_filled--;
      return 0;
    }
    s->draining = 0;
    swap_items(&s->buffer[0], &s->next_epoch_first);
    s->buffer_filled = 1;
  }
}

/* dst becomes a copy of src, in dst's own storage. 0, or -1 when out of memory. */
static int copy_item(stream_item *dst, const stream_item *src) {
  if (reserve(dst, src->size + 1) != 0) return -1;
  uint8_t *data = dst->data;
  size_t capacity = dst->capacity;
  *dst = *src;
  dst->data = data;
  dst->capacity = capacity;
  memcpy(dst->data, src->data, src->size);
  return 0;
}

int stream_next(example_stream *s, stream_item *item, char *err, size_t err_size) {
  if (s->have_sample) { /* --datasets_repeat_cached_sample */
    if (copy_item(item, &s->sample) == 0) return 0;
    snprintf(err, err_size, "%s: out of memory for %zu bytes", s->sample.origin, s->sample.size);
    return io_failure(s);
  }
  int rc = next_shuffled(s, item, err, err_size);
  if (rc == 0 && s->cfg.repeat_first && !item->bad) {
    if (copy_item(&s->sample, item) != 0) {
      snprintf(err, err_size, "%s: out of memory for %zu bytes", item->origin, item->size);
      return io_failure(s);
    }
    s->have_sample = 1;
  }
  return rc;
}

/* ---- stream_skip ------------------------------------------------------------------- */

/* Each TFRecord file's items, once: a header read per record, no data. */
static int count_file_items(example_stream *s, char *err, size_t err_size) {
  if (s->file_items) return 0;
  const dataset_layout *layout = s->cfg.layout;
  s->file_items = calloc(layout->num_files ? layout->num_files : 1, sizeof *s->file_items);
  if (!s->file_items) {
    snprintf(err, err_size, "out of memory counting the records of %zu files", layout->num_files);
    return io_failure(s);
  }
  for (size_t i = 0; i < layout->num_files; i++) {
    tfrecord_reader *reader;
    char why[512];
    if (tfrecord_open(layout->files[i], &reader, err, err_size) != TFRECORD_OK)
      return io_failure(s);
    tfrecord_result r;
    while ((r = tfrecord_skip(reader, why, sizeof why)) == TFRECORD_OK) s->file_items[i].records++;
    tfrecord_close(reader);
    if (r == TFRECORD_IO) {
      snprintf(err, err_size, "%s", why);
      return io_failure(s);
    }
    s->file_items[i].corrupt = r == TFRECORD_CORRUPT;
  }
  return 0;
}

/* Whether every epoch of this shard holds as many items (its files do not change). */
static int epochs_alike(const example_stream *s) {
  return s->cfg.layout->kind == LAYOUT_FOLDER || s->record_sharding || s->cfg.num_shards == 1 ||
         !s->cfg.shuffle;
}

/* Items this shard's current epoch (s->order) yields, bad ones included, as stream_next
 * would walk them. */
static int64_t epoch_items(const example_stream *s) {
  int64_t shards = s->cfg.num_shards, shard = s->cfg.shard;
  if (s->cfg.layout->kind == LAYOUT_FOLDER)
    return ((int64_t)s->count - shard + shards - 1) / shards;
  int64_t items = 0;
  if (s->record_sharding) {
    /* Records are dealt round-robin over the epoch; a damaged file is every shard's. */
    int64_t records = 0;
    for (size_t i = 0; i < s->count; i++) {
      records += s->file_items[i].records;
      items += s->file_items[i].corrupt;
    }
    return items + (records > shard ? (records - shard + shards - 1) / shards : 0);
  }
  for (size_t i = (size_t)shard; i < s->count; i += (size_t)shards)
    items += s->file_items[s->order[i]].records + s->file_items[s->order[i]].corrupt;
  return items;
}

static int empty_epoch(const example_stream *s, char *err, size_t err_size) {
  snprintf(err, err_size, "%s: epoch %lld of shard %d of %d holds no example", s->cfg.layout->where,
           (long long)s->epoch, (int)s->cfg.shard, (int)s->cfg.num_shards);
  return -1;
}

typedef struct held_item {
  int64_t position; /* in the epoch's source order */
  int64_t slot;     /* in the buffer */
} held_item;

static int by_position(const void *a, const void *b) {
  int64_t x = ((const held_item *)a)->position, y = ((const held_item *)b)->position;
  return (x > y) - (x < y);
}

/* `count` (< epoch_size) outputs into the current epoch through the shuffle buffer, which
 * starts the epoch empty: stream_next's draws replayed on source positions, then the
 * source walked once, reading into the buffer only what it still holds. */
static int skip_in_buffer(example_stream *s, int64_t count, int64_t epoch_size, char *err,
                          size_t err_size) {
  held_item *held = malloc((size_t)s->buffer_size * sizeof *held);
  if (!held) {
    snprintf(err, err_size, "out of memory replaying a shuffle buffer of %lld",
             (long long)s->buffer_size);
    return -1;
  }
  int64_t filled = 0, fetched = 0;
  int draining = 0;
  for (int64_t out = 0; out < count; out++) {
    while (!draining && filled < s->buffer_size) {
      /* stream_next would fetch the next epoch's first example and start draining. */
      if (fetched == epoch_size) {
        draining = 1;
        break;
      }
      held[filled] = (held_item){.position = fetched++, .slot = filled};
      filled++;
    }
    int64_t j = (int64_t)(prep_rng_next(&s->rng) % (uint64_t)filled);
    held[j].position = held[filled - 1].position;
    filled--;
  }
  qsort(held, (size_t)filled, sizeof *held, by_position);
  int rc = 0;
  for (int64_t p = 0, k = 0; rc == 0 && p < fetched; p++) {
    stream_item *into = k < filled && held[k].position == p ? &s->buffer[held[k++].slot] : NULL;
    rc = next_source_example(s, into, err, err_size);
  }
  free(held);
  if (rc != 0) return -1;
  s->buffer_filled = filled;
  if (draining) {
    if (next_source_example(s, &s->next_epoch_first, err, err_size) != 0) return -1;
    s->draining = 1;
  }
  return 0;
}

int stream_skip(example_stream *s, int64_t count, int64_t *epoch, char *err, size_t err_size) {
  *epoch = s->epoch;
  /* One example again and again: after any number of them, the next is the same one. */
  if (count <= 0 || s->cfg.repeat_first) return 0;
  if (s->cfg.layout->kind == LAYOUT_TFRECORD && count_file_items(s, err, err_size) != 0) return -1;
  int64_t size = epoch_items(s);
  if (size == 0) return empty_epoch(s, err, err_size);
  /* Every epoch starts with an empty shuffle buffer, and the buffer draws once per item:
   * whole epochs move the epoch and the draws on, nothing else. */
  if (epochs_alike(s) && count >= size) {
    int64_t epochs = count / size;
    count -= epochs * size;
    s->epoch += epochs;
    prep_rng_advance(&s->rng, (uint64_t)epochs * (uint64_t)size);
    start_epoch(s);
  }
  while (count >= size) {
    count -= size;
    prep_rng_advance(&s->rng, (uint64_t)size);
    s->epoch++;
    start_epoch(s);
    if ((size = epoch_items(s)) == 0) return empty_epoch(s, err, err_size);
  }
  *epoch = s->epoch;
  if (s->buffer) return skip_in_buffer(s, count, size, err, err_size);
  for (int64_t i = 0; i < count; i++)
    if (next_source_example(s, NULL, err, err_size) != 0) return -1;
  return 0;
}

int stream_create(const stream_config *cfg, example_stream **out, char *err, size_t err_size) {
  *out = NULL;
  example_stream *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->cfg = *cfg;
  const dataset_layout *layout = cfg->layout;
  s->count = layout->kind == LAYOUT_FOLDER ? layout->folder.count : layout->num_files;
  s->record_sharding = layout->kind == LAYOUT_TFRECORD &&
                       layout->num_files < (size_t)cfg->num_shards;
  if (layout->kind == LAYOUT_FOLDER && s->count < (size_t)cfg->num_shards) {
    snprintf(err, err_size, "%s: %zu images cannot give each of %d shards (ranks x replicas) one",
             layout->where, s->count, (int)cfg->num_shards);
    stream_destroy(s);
    return -1;
  }
  s->order = malloc((s->count ? s->count : 1) * sizeof *s->order);
  if (!s->order) goto oom;
  s->num_open = cfg->interleave > 1 ? cfg->interleave : 1;
  if (!(s->open = calloc((size_t)s->num_open, sizeof *s->open))) goto oom;
  if (cfg->cache && !(s->cache = calloc(s->count ? s->count : 1, sizeof *s->cache))) goto oom;
  if (layout->kind == LAYOUT_TFRECORD && layout->file_records) {
    s->file_first = malloc((layout->num_files ? layout->num_files : 1) * sizeof *s->file_first);
    if (!s->file_first) goto oom;
    for (size_t i = 0, first = 0; i < layout->num_files; first += (size_t)layout->file_records[i++])
      s->file_first[i] = (int64_t)first;
  }
  if (cfg->shuffle && layout->kind == LAYOUT_TFRECORD && cfg->shuffle_buffer > 1) {
    s->buffer_size = cfg->shuffle_buffer;
    s->buffer = calloc((size_t)s->buffer_size, sizeof *s->buffer);
    if (!s->buffer) goto oom;
    /* Each shard shuffles its own share its own way. */
    s->rng = prep_rng_stream(cfg->seed ^ 0x5EEDull, (uint64_t)cfg->shard);
  }
  start_epoch(s);
  *out = s;
  return 0;
oom:
  stream_destroy(s);
  snprintf(err, err_size, "out of memory for the example stream");
  return -1;
}

int stream_failed_io(const example_stream *s) { return s->failed_io; }

void stream_destroy(example_stream *s) {
  if (!s) return;
  for (int64_t i = 0; s->buffer && i < s->buffer_size; i++) stream_item_free(&s->buffer[i]);
  stream_item_free(&s->next_epoch_first);
  free(s->buffer);
  free(s->file_items);
  free(s->file_first);
  for (int32_t k = 0; s->open && k < s->num_open; k++) tfrecord_close(s->open[k].reader);
  free(s->open);
  for (size_t i = 0; s->cache && i < s->count; i++) free(s->cache[i].bytes);
  free(s->cache);
  stream_item_free(&s->sample);
  free(s->order);
  free(s);
}
