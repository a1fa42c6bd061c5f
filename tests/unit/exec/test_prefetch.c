/* test_prefetch — the input pipeline's queue: batches arrive in the datasource's order,
 * none is lost or repeated, a datasource failure surfaces after the batches read before
 * it, destroying a pipeline whose thread is waiting does not hang, and draining drops
 * exactly the batches queued (--input_only's start of timing); a uint8 pipeline
 * (CNNB_EXT_DATASOURCE_UINT8) hands over uint8 batches the same way; depth 0
 * (--nodatasets_use_prefetch) reads each batch when it is taken, and never ahead. */
#include <check.h>
#include <stdlib.h>

#include "flags/flags.h"
#include "exec/prefetch.h"

typedef struct counting_source {
  int32_t next;    /* value of the next batch */
  int32_t fail_at; /* batch index that fails; -1 never */
} counting_source;

static cnnb_status counting_next(void *ds, float *images, int32_t *labels) {
  counting_source *s = ds;
  if (s->next == s->fail_at) return CNNB_EDATA;
  images[0] = (float)s->next;
  labels[0] = s->next;
  s->next++;
  return CNNB_OK;
}

static const cnnb_datasource_vtable counting_vtable = {
    .struct_size = sizeof(cnnb_datasource_vtable),
    .next_batch = counting_next,
};

START_TEST(batches_arrive_in_order) {
  counting_source source = {.next = 0, .fail_at = -1};
  cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
  cnnb_prefetch *p;
  ck_assert_int_eq(cnnb_prefetch_create(&counting_vtable, &source, ctx, NULL, 4, 1, 2, &p),
                   CNNB_OK);
  for (int32_t i = 0; i < 100; i++) {
    const float *images;
    const int32_t *labels;
    ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_OK);
    ck_assert_int_eq(labels[0], i);
    ck_assert_float_eq(images[0], (float)i);
  }
  cnnb_prefetch_destroy(p);
  /* The thread read at most `depth` batches beyond the 100 used. */
  ck_assert_int_le(source.next, 100 + 2 + 1);
  cnnb_ctx_destroy(ctx);
}
END_TEST

/* Depth 0: no thread; a batch is read when taken, never before; a failure is returned
 * then, and again after; draining reads nothing. */
START_TEST(depth_zero_reads_on_demand) {
  counting_source source = {.next = 0, .fail_at = 5};
  cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
  cnnb_prefetch *p;
  ck_assert_int_eq(cnnb_prefetch_create(&counting_vtable, &source, ctx, NULL, 1, 1, 0, &p),
                   CNNB_OK);
  ck_assert_int_eq(source.next, 0);
  const float *images;
  const int32_t *labels;
  for (int32_t i = 0; i < 5; i++) {
    ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_OK);
    ck_assert_int_eq(labels[0], i);
    ck_assert_int_eq(source.next, i + 1);
  }
  ck_assert_int_eq(cnnb_prefetch_drain(p), CNNB_OK);
  ck_assert_int_eq(source.next, 5);
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_EDATA);
  source.fail_at = -1; /* a failed pipeline stays failed */
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_EDATA);
  ck_assert_int_eq(cnnb_prefetch_drain(p), CNNB_EDATA);
  cnnb_prefetch_destroy(p);
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(failure_after_good_batches) {
  counting_source source = {.next = 0, .fail_at = 3};
  cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
  cnnb_prefetch *p;
  ck_assert_int_eq(cnnb_prefetch_create(&counting_vtable, &source, ctx, NULL, 1, 1, 4, &p),
                   CNNB_OK);
  const float *images;
  const int32_t *labels;
  for (int32_t i = 0; i < 3; i++) {
    ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_OK);
    ck_assert_int_eq(labels[0], i);
  }
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_EDATA);
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_EDATA);
  cnnb_prefetch_destroy(p);
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(destroy_while_full) {
  counting_source source = {.next = 0, .fail_at = -1};
  cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
  cnnb_prefetch *p;
  ck_assert_int_eq(cnnb_prefetch_create(&counting_vtable, &source, ctx, NULL, 1, 1, 1, &p),
                   CNNB_OK);
  const float *images;
  const int32_t *labels;
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_OK);
  cnnb_prefetch_destroy(p); /* the thread waits for a free slot: it must be woken */
  ck_assert_int_le(source.next, 3);
  cnnb_ctx_destroy(ctx);
}
END_TEST

