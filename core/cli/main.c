/* main.c — the cnnbench executable: the whole program lives in libcnnb (cnnb_main), so
 * the executable and the plugins it loads share one copy of the SDK. */
#include <cnnb/main.h>

int main(int argc, char **argv) { return cnnb_main(argc, argv); }
