/* test_mguard.c: the metrics endpoint's connection admission (mguard.c):
 * who is evicted when an address or the endpoint is over its cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sched/mguard.h"

static struct sd_mguard g;

static int reset(void **state)
{
    (void)state;
    memset(&g, 0, sizeof g);
    return 0;
}

static void addr(uint8_t a[16], unsigned n)
{
    memset(a, 0, 16);
    a[10] = a[11] = 0xff;
    a[12] = 10;
    a[15] = (uint8_t)n;
}

/* Opens a connection from address n (its fd is 1000 + slot); returns the
 * slot; *victim as sd_mguard_open's. */
static int open_from(unsigned n, int *victim)
{
    uint8_t a[16];
    addr(a, n);
    int s = sd_mguard_open(&g, a, -1, victim);
    assert_true(s >= 0);
    g.slot[s].fd = 1000 + s;
    return s;
}

/* One address over its share: its oldest connection goes, idle before busy;
 * the newcomer is never the victim. */
static void test_per_address_evicts_oldest_idle(void **state)
{
    (void)state;
    int slot[SD_MGUARD_PER_ADDR], v;
    for (int i = 0; i < SD_MGUARD_PER_ADDR; i++) {
        slot[i] = open_from(1, &v);
        assert_int_equal(v, -1);
    }
    sd_mguard_busy(&g, slot[0]); /* a request in progress: spared while others idle */
    int n = open_from(1, &v);
    assert_int_equal(v, slot[1]);
    assert_true(g.slot[slot[1]].evicted);
    assert_int_equal(g.live, SD_MGUARD_PER_ADDR);
    assert_int_equal(g.evicted_total, 1);
    /* Its request done, slot 0 is the youngest idle one: slot 2 goes next. */
    sd_mguard_idle(&g, slot[0]);
    open_from(1, &v);
    assert_int_equal(v, slot[2]);
    assert_true(n != v);
    /* Every one busy: the oldest busy one goes. */
    for (int i = 0; i < SD_MGUARD_SLOTS; i++)
        if (g.slot[i].used && !g.slot[i].evicted)
            sd_mguard_busy(&g, i);
    open_from(1, &v);
    assert_int_equal(v, slot[3]);
}

/* Another address is never touched by one address's flood. */
static void test_flood_spares_other_addresses(void **state)
{
    (void)state;
    int v;
    int other = open_from(2, &v);
    for (int i = 0; i < 200; i++) {
        open_from(1, &v);
        if (v >= 0)
            sd_mguard_close(&g, v); /* MHD closes it on the next pass */
        assert_true(v != other);
    }
    assert_false(g.slot[other].evicted);
    assert_int_equal(g.live, SD_MGUARD_PER_ADDR + 1);
    assert_int_equal(g.evicted_total, 200 - SD_MGUARD_PER_ADDR);
    assert_int_equal(g.opened_total, 201);
}

/* The endpoint over its total: the oldest idle connection of anyone. */
static void test_total_cap_evicts_oldest(void **state)
{
    (void)state;
    int v, first = -1;
    for (unsigned i = 0; i < SD_MGUARD_MAX; i++) {
        int s = open_from(100 + i % 16, &v);
        assert_int_equal(v, -1);
        if (i == 0)
            first = s;
    }
    assert_int_equal(g.live, SD_MGUARD_MAX);
    open_from(1, &v);
    assert_int_equal(v, first);
    assert_int_equal(g.live, SD_MGUARD_MAX);
}

/* Evicted connections hold their slots until closed; with every slot
 * taken the newcomer is refused (the caller closes it), and a close frees
 * one. Closing twice or an unknown slot changes nothing. */
static void test_slots_run_out_and_free(void **state)
{
    (void)state;
    int v;
    for (int i = 0; i < SD_MGUARD_SLOTS; i++)
        open_from(1, &v);
    assert_int_equal(g.live, SD_MGUARD_PER_ADDR);
    uint8_t a[16];
    addr(a, 1);
    assert_int_equal(sd_mguard_open(&g, a, 7, &v), -1);
    assert_int_equal(v, -1);
    sd_mguard_close(&g, 0); /* evicted long ago */
    sd_mguard_close(&g, 0);
    sd_mguard_close(&g, -1);
    sd_mguard_close(&g, SD_MGUARD_SLOTS);
    sd_mguard_busy(&g, SD_MGUARD_SLOTS);
    sd_mguard_idle(&g, -1);
    assert_int_equal(g.live, SD_MGUARD_PER_ADDR);
    assert_int_equal(sd_mguard_open(&g, a, 7, &v), 0);
    assert_int_equal(g.slot[0].fd, 7);
    assert_int_equal(g.live, SD_MGUARD_PER_ADDR);
    /* A live connection closed by its client: one fewer live. */
    sd_mguard_close(&g, 0);
    assert_int_equal(g.live, SD_MGUARD_PER_ADDR - 1);
}

#define T(f) cmocka_unit_test_setup(f, reset)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_per_address_evicts_oldest_idle),
        T(test_flood_spares_other_addresses),
        T(test_total_cap_evicts_oldest),
        T(test_slots_run_out_and_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
