/* image_folder.h — a torchvision ImageFolder directory: DIR/<class>/<image>, classes in
 * sorted folder order (index 0, 1, ...), images sorted by name within a class. Files
 * ending in .jpg or .jpeg (any case) are images; .png files are counted separately so
 * the caller can say they are not read; anything else is ignored. */
#ifndef IMAGENET_IMAGE_FOLDER_H
#define IMAGENET_IMAGE_FOLDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct image_folder {
  char **classes; /* [num_classes] folder names, sorted */
  int32_t num_classes;
  char **paths;    /* [count] full paths */
  int32_t *labels; /* [count] class index, 0-based */
  size_t count;
  size_t png_count;    /* .png files seen and not listed */
  char first_png[512]; /* one of them, for the message */
} image_folder;

/* 0, or -1 with err (DIR unreadable, no class folders, out of memory). A folder with
 * class folders but no images is not an error here: count is 0. */
int image_folder_scan(const char *dir, image_folder *out, char *err, size_t err_size);
void image_folder_free(image_folder *folder);

#endif
