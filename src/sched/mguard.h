/* mguard.h: admission of the metrics endpoint's connections (pure: no
 * sockets, no clock; metrics.c feeds it libmicrohttpd's connection events).
 *
 * The endpoint has a fixed number of slots. A client that opens connections
 * and never finishes its request (half-open, slowloris) or never reads the
 * answer must not lock the scrapers out, and refusing new connections at a
 * cap would do exactly that. So a new connection is always taken, and when
 * it puts its source address over SD_MGUARD_PER_ADDR, or the endpoint over
 * SD_MGUARD_MAX, an older one is closed instead: the oldest of that address
 * (or of all) that is not in the middle of a request, else the oldest of
 * them. A scrape completes its request within one loop pass of arriving, so
 * a flood only ever evicts the flooder's own older connections, and one
 * source address cannot evict anyone else's. */
#ifndef SD_MGUARD_H
#define SD_MGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SD_MGUARD_MAX 64     /* live connections, all addresses */
#define SD_MGUARD_PER_ADDR 8 /* live connections of one source address */
/* Evicted connections still hold a slot until libmicrohttpd has closed them
 * (the next loop pass); it accepts at most 10 connections a pass. */
#define SD_MGUARD_SLOTS (SD_MGUARD_MAX + 16)

struct sd_mguard_slot {
    uint8_t addr[16]; /* IPv6, or IPv4-mapped IPv6 */
    uint64_t since;   /* order of opening or of the last request's end */
    int fd;           /* opaque here: what the caller closes */
    bool used, busy, evicted;
};

struct sd_mguard {
    struct sd_mguard_slot slot[SD_MGUARD_SLOTS];
    uint64_t seq;
    size_t live;             /* used and not evicted */
    uint64_t opened_total;   /* connections taken */
    uint64_t evicted_total;  /* closed to make room for newer ones */
};

/* A new connection from addr: returns its slot, or -1 when every slot is
 * taken (the caller closes it). *victim gets the slot of a connection the
 * caller must close now, or -1. */
int sd_mguard_open(struct sd_mguard *g, const uint8_t addr[16], int fd, int *victim);
/* A request's headers are complete (busy) / its answer is sent (idle). */
void sd_mguard_busy(struct sd_mguard *g, int slot);
void sd_mguard_idle(struct sd_mguard *g, int slot);
/* The connection is gone (closed by either side, evicted or not). */
void sd_mguard_close(struct sd_mguard *g, int slot);

#endif
