/* hook_config.c: the hook's settings (src/hook/config.c) against hostile
 * and broken environments. Every variable may come from a pod spec written
 * by someone else, a typo or an attacker: a bad value gets the default (and
 * a warning), never a crash, an overflow or a value out of range. The size
 * settings that split memory (CUSHARE_SEG_PART, CUSHARE_PIN_PIECE) are
 * rounded up to 2 MiB, and a size beyond any machine's (2^48) counts as
 * `whole`, so that the rounding cannot overflow. config.c is linked in
 * directly; cs_config_load() reads the environment each call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/proto.h"
#include "common/util.h"
#include "hook/config.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static const char *const vars[] = {
    "CUSHARE_SEG_PART",   "CUSHARE_PIN_PIECE", "CUSHARE_PIN_KEEP",      "CUSHARE_MEM_LIMIT",
    "CUSHARE_HOST_RESERVE", "CUSHARE_WEIGHT",  "CUSHARE_PRIORITY",      "CUSHARE_NAME",
    "CUSHARE_SOCKET",     "CUSHARE_DAEMON_WAIT_MS", "CUSHARE_LOG_LEVEL", "POD_NAMESPACE",
};

static int clean(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

/* The value cs_config_load() gives the size setting `name` read as v. */
static uint64_t size_of(const char *name, const char *v)
{
    setenv(name, v, 1);
    cs_config_load();
    unsetenv(name);
    return !strcmp(name, "CUSHARE_SEG_PART") ? cs_cfg.seg_part : cs_cfg.pin_piece;
}

static void check_split_size(const char *name, uint64_t dflt)
{
    struct { const char *v; uint64_t want; } cases[] = {
        {"2G", 2 * GiB},
        {"whole", 0},
        {"WHOLE", 0},
        {"0", 0},
        {"1", 2 * MiB},           /* rounded up to the segment granularity */
        {"3M", 4 * MiB},
        {" 64 MiB ", 64 * MiB},
        {".5G", 512 * MiB},
        {"281474976710656", 1ull << 48},       /* 2^48: still a size */
        {"281474976710657", 0},                /* beyond: whole, no overflow */
        {"99999T", 0},
        {"4611686018427387904", 0},            /* 2^62: the parser's limit */
        {"18446744073709551615", dflt},        /* beyond the parser's: default */
        {"1e400", dflt},                       /* overflows a double */
        {"-1", dflt},
        {"-0", dflt},
        {"nan", dflt},
        {"inf", dflt},
        {"12X", dflt},
        {"2G2", dflt},
        {"0x10M", dflt},                       /* decimal only: no hexadecimal, */
        {"1e3M", dflt},                        /* no exponent */
        {"1.5G", 1536 * MiB},
        {"\xff\xfe", dflt},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got = size_of(name, cases[i].v);
        if (got != cases[i].want)
            fail_msg("%s=\"%s\": %llu, want %llu", name, cases[i].v, (unsigned long long)got,
                     (unsigned long long)cases[i].want);
    }
    /* Unset, or set empty: the default. */
    cs_config_load();
    assert_int_equal(!strcmp(name, "CUSHARE_SEG_PART") ? cs_cfg.seg_part : cs_cfg.pin_piece,
                     dflt);
    assert_int_equal(size_of(name, ""), dflt);
}

static void seg_part_hostile(void **state)
{
    (void)state;
    check_split_size("CUSHARE_SEG_PART", 2 * GiB);
}

static void pin_piece_hostile(void **state)
{
    (void)state;
    check_split_size("CUSHARE_PIN_PIECE", 64 * MiB);
}

/* The other sizes: a bad value means the default, never a partial parse. */
static void other_sizes_hostile(void **state)
{
    (void)state;
    setenv("CUSHARE_MEM_LIMIT", "12G", 1);
    setenv("CUSHARE_PIN_KEEP", "20G", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.mem_limit, 12 * GiB);
    assert_int_equal(cs_cfg.pin_keep, 20 * GiB);
    setenv("CUSHARE_MEM_LIMIT", "12Gigs", 1);
    setenv("CUSHARE_PIN_KEEP", "-5G", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.mem_limit, 0);           /* no limit */
    assert_int_equal(cs_cfg.pin_keep, UINT64_MAX);  /* keep all */
    setenv("CUSHARE_PIN_KEEP", "ALL", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.pin_keep, UINT64_MAX);

    /* The host reserve: at least 4 GiB or a tenth of the RAM, at most half;
     * a reserve of all the RAM or more would refuse every pin. */
    uint64_t total = cs_host_mem_total();
    uint64_t dflt = total / 10 > 4 * GiB ? total / 10 : 4 * GiB;
    if (total && dflt > total / 2)
        dflt = total / 2;
    const char *bad[] = {"99999T", "lots", "-1G", "1e400"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("CUSHARE_HOST_RESERVE", bad[i], 1);
        cs_config_load();
        if (cs_cfg.host_reserve != dflt)
            fail_msg("CUSHARE_HOST_RESERVE=%s: %llu, want the default %llu", bad[i],
                     (unsigned long long)cs_cfg.host_reserve, (unsigned long long)dflt);
    }
    setenv("CUSHARE_HOST_RESERVE", "1G", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.host_reserve, GiB);
}

/* What a job may not claim for itself is not decided here (the daemon's
 * configuration decides class and weight); what it says must still parse
 * into range, and names must be printable and terminated. */
static void claims_and_names_hostile(void **state)
{
    (void)state;
    const char *weights[] = {"0", "1000001", "-1", "1.5", "1e3", "99999999999999999999"};
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
        setenv("CUSHARE_WEIGHT", weights[i], 1);
        cs_config_load();
        if (cs_cfg.weight != 1)
            fail_msg("CUSHARE_WEIGHT=%s: %u, want 1", weights[i], cs_cfg.weight);
    }
    setenv("CUSHARE_WEIGHT", "1000000", 1);
    setenv("CUSHARE_PRIORITY", "root", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.weight, 1000000);
    assert_int_equal(cs_cfg.priority, CS_PRIO_NORMAL);

    char name[4 * CS_NAME_LEN];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    name[1] = '\n';
    name[2] = '\x1b';
    setenv("CUSHARE_NAME", name, 1);
    setenv("POD_NAMESPACE", "team\x7f" "a", 1);
    cs_config_load();
    assert_int_equal(strlen(cs_cfg.name), CS_NAME_LEN - 1);
    assert_int_equal(cs_cfg.name[1], '?');
    assert_int_equal(cs_cfg.name[2], '?');
    assert_string_equal(cs_cfg.ns, "team?a");

    char sock[512];
    memset(sock, 's', sizeof sock - 1);
    sock[sizeof sock - 1] = '\0';
    setenv("CUSHARE_SOCKET", sock, 1);
    setenv("CUSHARE_DAEMON_WAIT_MS", "-5", 1);
    setenv("CUSHARE_LOG_LEVEL", "verbose", 1);
    cs_config_load();
    char dflt[sizeof cs_cfg.socket];
    cs_default_socket_path(dflt, sizeof dflt);
    assert_string_equal(cs_cfg.socket, dflt);
    assert_int_equal(cs_cfg.daemon_wait_ms, 30000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(seg_part_hostile, clean),
        cmocka_unit_test_setup(pin_piece_hostile, clean),
        cmocka_unit_test_setup(other_sizes_hostile, clean),
        cmocka_unit_test_setup(claims_and_names_hostile, clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
