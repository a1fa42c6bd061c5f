/* example_stream.c — the reader's side of the pipeline (example_stream.h). */
#define _POSIX_C_SOURCE 200809L
#include "example_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "tfrecord.h"

/* The source: this shard's examples in epoch order, before the shuffle buffer. */
struct example_stream {
  stream_config cfg;
  int64_t epoch;
  size_t *order;            /* this epoch's permutation of files (TFRecord) or images */
  size_t count;             /* entries in order */
  size_t position;          /* next entry of order this shard visits */
  int64_t yielded_this_epoch;
  int64_t visited_this_epoch;/* entries visited this epoch, readable or not */
  /* TFRecord: the open shard and the record index over the epoch (record sharding). */
  tfrecord_reader *reader;
  const char *reader_path;
  int record_sharding;
  int64_t record_index;
  uint64_t record_offset;   /* byte offset of the next record, for messages */
  /* Shuffle buffer (training, TFRecord). */
  stream_item *buffer;
  int64_t buffer_size, buffer_filled;
  uint64_t rng;
  int draining;                /* the epoch ended: empty the buffer before the next one */
  stream_item next_epoch_first;/* meanwhile, the next epoch's first example */
};

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
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
    uint64_t state = s->cfg.seed * 0x2545F4914F6CDD1Dull + (uint64_t)s->epoch;
    for (size_t i = s->count; i > 1; i--) {
      size_t j = (size_t)(splitmix64(&state) % i);
      size_t t = s->order[i - 1];
      s->order[i - 1] = s->order[j];
      s->order[j] = t;
    }
  }
  s->position = s->record_sharding ? 0 : (size_t)s->cfg.shard;
  s->record_index = 0;
  s->yielded_this_epoch = 0;
  s->visited_this_epoch = 0;
}

