/* loader_list_json.c — `cnnbench --list_plugins --list_format=json`: what is installed,
 * as one JSON object for programs (cnnbench-tune builds its search space from it instead
 * of knowing plugin names). The keys are documented in docs/flags.md ("Listing plugins as
 * JSON") and only grow:
 *   cnnbench_version, abi, core_flags: [flag], plugins: [{kind, name, names, version,
 *   abi, path, description, available, unavailable_reason, flags: [flag]}],
 *   rejected: [{path, why}]
 * where a flag is {name, group, type, default, allowed (choices only), repeated, help}. */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "base/crash_guard.h"
#include "loader/loader_impl.h"
#include "graph/op_device.h"

/* A flag's value in its own JSON type, parsed from the declared default's spelling. */
static json_t *default_value(const cnnb_flag_view *v) {
  const char *text = v->default_text ? v->default_text : "";
  switch (v->type) {
    case CNNB_FLAG_BOOL: return json_boolean(strcmp(text, "true") == 0 || strcmp(text, "1") == 0);
    case CNNB_FLAG_INT: return json_integer(strtoll(text, NULL, 0));
    case CNNB_FLAG_FLOAT: return json_real(strtod(text, NULL));
    case CNNB_FLAG_STRING: return json_string(text);
  }
  return json_null();
}

static const char *type_name(cnnb_flag_type type) {
  switch (type) {
    case CNNB_FLAG_BOOL: return "bool";
    case CNNB_FLAG_INT: return "int";
    case CNNB_FLAG_FLOAT: return "float";
    case CNNB_FLAG_STRING: return "string";
  }
  return "unknown";
}

static json_t *flag_object(const cnnb_flag_view *v) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "name", json_string(v->name));
  json_object_set_new(o, "group", json_string(v->group));
  json_object_set_new(o, "type", json_string(type_name(v->type)));
  json_object_set_new(o, "default", default_value(v));
  if (v->choices) {
    json_t *a = json_array();
    for (const char *const *c = v->choices; a && *c; c++) json_array_append_new(a, json_string(*c));
    json_object_set_new(o, "allowed", a);
  }
  json_object_set_new(o, "repeated", json_boolean(v->repeated));
  json_object_set_new(o, "help", json_string(v->help ? v->help : ""));
  return o;
}

/* The flags of `flags` declared by the core (group NULL) or by the plugin named `group`. */
static json_t *flags_of(const cnnb_flags *flags, const char *group) {
  json_t *a = json_array();
  cnnb_flag_view v;
  for (size_t i = 0; a && cnnb_flags_at(flags, i, &v); i++) {
    if (group ? !v.plugin || strcmp(v.group, group) != 0 : v.plugin) continue;
    json_array_append_new(a, flag_object(&v));
  }
  return a;
}

static json_t *plugin_object(const loader_plugin *p, const cnnb_flags *flags) {
  json_t *o = json_object(), *names = json_array();
  if (!o || !names) {
    json_decref(o);
    json_decref(names);
    return NULL;
  }
  for (size_t j = 0; j < p->num_names; j++) json_array_append_new(names, json_string(p->names[j]));
  char abi[32];
  snprintf(abi, sizeof abi, "%u.%u", p->abi_major, p->abi_minor);
  json_object_set_new(o, "kind", json_string(cnnb_kind_name(p->kind)));
  json_object_set_new(o, "name", json_string(p->desc.name ? p->desc.name : ""));
  json_object_set_new(o, "names", names);
  json_object_set_new(o, "version", json_string(p->version ? p->version : ""));
  json_object_set_new(o, "abi", json_string(abi));
  json_object_set_new(o, "path", json_string(p->path));
  json_object_set_new(o, "description",
                      json_string(p->desc.description ? p->desc.description : ""));
  const char *why = NULL;
  if (p->kind == CNNB_KIND_DEVICE && p->num_names)
    CNNB_GUARDED(p->path, "availability", NULL, why = cnnb_device_unavailable(&p->desc));
  json_object_set_new(o, "available", json_boolean(why == NULL));
  json_object_set_new(o, "unavailable_reason", why ? json_string(why) : json_null());
  json_object_set_new(o, "flags", flags_of(flags, p->desc.name ? p->desc.name : ""));
  return o;
}

cnnb_status cnnb_loader_print_json(const cnnb_loader *l, const cnnb_flags *flags, FILE *out) {
  json_t *root = json_object(), *plugins = json_array(), *rejected = json_array();
  if (!root || !plugins || !rejected) {
    json_decref(root);
    json_decref(plugins);
    json_decref(rejected);
    return CNNB_ENOMEM;
  }
  char abi[32];
  snprintf(abi, sizeof abi, "%d.%d", CNNB_ABI_MAJOR, CNNB_ABI_MINOR);
  json_object_set_new(root, "cnnbench_version", json_string(CNNB_VERSION_STRING));
  json_object_set_new(root, "abi", json_string(abi));
  json_object_set_new(root, "core_flags", flags_of(flags, NULL));
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (p->why)
      json_array_append_new(rejected, json_pack("{s:s, s:s}", "path", p->path, "why", p->why));
    else json_array_append_new(plugins, plugin_object(p, flags));
  }
  json_object_set_new(root, "plugins", plugins);
  json_object_set_new(root, "rejected", rejected);
  int rc = json_dumpf(root, out, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (rc != 0 || fputc('\n', out) == EOF) return CNNB_EIO;
  return CNNB_OK;
}
