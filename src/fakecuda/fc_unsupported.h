/* fc_unsupported.h: the fallback for entry points the simulator does not
 * implement. Placeholder until the simulator lands; see fc_stubs.c. */
#ifndef FC_UNSUPPORTED_H
#define FC_UNSUPPORTED_H
#endif
