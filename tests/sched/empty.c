/* empty.c: a shared object that does nothing (see mk/sched.mk). */
int cs_test_empty_marker(void);
int cs_test_empty_marker(void)
{
    return 0;
}
