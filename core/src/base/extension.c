/* extension.c — one way to ask a plugin for an extension (extension.h). */
#include "base/extension.h"

#include "base/crash_guard.h"

const void *cnnb_extension_lookup(const char *where, const cnnb_plugin *plugin,
                                  const void *(*instance_get)(void *instance, const char *id),
                                  void *instance, const char *id, size_t needed) {
  const void *answer = NULL;
  bool descriptor_has_slot = plugin &&
                             plugin->struct_size >= CNNB_EXT_NEEDS(cnnb_plugin, get_extension);
  cnnb_crash_mark outer = where ? cnnb_crash_enter(where, "get_extension", id)
                                : (cnnb_crash_mark){0};
  if (instance_get) answer = instance_get(instance, id);
  if (!answer && descriptor_has_slot && plugin->get_extension) answer = plugin->get_extension(id);
  if (where) cnnb_crash_leave(outer);
  if (answer && needed > 0 && *(const uint32_t *)answer < needed) return NULL;
  return answer;
}