static int end_epoch(example_stream *s, char *err, size_t err_size) {
  if (s->yielded_this_epoch == 0) {
    snprintf(err, err_size, "%s: a whole epoch of shard %d of %d gave no example "
             "(%lld records or files visited)", s->cfg.layout->where, (int)s->cfg.shard, (int)s->cfg.num_shards,
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
  snprintf(err, err_size, "%s: label %lld is outside the model's %d classes (--num_classes; "
           "ImageNet shards store 1..1000 for 1001 classes)", origin, (long long)label,
           (int)s->cfg.num_classes);
  return -1;
}

static int next_folder_example(example_stream *s, stream_item *item, char *err, size_t err_size) {
  const image_folder *folder = &s->cfg.layout->folder;
  for (;;) {
    if (s->position >= s->count && end_epoch(s, err, err_size) != 0) return -1;
    size_t index = s->order[s->position];
    s->position += (size_t)s->cfg.num_shards;
    s->visited_this_epoch++;
    const char *path = folder->paths[index];
    snprintf(item->origin, sizeof item->origin, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f) {
      snprintf(err, err_size, "%s: %s", path, strerror(errno));
      return -1;
    }
    int rc = fseek(f, 0, SEEK_END);
    long size = rc == 0 ? ftell(f) : -1;
    rc = size >= 0 ? fseek(f, 0, SEEK_SET) : -1;
    if (rc == 0 && reserve(item, (size_t)size + 1) != 0) {
      fclose(f);
      snprintf(err, err_size, "%s: out of memory for %ld bytes", path, size);
      return -1;
    }
    size_t got = rc == 0 ? fread(item->data, 1, (size_t)size, f) : 0;
    int read_error = rc != 0 || ferror(f) || got != (size_t)size;
    fclose(f);
    if (read_error) {
      snprintf(err, err_size, "%s: read error", path);
      return -1;
    }
    item->label = folder->labels[index];
    if (size == 0) return bad_item(item, "empty file", "");
    item->bad = 0;
    item->size = (size_t)size;
    item->num_boxes = 0;
    if (check_label(s, item->label, path, err, err_size) != 0) return -1;
    return 0;
  }
}

/* Opens the file at the current position of the epoch, or ends the epoch. */
static int open_next_file(example_stream *s, char *err, size_t err_size) {
  size_t step = s->record_sharding ? 1 : (size_t)s->cfg.num_shards;
  for (;;) {
    if (s->position >= s->count && end_epoch(s, err, err_size) != 0) return -1;
    const char *path = s->cfg.layout->files[s->order[s->position]];
    s->position += step;
    tfrecord_result r = tfrecord_open(path, &s->reader, err, err_size);
    if (r != TFRECORD_OK) return -1; /* an unreadable shard is not bad data: stop */
    s->reader_path = path;
    s->record_offset = 0;
    return 0;
  }
}

static int next_record_example(example_stream *s, stream_item *item, char *err, size_t err_size) {
  for (;;) {
    if (!s->reader && open_next_file(s, err, err_size) != 0) return -1;
    const uint8_t *data;
    size_t size;
    char why[512];
    uint64_t offset = s->record_offset;
    tfrecord_result r = tfrecord_next(s->reader, &data, &size, why, sizeof why);
    if (r == TFRECORD_END || r == TFRECORD_CORRUPT) {
      /* Framing is lost after a bad record: the rest of the shard is unreachable. */
      tfrecord_close(s->reader);
      s->reader = NULL;
      if (r == TFRECORD_CORRUPT) {
        s->visited_this_epoch++;
        snprintf(item->origin, sizeof item->origin, "the rest of the shard");
        return bad_item(item, "", why);
      }
      continue;
    }
    if (r != TFRECORD_OK) {
      snprintf(err, err_size, "%s", why);
      return -1;
    }
    s->record_offset += 16 + size;
    int64_t index = s->record_index++;
    if (s->record_sharding && index % s->cfg.num_shards != s->cfg.shard) continue;
    s->visited_this_epoch++;
    snprintf(item->origin, sizeof item->origin, "%s, record at byte %llu", s->reader_path,
             (unsigned long long)offset);
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
      return -1;
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
  int rc = s->cfg.layout->kind == LAYOUT_FOLDER ? next_folder_example(s, item, err, err_size)
                                                : next_record_example(s, item, err, err_size);
  if (rc == 0) s->yielded_this_epoch++;
  return rc;
}

static void swap_items(stream_item *a, stream_item *b) {
  stream_item t = *a;
  *a = *b;
  *b = t;
}

int stream_next(example_stream *s, stream_item *item, char *err, size_t err_size) {
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
      int64_t j = (int64_t)(splitmix64(&s->rng) % (uint64_t)s->buffer_filled);
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
    snprintf(err, err_size, "%s: %zu images cannot give each of %d shards (ranks x replicas) "
             "one", layout->where, s->count, (int)cfg->num_shards);
    stream_destroy(s);
    return -1;
  }
  s->order = malloc((s->count ? s->count : 1) * sizeof *s->order);
  if (!s->order) goto oom;
  if (cfg->shuffle && layout->kind == LAYOUT_TFRECORD && cfg->shuffle_buffer > 1) {
    s->buffer_size = cfg->shuffle_buffer;
    s->buffer = calloc((size_t)s->buffer_size, sizeof *s->buffer);
    if (!s->buffer) goto oom;
    s->rng = cfg->seed * 0x9E3779B97F4A7C15ull + (uint64_t)cfg->shard + 1;
  }
  start_epoch(s);
  *out = s;
  return 0;
oom:
  stream_destroy(s);
  snprintf(err, err_size, "out of memory for the example stream");
  return -1;
}

void stream_destroy(example_stream *s) {
  if (!s) return;
  for (int64_t i = 0; s->buffer && i < s->buffer_size; i++) stream_item_free(&s->buffer[i]);
  stream_item_free(&s->next_epoch_first);
  free(s->buffer);
  if (s->reader) tfrecord_close(s->reader);
  free(s->order);
  free(s);
}
