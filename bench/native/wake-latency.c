/*
 * What this machine charges for waking a thread that has been asleep: a lone webhook's commit is
 * handed to the writer thread and its answer handed back, and each hand-off wakes a thread that
 * slept through the fsync. Under a hypervisor, waking a virtual CPU that went idle can cost
 * a hundred microseconds; on bare metal it is expected to cost a few. This prints it, so the
 * one-client rows can be read against the machine they ran on.
 *
 * Usage: wake-latency SLEEP_US SAMPLES same|other
 * Two threads, pinned to the first CPU this process may use and to the same one or the next, pass
 * a byte through a pipe and back after the first has slept SLEEP_US; prints the median round trip
 * in microseconds.
 *
 * Built by bench/lib/native.ts with the system's C compiler (cc) at bench time; where there is
 * none, the row is skipped and the bench says so.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int there[2], back[2];
static int cpu_b;

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *echo(void *unused) {
  (void)unused;
  if (pin(cpu_b) != 0) return NULL;
  char c;
  while (read(there[0], &c, 1) == 1)
    if (write(back[1], &c, 1) != 1) break;
  return NULL;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: wake-latency SLEEP_US SAMPLES same|other\n");
    return 2;
  }
  long sleep_us = atol(argv[1]);
  int samples = atoi(argv[2]);
  int other = argv[3][0] == 'o';
  // The CPUs this process may run on (a container's cpuset need not start at 0).
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  int cpu_a = -1;
  cpu_b = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (cpu_a < 0) cpu_a = cpu;
    else if (cpu_b < 0) cpu_b = cpu;
  }
  if (!other) cpu_b = cpu_a;
  if (cpu_a < 0 || cpu_b < 0) {
    fprintf(stderr, "no second CPU to run on\n");
    return 3;
  }
  if (samples < 1 || pipe(there) != 0 || pipe(back) != 0) return 1;
  pthread_t t;
  if (pin(cpu_a) != 0 || pthread_create(&t, NULL, echo, NULL) != 0) {
    fprintf(stderr, "cannot pin to CPUs %d and %d\n", cpu_a, cpu_b);
    return 1;
  }
  double *trips = malloc(sizeof(double) * samples);
  char c = 'x';
  struct timespec nap = { sleep_us / 1000000, (sleep_us % 1000000) * 1000 };
  // A first exchange, untimed: the echo thread is pinned and waiting before the samples start.
  if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) return 1;
  for (int i = 0; i < samples; i++) {
    nanosleep(&nap, NULL);
    double s = now_us();
    if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) return 1;
    trips[i] = now_us() - s;
  }
  qsort(trips, samples, sizeof(double), by_value);
  printf("%.1f\n", trips[samples / 2]);
  return 0;
}
