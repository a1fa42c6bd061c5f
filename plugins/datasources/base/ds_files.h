/* ds_files.h — what a datasource asks of the paths it looks for its split's files at:
 * whether one is a regular file, or a directory (a dataset's DIR/raw, DIR/cifar-10-...). */
#ifndef DS_FILES_H
#define DS_FILES_H

/* 1 when path names a regular file (following symlinks), else 0. */
int ds_is_file(const char *path);
/* 1 when path names a directory (following symlinks), else 0. */
int ds_is_dir(const char *path);

#endif
