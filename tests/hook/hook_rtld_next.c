/* hook_rtld_next.c: the dlsym override keeps RTLD_NEXT's meaning.
 *
 * glibc resolves RTLD_NEXT relative to the object that called dlsym, found
 * from the return address. The override forwards RTLD_NEXT with a tail call
 * so that glibc still sees the application's object as the caller. Linked
 * against librtldA.so then librtldB.so: A's RTLD_NEXT lookup must find B. */
#include "hooktest.h"

int cs_probe(void);
int cs_probe_next(void);

static void rtld_next_is_relative_to_the_caller(void **state)
{
    (void)state;
    assert_int_equal(cs_probe(), 'A');
    assert_int_equal(cs_probe_next(), 'B');
}

int main(int argc, char **argv)
{
    hooktest_preload(argc, argv, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rtld_next_is_relative_to_the_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
