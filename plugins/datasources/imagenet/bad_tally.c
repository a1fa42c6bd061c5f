/* bad_tally.c — when unreadable examples mean that nothing more can be read (bad_tally.h). */
#include "bad_tally.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bad_tally_init(bad_tally *t, bool same_share, int64_t slots, int64_t units, bool file_units) {
  memset(t, 0, sizeof *t);
  t->same_share = same_share;
  t->epoch = -1;
  if (slots > 0 && units > 0) {
    if (!(t->found = calloc((size_t)(slots + 7) / 8, 1))) return -1;
    if (file_units && !(t->seen = calloc((size_t)(slots + 7) / 8, 1))) return -1;
    t->slots = slots;
    t->units = units;
    t->file_units = file_units;
  }
  return 0;
}

static bool has(const uint8_t *bits, int64_t unit) { return bits[unit / 8] & (1u << (unit % 8)); }
static void put(uint8_t *bits, int64_t unit) { bits[unit / 8] |= (uint8_t)(1u << (unit % 8)); }

/* A unit found unreadable: 1 once every unit of the split has been. */
static int found(bad_tally *t, int64_t unit, char *why, size_t why_size) {
  if (has(t->found, unit)) return 0;
  put(t->found, unit);
  if (++t->found_count < t->units) return 0;
  snprintf(why, why_size, "every one of the %lld %s of the split has been found unreadable",
           (long long)t->units, t->file_units ? "files" : "examples");
  return 1;
}

void bad_tally_resumed(bad_tally *t) { t->resumed = true; }

int bad_tally_take(bad_tally *t, int64_t epoch, int64_t unit, bool bad, uint64_t lost_bytes,
                   int64_t lost_records, char *why, size_t why_size) {
  if (epoch != t->epoch) {
    bool all_bad = t->whole && t->taken > 0 && t->bad == t->taken;
    if (t->same_share && all_bad) {
      snprintf(why, why_size,
               "every one of the %lld examples of epoch %lld of this shard was unreadable, and "
               "every epoch of it holds the same examples",
               (long long)t->taken, (long long)t->epoch);
      return 1;
    }
    if (t->seen) {
      for (int64_t u = 0; all_bad && u < t->slots; u++)
        if (has(t->seen, u) && found(t, u, why, why_size)) return 1;
      memset(t->seen, 0, (size_t)(t->slots + 7) / 8);
    }
    t->whole = t->epoch >= 0 || !t->resumed;
    t->epoch = epoch;
    t->taken = t->bad = 0;
  }
  t->taken++;
  if (t->seen && unit >= 0 && unit < t->slots) put(t->seen, unit);
  if (!bad) return 0;
  t->bad++;
  if (lost_bytes > 0) {
    t->framing_losses++;
    t->lost_bytes += lost_bytes;
    if (lost_records >= 0) t->lost_records += lost_records;
    else t->unknown_records++;
  }
  if (t->found && !t->file_units && unit >= 0 && unit < t->slots)
    return found(t, unit, why, why_size);
  return 0;
}

void bad_tally_free(bad_tally *t) {
  free(t->found);
  free(t->seen);
  t->found = t->seen = NULL;
}
