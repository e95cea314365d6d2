/* fuzz_proto.c: libFuzzer target for the record decoder.
 *
 * Any input either fails cs_msg_decode or decodes into a message that
 * re-encodes to exactly the same bytes and decodes to the same struct: the
 * codec has no field it ignores, no padding it lets through, no string it
 * reads past its terminator. Sanitizers (address, undefined) catch any
 * out-of-bounds read on the way. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cs_msg m, again;
    const char *why = NULL;
    if (cs_msg_decode(data, size, &m, &why) < 0) {
        if (!why)
            __builtin_trap(); /* every rejection names its rule */
        return 0;
    }
    uint8_t buf[CS_MSG_MAX];
    int n = cs_msg_encode(&m, buf, sizeof buf);
    if (n < 0 || (size_t)n != size || memcmp(buf, data, size) != 0)
        __builtin_trap();
    if (size != cs_msg_size(m.type) || size > CS_MSG_MAX)
        __builtin_trap();
    if (cs_msg_decode(buf, (size_t)n, &again, NULL) < 0 || memcmp(&m, &again, sizeof m) != 0)
        __builtin_trap();
    return 0;
}
