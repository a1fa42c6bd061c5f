/* device_harness.h — the device under test, picked by the name users give --device
 * ("cpu", "cuda"), for the device conformance suites (tests/device/): the same op,
 * gradient, executor and overfit tests run unchanged against any device plugin.
 *
 * The plugin is found the way the host finds it, through the host's loader: the plugin
 * directory ($CNNB_PLUGIN_DIR when set, else the build tree's or installation's own),
 * then $CNNB_PLUGIN_PATH. The loader checks it (ABI, [required] slots) and hands out its
 * own copies of the descriptor and vtable, the ones the host would use. Then, in a child
 * process (a GPU runtime must not be initialised before Check forks its tests), one
 * device is created per precision to learn what it can do here. Outcomes:
 *  - loaded: the suite runs; cases in a precision the device refused are skipped, the
 *    refusal printed once;
 *  - not built or installed (no plugin offers the name): the whole binary is skipped
 *    (exit 77), saying so;
 *  - the device cannot run here (create() refuses fp32 with CNNB_EUNSUPPORTED: no GPU,
 *    no driver): skipped (exit 77), printing the device's refusal;
 *  - failed (the plugin was rejected, create() failed any other way, a refusal broke the
 *    contract): the test fails, with the message.
 *
 * Per test case, a device_harness is one device instance of that plugin; device_run.h
 * runs small graphs on it. Functions return 0 on success, otherwise -1 with a message
 * in h->error (and the few documented positive values). */
#ifndef CNNB_TEST_DEVICE_HARNESS_H
#define CNNB_TEST_DEVICE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "tolerance.h"

/* Exit code of a skipped test binary (ctest's SKIP_RETURN_CODE). */
#define DEVICE_HARNESS_SKIP 77
/* device_harness_open: the device refused this precision here; the case is skipped. */
#define DEVICE_HARNESS_REFUSED 2

/* The main() of a device suite: runs make_suite()'s suite against the device named by
 * argv[1] when given, else by $CNNB_TEST_DEVICE, else "cpu". When both are given and
 * differ, $CNNB_TEST_DEVICE has selected another device than this (ctest-registered)
 * run's, and the binary skips, saying so. Returns 0 (passed), 1 (failed) or
 * DEVICE_HARNESS_SKIP. */
struct Suite;
int device_harness_run(int argc, char **argv, const char *test, struct Suite *(*make_suite)(void));
/* The same for one fixed device (a device's own tests: test_cpu_plugin.c): loads it as
 * described above, printing what it found and what each precision did, then runs the
 * suite with info logs quietened. */
int device_harness_main(const char *test, const char *device, struct Suite *(*make_suite)(void));

/* The device under test, once device_harness_main has loaded it (else NULL / false). */
const char *device_harness_name(void);
const cnnb_plugin *device_harness_plugin(void); /* the loader's copy */
const cnnb_device_vtable *device_harness_vtable(void);
/* The plugin's file. */
const char *device_harness_path(void);
/* Whether create() accepted `precision` (training, one thread) when the suite started;
 * when not, `why` (may be NULL) gets the device's refusal. */
bool device_harness_can(uint32_t precision, const char **why);

/* The precisions below fp32 that suites run their low-precision cases in, whichever
 * the device accepts (the rest are skipped). */
extern const uint32_t device_harness_low_precisions[2];

/* One device instance. */
typedef struct device_harness {
  const char *name; /* the device name given to create() */
  const cnnb_plugin *plugin;
  const cnnb_device_vtable *dv;
  cnnb_ctx *ctx; /* the device's context: its error messages land here */
  void *dev;     /* NULL until created */
  uint32_t precision;
  char error[1024];
} device_harness;

/* The plugin only (no instance), for tests that create their own: fills name, plugin,
 * dv and a fresh ctx. -1 when no device was loaded. */
int device_harness_load(device_harness *h);
/* Loads and creates an instance (num_threads from $CNNB_TEST_THREADS, default 1: the
 * test graphs are tiny, and on a loaded machine a thread pool's barriers cost more than
 * they save). 0: created; DEVICE_HARNESS_REFUSED: the device refused `precision` when
 * the suite started (h->error has its refusal): the caller skips; -1: failed. */
int device_harness_open(device_harness *h, uint32_t precision, int training, uint32_t seed);
void device_harness_close(device_harness *h);

/* Whether instance `dev` (may be NULL) of the device under test has capability `id`: the
 * instance's get_extension when it answers, else the plugin's (cnnb/abi.h's rule). */
bool device_harness_has_extension(void *dev, const char *id);

#endif
