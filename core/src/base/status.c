/* status.c — human names for the ABI's enums (status codes and plugin kinds), so every
 * message that mentions one says it the same way. */
#include <cnnb/abi.h>

const char *cnnb_kind_name(uint32_t kind) {
  switch ((cnnb_plugin_kind)kind) {
    case CNNB_KIND_MODEL: return "model";
    case CNNB_KIND_DEVICE: return "device";
    case CNNB_KIND_STRATEGY: return "strategy";
    case CNNB_KIND_DATASOURCE: return "datasource";
  }
  return "unknown";
}

const char *cnnb_status_name(cnnb_status status) {
  switch (status) {
    case CNNB_OK: return "ok";
    case CNNB_EINVAL: return "invalid argument";
    case CNNB_ENOMEM: return "out of memory";
    case CNNB_EUNSUPPORTED: return "unsupported";
    case CNNB_EIO: return "I/O error";
    case CNNB_EDATA: return "corrupt data";
    case CNNB_ECOMM: return "communication error";
    case CNNB_EINTERNAL: return "internal error";
    case CNNB_ENOTFOUND: return "not found";
    case CNNB_ENUMERIC: return "numerical failure";
  }
  return "unknown status";
}
