/* bad_tally.h — when unreadable examples mean that nothing more can be read. The
 * pipeline tells each example it takes, in stream order; the tally says stop only when
 * that is certain, whatever order the examples come in:
 *  - every example of one whole epoch of this shard was unreadable, and every epoch of
 *    this shard holds the same examples (no shuffling, or one shard): no later epoch can
 *    give a batch. Each example comes once per epoch, so the epoch's count is of distinct
 *    examples;
 *  - or every example of the split (`units` of them: stream_item.unit) has been found
 *    unreadable at least once: shuffled shards whose share changes each epoch end here.
 *    With whole files as units (shards of a known size, not counted, read by file) a
 *    file is found unreadable when a whole epoch was, since the share read it whole.
 * Also sums the framing losses (stream_item.lost_bytes) for the end-of-run summary. */
#ifndef IMAGENET_BAD_TALLY_H
#define IMAGENET_BAD_TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bad_tally {
  bool same_share;    /* every epoch of this shard holds the same examples */
  bool resumed;       /* the stream started inside an epoch: that one is not whole */
  int64_t epoch;      /* of the examples being taken; -1 before the first */
  bool whole;         /* this epoch was taken from its first example */
  int64_t taken, bad; /* of this epoch */
  /* Distinct units found unreadable: a bit per unit, [0, slots); `units` of them exist
   * (slots may be more: a damaged file's unit sits past the records). NULL: unknown. */
  uint8_t *found;
  int64_t slots, units, found_count;
  /* Units are files: marked only through a wholly unreadable epoch, from `seen` (the
   * units of the epoch being taken). */
  bool file_units;
  uint8_t *seen;
  /* Framing losses taken, their bytes, and their estimated records (-1 in an estimate:
   * unknown, counted in unknown_records). */
  int64_t framing_losses, lost_records, unknown_records;
  uint64_t lost_bytes;
} bad_tally;

/* 0, or -1 out of memory. slots/units 0: no distinct count (units unknown). file_units:
 * units are whole files (see above). */
int bad_tally_init(bad_tally *t, bool same_share, int64_t slots, int64_t units, bool file_units);
/* After a resume: the first epoch is a part of one. */
void bad_tally_resumed(bad_tally *t);
/* One example taken. 0; or 1 with why (what was unreadable, how much) when nothing more
 * can be read. An epoch is judged when the next one's first example is taken. */
int bad_tally_take(bad_tally *t, int64_t epoch, int64_t unit, bool bad, uint64_t lost_bytes,
                   int64_t lost_records, char *why, size_t why_size);
void bad_tally_free(bad_tally *t);

#endif