static cnnb_status counting_next_uint8(void *ds, uint8_t *images, int32_t *labels) {
  counting_source *s = ds;
  if (s->next == s->fail_at) return CNNB_EDATA;
  images[0] = (uint8_t)s->next;
  images[1] = (uint8_t)(s->next + 1);
  labels[0] = s->next;
  s->next++;
  return CNNB_OK;
}

static const cnnb_datasource_uint8 counting_uint8 = {
    .struct_size = sizeof(cnnb_datasource_uint8),
    .next_batch_uint8 = counting_next_uint8,
};

/* A uint8 pipeline hands over uint8 batches only, in order, and refuses to be read as
 * fp32. */
START_TEST(uint8_batches_arrive_in_order) {
  counting_source source = {.next = 0, .fail_at = 50};
  cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
  cnnb_prefetch *p;
  ck_assert_int_eq(cnnb_prefetch_create_uint8(&counting_uint8, &source, ctx, NULL, 2, 1, 2, &p),
                   CNNB_OK);
  for (int32_t i = 0; i < 50; i++) {
    cnnb_batch batch;
    ck_assert_int_eq(cnnb_prefetch_take(p, &batch), CNNB_OK);
    ck_assert_ptr_null(batch.images);
    ck_assert_ptr_nonnull(batch.images_uint8);
    ck_assert_int_eq(batch.labels[0], i);
    ck_assert_int_eq(batch.images_uint8[0], (uint8_t)i);
    ck_assert_int_eq(batch.images_uint8[1], (uint8_t)(i + 1));
  }
  cnnb_batch batch;
  ck_assert_int_eq(cnnb_prefetch_take(p, &batch), CNNB_EDATA);
  const float *images;
  const int32_t *labels;
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_EINTERNAL);
  cnnb_prefetch_destroy(p);
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(drain_discards_what_was_queued) {
  /* depth 2 is 3 slots. After the consumer takes batch 0, drain gives it back and waits
   * for all 3 slots to hold batches (1, 2, 3), then drops them: the next batch is 4,
   * read after the drain. */
  counting_source source = {.next = 0, .fail_at = -1};
  cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
  cnnb_prefetch *p;
  ck_assert_int_eq(cnnb_prefetch_create(&counting_vtable, &source, ctx, NULL, 1, 1, 2, &p),
                   CNNB_OK);
  const float *images;
  const int32_t *labels;
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_OK);
  ck_assert_int_eq(labels[0], 0);
  ck_assert_int_eq(cnnb_prefetch_drain(p), CNNB_OK);
  for (int32_t want = 4; want < 10; want++) {
    ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_OK);
    ck_assert_int_eq(labels[0], want);
  }
  cnnb_prefetch_destroy(p);
  /* A datasource that fails while the queue fills: drain reports it. */
  source = (counting_source){.next = 0, .fail_at = 2};
  ck_assert_int_eq(cnnb_prefetch_create(&counting_vtable, &source, ctx, NULL, 1, 1, 2, &p),
                   CNNB_OK);
  ck_assert_int_eq(cnnb_prefetch_drain(p), CNNB_EDATA);
  ck_assert_int_eq(cnnb_prefetch_next(p, &images, &labels), CNNB_EDATA);
  cnnb_prefetch_destroy(p);
  cnnb_ctx_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("prefetch");
  TCase *tc = tcase_create("queue");
  tcase_add_test(tc, batches_arrive_in_order);
  tcase_add_test(tc, depth_zero_reads_on_demand);
  tcase_add_test(tc, failure_after_good_batches);
  tcase_add_test(tc, destroy_while_full);
  tcase_add_test(tc, uint8_batches_arrive_in_order);
  tcase_add_test(tc, drain_discards_what_was_queued);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
