/* test_image_folder.c — ImageFolder listing (plugins/datasources/imagenet/image_folder.c) on
 * folders the test builds: classes in strcmp order (as Python's sorted(): upper case
 * first), images in (folder, name) order including nested folders as torchvision's
 * os.walk finds them, .jpg/.jpeg in any case listed, .png counted and named, other files,
 * hidden entries and plain files beside the classes ignored, an empty class keeping its
 * index; a missing path, a file, and a folder without class folders refused by name. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_folder.h"

static char dir[256];
static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_image_folder.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}
static void make_dir(const char *rel) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  ck_assert_msg(mkdir(path, 0755) == 0, "mkdir %s", path);
}
static void touch(const char *rel) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("x", f);
  fclose(f);
}

START_TEST(lists_in_torchvision_order) {
  make_dir("dog");
  make_dir("Cat");
  make_dir("cat");
  make_dir("empty");
  make_dir(".ipynb_checkpoints");
  make_dir("dog/sub");
  make_dir("dog/sub-a");
  touch("README.txt");
  touch(".ipynb_checkpoints/a.jpg");
  touch("dog/b.JPG");
  touch("dog/a.jpeg");
  touch("dog/C.Jpeg");
  touch("dog/sub/z.jpg");
  touch("dog/sub-a/y.jpg");
  touch("dog/notes.txt");
  touch("dog/.hidden.jpg");
  touch("dog/photo.png");
  touch("dog/jpg"); /* no dot: not an image */
  touch("Cat/x.jpg");
  touch("cat/Y.PNG");
  touch("cat/w.jpg");
  image_folder f;
  char err[512];
  ck_assert_msg(image_folder_scan(dir, &f, err, sizeof err) == 0, "%s", err);
  const char *classes[] = {"Cat", "cat", "dog", "empty"};
  ck_assert_int_eq(f.num_classes, 4);
  for (int i = 0; i < 4; i++) ck_assert_str_eq(f.classes[i], classes[i]);
  /* dog: its own files first, then "dog/sub" before "dog/sub-a" (a prefix sorts first). */
  const char *paths[] = {"Cat/x.jpg", "cat/w.jpg",     "dog/C.Jpeg",     "dog/a.jpeg",
                         "dog/b.JPG", "dog/sub/z.jpg", "dog/sub-a/y.jpg"};
  const int labels[] = {0, 1, 2, 2, 2, 2, 2};
  ck_assert_uint_eq(f.count, 7);
  for (int i = 0; i < 7; i++) {
    char want[512];
    snprintf(want, sizeof want, "%s/%s", dir, paths[i]);
    ck_assert_str_eq(f.paths[i], want);
    ck_assert_int_eq(f.labels[i], labels[i]);
  }
  ck_assert_uint_eq(f.png_count, 2);
  ck_assert_msg(strstr(f.first_png, ".png") || strstr(f.first_png, ".PNG"), "%s", f.first_png);
  image_folder_free(&f);
  ck_assert_ptr_null(f.paths);
  /* A trailing slash lists the same paths. */
  char slashed[300];
  snprintf(slashed, sizeof slashed, "%s//", dir);
  ck_assert_msg(image_folder_scan(slashed, &f, err, sizeof err) == 0, "%s", err);
  char want[512];
  snprintf(want, sizeof want, "%s/%s", dir, paths[0]);
  ck_assert_str_eq(f.paths[0], want);
  image_folder_free(&f);
}
END_TEST

START_TEST(nested_order_matches_os_walk) {
  /* sorted(os.walk(...)) orders folders by path string: "c/a" < "c/a b" < "c/a/x" < "c/b". */
  make_dir("c");
  make_dir("c/a");
  make_dir("c/a b");
  make_dir("c/a/x");
  make_dir("c/b");
  touch("c/a/1.jpg");
  touch("c/a b/2.jpg");
  touch("c/a/x/3.jpg");
  touch("c/b/4.jpg");
  touch("c/5.jpg");
  image_folder f;
  char err[512];
  ck_assert_msg(image_folder_scan(dir, &f, err, sizeof err) == 0, "%s", err);
  const char *paths[] = {"c/5.jpg", "c/a/1.jpg", "c/a b/2.jpg", "c/a/x/3.jpg", "c/b/4.jpg"};
  ck_assert_uint_eq(f.count, 5);
  for (int i = 0; i < 5; i++) {
    char want[512];
    snprintf(want, sizeof want, "%s/%s", dir, paths[i]);
    ck_assert_str_eq(f.paths[i], want);
  }
  image_folder_free(&f);
}
END_TEST

START_TEST(symlinks_followed_loops_refused) {
  make_dir("real");
  touch("real/a.jpg");
  char target[512], link[512];
  snprintf(target, sizeof target, "%s/real", dir);
  snprintf(link, sizeof link, "%s/linked", dir);
  ck_assert_int_eq(symlink(target, link), 0);
  image_folder f;
  char err[512];
  ck_assert_msg(image_folder_scan(dir, &f, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(f.num_classes, 2); /* "linked", "real" */
  ck_assert_uint_eq(f.count, 2);
  image_folder_free(&f);
  /* A link to its own folder: os.walk would loop; here it is an error naming the path. */
  snprintf(link, sizeof link, "%s/real/loop", dir);
  ck_assert_int_eq(symlink(target, link), 0);
  ck_assert_int_eq(image_folder_scan(dir, &f, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "nested more than") && strstr(err, "/loop/loop/"), "%s", err);
}
END_TEST

START_TEST(class_folders_without_images) {
  make_dir("a");
  touch("a/readme.txt");
  image_folder f;
  char err[512];
  ck_assert_int_eq(image_folder_scan(dir, &f, err, sizeof err), 0);
  ck_assert_int_eq(f.num_classes, 1);
  ck_assert_uint_eq(f.count, 0);
  image_folder_free(&f);
}
END_TEST

START_TEST(refuses_bad_dirs) {
  image_folder f;
  char err[512], path[512];
  snprintf(path, sizeof path, "%s/missing", dir);
  ck_assert_int_eq(image_folder_scan(path, &f, err, sizeof err), -1);
  ck_assert_msg(strstr(err, path) && strstr(err, "No such file"), "%s", err);
  touch("file");
  snprintf(path, sizeof path, "%s/file", dir);
  ck_assert_int_eq(image_folder_scan(path, &f, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not a directory"), "%s", err);
  touch("loose.jpg");
  ck_assert_int_eq(image_folder_scan(dir, &f, err, sizeof err), -1);
  ck_assert_msg(strstr(err, dir) && strstr(err, "no class folders"), "%s", err);
  ck_assert_uint_eq(f.count, 0);
  if (geteuid() != 0) { /* root reads anything */
    make_dir("locked");
    snprintf(path, sizeof path, "%s/locked", dir);
    chmod(path, 0);
    ck_assert_int_eq(image_folder_scan(path, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "Permission denied"), "%s", err);
    chmod(path, 0755);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("image_folder");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, lists_in_torchvision_order);
  tcase_add_test(tc, nested_order_matches_os_walk);
  tcase_add_test(tc, symlinks_followed_loops_refused);
  tcase_add_test(tc, class_folders_without_images);
  tcase_add_test(tc, refuses_bad_dirs);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
