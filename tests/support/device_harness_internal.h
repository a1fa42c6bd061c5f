/* device_harness_internal.h — between device_harness.c (loading and probing) and
 * device_harness_main.c (the Check main, apart because check.h defines a fail() macro). */
#ifndef CNNB_TEST_DEVICE_HARNESS_INTERNAL_H
#define CNNB_TEST_DEVICE_HARNESS_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

/* Loads `device` and probes its precisions: 0 loaded, DEVICE_HARNESS_SKIP (msg says why:
 * not built, cannot run here), -1 failed (msg says why). */
int device_harness_init(const char *device, char *msg, size_t size);
/* What was loaded and what each precision did, a few lines. */
void device_harness_print(const char *test, FILE *out);
/* Unloads (dlcloses) the plugin. */
void device_harness_fini(void);

#endif
