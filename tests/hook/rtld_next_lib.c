/* rtld_next_lib.c: built twice, as librtldA.so (-DWHICH='A') and
 * librtldB.so (-DWHICH='B'). Each defines cs_probe(); A also asks for the
 * *next* definition with dlsym(RTLD_NEXT), which must be B's even though
 * the call goes through libcushare.so's dlsym override. */
#include <dlfcn.h>

__attribute__((visibility("default"))) int cs_probe(void);
__attribute__((visibility("default"))) int cs_probe_next(void);

int cs_probe(void)
{
    return WHICH;
}

int cs_probe_next(void)
{
    int (*next)(void);
    *(void **)&next = dlsym(RTLD_NEXT, "cs_probe");
    return next ? next() : 0;
}
