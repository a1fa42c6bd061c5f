/* image_folder.c — lists a torchvision ImageFolder: the class folders of DIR in sorted
 * order, then each class's images. torchvision walks a class folder recursively
 * (os.walk, followlinks=True) and orders files by (folder path, file name), both with
 * Python's sorted() on str, which for UTF-8 names is strcmp's byte order; this does the
 * same. Names starting with '.' are skipped (editor and notebook droppings such as
 * .ipynb_checkpoints would otherwise become classes). Symbolic links are followed;
 * nesting deeper than MAX_DEPTH (a link loop) is an error rather than a hang. */
#define _POSIX_C_SOURCE 200809L /* strdup, strndup */
#include "image_folder.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

enum { MAX_DEPTH = 32 };

static int fail(char *err, size_t err_size, const char *fmt, ...) {
  if (err && err_size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
  }
  return -1;
}

typedef struct names {
  char **items;
  size_t count, cap;
} names;

static int names_push(names *n, char *s) {
  if (!s) return -1;
  if (n->count == n->cap) {
    size_t cap = n->cap ? 2 * n->cap : 16;
    char **grown = realloc(n->items, cap * sizeof *grown);
    if (!grown) {
      free(s);
      return -1;
    }
    n->items = grown;
    n->cap = cap;
  }
  n->items[n->count++] = s;
  return 0;
}
static void names_free(names *n) {
  for (size_t i = 0; i < n->count; i++) free(n->items[i]);
  free(n->items);
  memset(n, 0, sizeof *n);
}
static int by_strcmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *s = malloc(a + b + 2);
  if (!s) return NULL;
  memcpy(s, dir, a);
  s[a] = '/';
  memcpy(s + a + 1, name, b + 1);
  return s;
}

static int has_suffix(const char *name, const char *suffix) {
  size_t a = strlen(name), b = strlen(suffix);
  return a > b && strcasecmp(name + a - b, suffix) == 0;
}

/* The visible entries of dir, split into subfolders and files (names only), sorted. */
static int list_dir(const char *dir, names *dirs, names *files, char *err, size_t err_size) {
  DIR *d = opendir(dir);
  if (!d) return fail(err, err_size, "%s: %s", dir, strerror(errno));
  struct dirent *e;
  int rc = 0;
  errno = 0;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char *path = join(dir, e->d_name);
    struct stat st;
    if (!path) {
      rc = fail(err, err_size, "out of memory listing %s", dir);
      break;
    }
    /* stat follows links; a dangling link is skipped as torchvision's is_dir/is_file do. */
    if (stat(path, &st) == 0) {
      if (S_ISDIR(st.st_mode) && dirs && names_push(dirs, strdup(e->d_name)) != 0)
        rc = fail(err, err_size, "out of memory listing %s", dir);
      else if (S_ISREG(st.st_mode) && files && names_push(files, strdup(e->d_name)) != 0)
        rc = fail(err, err_size, "out of memory listing %s", dir);
    }
    free(path);
    errno = 0;
  }
  if (rc == 0 && errno != 0) rc = fail(err, err_size, "%s: %s", dir, strerror(errno));
  closedir(d);
  if (dirs && dirs->count > 1) qsort(dirs->items, dirs->count, sizeof *dirs->items, by_strcmp);
  if (files && files->count > 1) qsort(files->items, files->count, sizeof *files->items, by_strcmp);
  return rc;
}

typedef struct listing {
  names paths;
  size_t labels_cap;
  int32_t *labels;
} listing;

/* Every folder under `root` (itself included), as full paths. */
static int collect_folders(const char *root, int depth, names *out, char *err, size_t err_size) {
  if (depth > MAX_DEPTH)
    return fail(err, err_size, "%s: folders nested more than %d deep (a symbolic link loop?)", root,
                MAX_DEPTH);
  if (names_push(out, strdup(root)) != 0) return fail(err, err_size, "out of memory");
  names sub = {0};
  int rc = list_dir(root, &sub, NULL, err, err_size);
  for (size_t i = 0; rc == 0 && i < sub.count; i++) {
    char *path = join(root, sub.items[i]);
    if (!path) {
      rc = fail(err, err_size, "out of memory");
      break;
    }
    rc = collect_folders(path, depth + 1, out, err, err_size);
    free(path);
  }
  names_free(&sub);
  return rc;
}

