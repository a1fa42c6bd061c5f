/* tfrecord.h — TFRecord files as TensorFlow writes them: a sequence of records, each
 *   uint64 length (little-endian) | uint32 masked crc32c(length) | data[length] |
 *   uint32 masked crc32c(data)
 * Reading checks both CRCs; a mismatch or a record cut short names the file and the byte
 * offset of the record. A record whose data fails its CRC while its length's CRC holds
 * is one bad record (BAD_DATA): the framing is intact, so reading goes on with the next.
 * A length that fails its CRC, an impossible length or a cut-short record lose the
 * framing (CORRUPT): nothing after it can be found. Writing produces files TensorFlow's
 * TFRecordDataset reads.
 *
 * One place for the format, linked by everything that reads or writes it: the imagenet
 * datasource and cnnbench-mkrecords (shards of tf.Example), and the core's TensorBoard
 * event files (core/src/report/event_file.c), which are TFRecord files too. */
#ifndef CNNB_COMMON_TFRECORD_H
#define CNNB_COMMON_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

typedef enum tfrecord_result {
  TFRECORD_OK = 0,      /* a record */
  TFRECORD_END = 1,     /* a clean end of file */
  TFRECORD_CORRUPT = 2, /* bad CRC, impossible length or a truncated record: err says where */
  TFRECORD_IO = 3,      /* the file cannot be opened or read: err says why */
  TFRECORD_BAD_DATA = 4 /* the data fails its CRC, its length's holds: err says where; the
                           position is past the record, the next one can be read */
} tfrecord_result;

/* One record at *pos in buf[0, len): on TFRECORD_OK, *data and *size point into buf and *pos
 * moves past the record (on TFRECORD_BAD_DATA too); TFRECORD_END when *pos == len. Pure (no I/O):
 * what the reader and the fuzzer both run. err names only the offset; the reader adds the file. */
tfrecord_result tfrecord_parse(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **data,
                               size_t *size, char *err, size_t err_size);

/* A file read record by record through a reusable buffer. Not thread-safe: one thread
 * per reader. */
typedef struct tfrecord_reader tfrecord_reader;
tfrecord_result tfrecord_open(const char *path, tfrecord_reader **out, char *err, size_t err_size);
/* The next record; *data is valid until the next call or close. After TFRECORD_BAD_DATA
 * the next call reads the next record; after TFRECORD_CORRUPT the rest of the file is
 * unusable (framing is lost): the caller moves to the next file. */
tfrecord_result tfrecord_next(tfrecord_reader *reader, const uint8_t **data, size_t *size,
                              char *err, size_t err_size);
/* A reader over a whole file already in memory (bytes[0, size), borrowed: they must
 * outlive the reader), named `path` in messages: what --datasets_use_caching reads from
 * after the first epoch. Reads and skips as a file reader does; never TFRECORD_IO. */
tfrecord_result tfrecord_open_memory(const char *path, const uint8_t *bytes, size_t size,
                                     tfrecord_reader **out, char *err, size_t err_size);
/* Steps over the next record reading only its header (its length CRC is checked, its
 * data and data CRC are not): what counting and skipping records costs, a seek per
 * record. Results as tfrecord_next's, without the data. */
tfrecord_result tfrecord_skip(tfrecord_reader *reader, char *err, size_t err_size);
/* The byte offset of the next record (where tfrecord_next or tfrecord_skip starts). */
uint64_t tfrecord_offset(const tfrecord_reader *reader);
/* The file's size when it was opened: with tfrecord_offset, what a lost framing costs. */
uint64_t tfrecord_file_size(const tfrecord_reader *reader);
void tfrecord_close(tfrecord_reader *reader);

/* Writing: 0 on success, -1 with err filled. Close flushes and fsyncs. */
typedef struct tfrecord_writer tfrecord_writer;
/* Creates or replaces `path`. */
int tfrecord_writer_open(const char *path, tfrecord_writer **out, char *err, size_t err_size);
/* Creates `path`, which must not exist: -1 with errno EEXIST (and err) when it does, so a
 * writer that picks its own file name never replaces a file it did not write. */
int tfrecord_writer_create(const char *path, tfrecord_writer **out, char *err, size_t err_size);
int tfrecord_write(tfrecord_writer *writer, const void *data, size_t size, char *err,
                   size_t err_size);
/* Hands what was written so far to the kernel (no fsync): a reader of the growing file,
 * or what a killed process leaves, sees whole records up to here. */
int tfrecord_writer_flush(tfrecord_writer *writer, char *err, size_t err_size);
int tfrecord_writer_close(tfrecord_writer *writer, char *err, size_t err_size);

#endif
