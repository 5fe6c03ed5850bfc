/*
 * An SD card's fsync, for the benchmarks: LD_PRELOAD this into a process and every fsync() and
 * fdatasync() it makes waits SLOW_FSYNC_MS milliseconds (a decimal number) before doing the real
 * one. A Pi's SD card takes milliseconds per sync where this machine's disk takes microseconds;
 * what a design does with the fsyncs it makes (one per record, or one per batch) shows only then.
 *
 * Built by bench/lib/slow-fsync.ts with the system's C compiler (cc) at bench time; where there is
 * none, the SD-card rows are skipped and the bench says so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

static long delay_ns(void) {
  static long ns = -1;
  if (ns < 0) {
    const char *v = getenv("SLOW_FSYNC_MS");
    ns = v ? (long)(strtod(v, NULL) * 1e6) : 0;
  }
  return ns;
}

static void wait_like_an_sd_card(void) {
  long ns = delay_ns();
  if (ns <= 0) return;
  struct timespec t = { ns / 1000000000L, ns % 1000000000L };
  int saved = errno;
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
  errno = saved;
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  wait_like_an_sd_card();
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  wait_like_an_sd_card();
  return real(fd);
}