static int add_class(image_folder *out, listing *l, const char *class_dir, int32_t label, char *err,
                     size_t err_size) {
  names folders = {0};
  int rc = collect_folders(class_dir, 0, &folders, err, err_size);
  /* (path, name) order = folders in sorted path order, each folder's files sorted. */
  if (folders.count > 1) qsort(folders.items, folders.count, sizeof *folders.items, by_strcmp);
  for (size_t f = 0; rc == 0 && f < folders.count; f++) {
    names files = {0};
    rc = list_dir(folders.items[f], NULL, &files, err, err_size);
    for (size_t i = 0; rc == 0 && i < files.count; i++) {
      const char *name = files.items[i];
      if (has_suffix(name, ".png")) {
        if (out->png_count++ == 0)
          snprintf(out->first_png, sizeof out->first_png, "%s/%s", folders.items[f], name);
        continue;
      }
      if (!has_suffix(name, ".jpg") && !has_suffix(name, ".jpeg")) continue;
      if (l->paths.count == l->labels_cap) {
        size_t cap = l->labels_cap ? 2 * l->labels_cap : 64;
        int32_t *grown = realloc(l->labels, cap * sizeof *grown);
        if (!grown) {
          rc = fail(err, err_size, "out of memory");
          break;
        }
        l->labels = grown;
        l->labels_cap = cap;
      }
      if (names_push(&l->paths, join(folders.items[f], name)) != 0) {
        rc = fail(err, err_size, "out of memory");
        break;
      }
      l->labels[l->paths.count - 1] = label;
    }
    names_free(&files);
  }
  names_free(&folders);
  return rc;
}

static int scan(const char *dir, image_folder *out, char *err, size_t err_size);

int image_folder_scan(const char *dir, image_folder *out, char *err, size_t err_size) {
  /* "DIR/" lists as "DIR": paths without a doubled slash. */
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  char *trimmed = strndup(dir, n);
  if (!trimmed) {
    memset(out, 0, sizeof *out);
    return fail(err, err_size, "out of memory");
  }
  int rc = scan(trimmed, out, err, err_size);
  free(trimmed);
  return rc;
}

static int scan(const char *dir, image_folder *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  struct stat st;
  if (stat(dir, &st) != 0) return fail(err, err_size, "%s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return fail(err, err_size, "%s: not a directory", dir);
  names classes = {0};
  if (list_dir(dir, &classes, NULL, err, err_size) != 0) {
    names_free(&classes);
    return -1;
  }
  if (classes.count == 0) {
    names_free(&classes);
    return fail(err, err_size, "%s: no class folders (expected DIR/<class>/<image>.jpg)", dir);
  }
  if (classes.count > INT32_MAX) {
    names_free(&classes);
    return fail(err, err_size, "%s: too many class folders", dir);
  }
  listing l = {{0}, 0, NULL};
  int rc = 0;
  for (size_t c = 0; rc == 0 && c < classes.count; c++) {
    char *path = join(dir, classes.items[c]);
    rc = path ? add_class(out, &l, path, (int32_t)c, err, err_size)
              : fail(err, err_size, "out of memory");
    free(path);
  }
  if (rc != 0) {
    names_free(&classes);
    names_free(&l.paths);
    free(l.labels);
    memset(out, 0, sizeof *out);
    return -1;
  }
  out->classes = classes.items;
  out->num_classes = (int32_t)classes.count;
  out->paths = l.paths.items;
  out->labels = l.labels;
  out->count = l.paths.count;
  return 0;
}

void image_folder_free(image_folder *folder) {
  if (!folder) return;
  for (int32_t i = 0; i < folder->num_classes; i++) free(folder->classes[i]);
  free(folder->classes);
  for (size_t i = 0; i < folder->count; i++) free(folder->paths[i]);
  free(folder->paths);
  free(folder->labels);
  memset(folder, 0, sizeof *folder);
}
