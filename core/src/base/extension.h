/* extension.h — asking a plugin for an optional capability by string id, the SDK's
 * get_extension (cnnb/abi.h): the instance's own slot first (ABI 1.3), then the plugin's
 * descriptor. An answer is a struct that starts with its struct_size and grows only by
 * appending, so an answer too small to hold the last slot the host will read is treated
 * as no answer, never read past its end; an extension that is only a yes (any non-NULL
 * answer) asks for 0 bytes. */
#ifndef CNNB_BASE_EXTENSION_H
#define CNNB_BASE_EXTENSION_H

#include <stdbool.h>
#include <stddef.h>
#include <cnnb/abi.h>

/* The bytes an answer of `type` must hold for the host to read `last_slot`. */
#define CNNB_EXT_NEEDS(type, last_slot) (offsetof(type, last_slot) + sizeof(((type *)0)->last_slot))

/* Extension `id` of `instance` (through `instance_get`, its vtable's get_extension; NULL
 * to skip it) or else of `plugin`'s descriptor (checked against its struct_size). NULL
 * when neither answers, or the answer's struct_size is below `needed`. The calls are
 * marked for the crash guard as `where` (the plugin's label) doing get_extension; where
 * NULL leaves the caller's mark on. */
const void *cnnb_extension_lookup(const char *where, const cnnb_plugin *plugin,
                                  const void *(*instance_get)(void *instance, const char *id),
                                  void *instance, const char *id, size_t needed);

#endif
