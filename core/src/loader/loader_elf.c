/* loader_elf.c — a plain-words reason why a file cannot be a loadable plugin, read from
 * its ELF headers. dlopen's own text ("invalid ELF header", "file too short") is terse
 * and differs between C libraries; users need to know whether they pointed at the wrong
 * file (no ELF header, an executable, another architecture) or at a damaged copy
 * (truncated: headers that point past the end of the file). */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/loader_impl.h"

#if __SIZEOF_POINTER__ == 8
#define HOST_CLASS ELFCLASS64
#else
#define HOST_CLASS ELFCLASS32
#endif

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#else
#define HOST_MACHINE 0 /* unknown: skip the check rather than refuse good files */
#endif

static bool read_at(int fd, void *buf, size_t size, off_t offset) {
  ssize_t n = pread(fd, buf, size, offset);
  return n == (ssize_t)size;
}

static const char *type_name(unsigned type) {
  switch (type) {
    case ET_REL: return "a relocatable object file (.o)";
    case ET_EXEC: return "an executable";
    case ET_CORE: return "a core dump";
    default: return "an ELF file of unknown type";
  }
}

static const char *truncated(char *buf, size_t size, long long have, unsigned long long need) {
  snprintf(buf, size, "truncated or corrupt ELF file (%lld bytes, its headers need at least %llu)",
           have, need);
  return buf;
}

/* Checks the layout the dynamic loader relies on: header, program headers and the
 * segments they map, section headers. */
static const char *check_open(int fd, long long file_size, char *buf, size_t size) {
  unsigned char ident[EI_NIDENT] = {0};
  ssize_t got = pread(fd, ident, sizeof ident, 0);
  if (got < SELFMAG || memcmp(ident, ELFMAG, SELFMAG) != 0) {
    snprintf(buf, size, "not a shared object (no ELF header)");
    return buf;
  }
  if (ident[EI_CLASS] != HOST_CLASS) {
    snprintf(buf, size, "built for %s machines, this host is %s",
             ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "64-bit",
             HOST_CLASS == ELFCLASS32 ? "32-bit" : "64-bit");
    return buf;
  }
  ElfW(Ehdr) eh;
  if (file_size < (long long)sizeof eh || !read_at(fd, &eh, sizeof eh, 0))
    return truncated(buf, size, file_size, sizeof eh);
  if (HOST_MACHINE != 0 && eh.e_machine != HOST_MACHINE) {
    snprintf(buf, size, "built for another architecture (ELF machine %u, this host is %u)",
             (unsigned)eh.e_machine, (unsigned)HOST_MACHINE);
    return buf;
  }
  if (eh.e_type != ET_DYN) {
    snprintf(buf, size, "%s, not a shared object", type_name(eh.e_type));
    return buf;
  }
  unsigned long long need = (unsigned long long)eh.e_phoff +
                            (unsigned long long)eh.e_phnum * eh.e_phentsize;
  if (need > (unsigned long long)file_size) return truncated(buf, size, file_size, need);
  if (eh.e_phentsize == sizeof(ElfW(Phdr))) {
    for (unsigned i = 0; i < eh.e_phnum; i++) {
      ElfW(Phdr) ph;
      if (!read_at(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (unsigned long long)i * sizeof ph)))
        return truncated(buf, size, file_size, need);
      unsigned long long end = (unsigned long long)ph.p_offset + ph.p_filesz;
      if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) && end > (unsigned long long)file_size)
        return truncated(buf, size, file_size, end);
    }
  }
  if (eh.e_shoff != 0) {
    need = (unsigned long long)eh.e_shoff + (unsigned long long)eh.e_shnum * eh.e_shentsize;
    if (need > (unsigned long long)file_size) return truncated(buf, size, file_size, need);
  }
  return NULL;
}

const char *loader_elf_problem(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(buf, size, "cannot be read (%s)", strerror(errno));
    return buf;
  }
  struct stat st;
  const char *problem;
  if (fstat(fd, &st) != 0) {
    snprintf(buf, size, "cannot be read (%s)", strerror(errno));
    problem = buf;
  } else {
    problem = check_open(fd, (long long)st.st_size, buf, size);
  }
  close(fd);
  return problem;
}
