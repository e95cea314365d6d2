/* exitprobe.c: stamps the time when C's exit() starts (an atexit handler
 * registered by probe.py at the script's end, so run first) and when this
 * library's destructor runs (bench/gpu/exitprobe/probe.sh). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static void stamp(const char *w)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(stderr, "PROBE %s %ld.%06ld\n", w, (long)t.tv_sec, t.tv_nsec / 1000);
}
static void at(void) { stamp("c-atexit"); }
void probe_register(void) { atexit(at); }
__attribute__((destructor)) static void d(void) { stamp("dtor"); }
