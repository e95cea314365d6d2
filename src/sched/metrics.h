/* metrics.h: the Prometheus endpoint (--metrics HOST:PORT, GET /metrics).
 *
 * libmicrohttpd runs in its "external" epoll mode: no thread of its own. Its
 * epoll fd sits in the daemon's epoll set, and the loop calls
 * sd_metrics_run when that fd is ready or MHD's own timeout is due, so the
 * page is rendered on the loop's thread from live state with no lock.
 * Connections are admitted by mguard.h (the oldest is evicted at a cap, so
 * a flood cannot lock scrapers out). docs/metrics.md lists every series.
 */
#ifndef SD_METRICS_H
#define SD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "sched/buf.h"

struct sd_server;
struct sd_metrics;

/* Starts the endpoint on "HOST:PORT" (port 0: any free port, logged and
 * shown by status). Returns NULL with a reason in err. */
struct sd_metrics *sd_metrics_start(struct sd_server *s, const char *hostport, char *err,
                                    size_t errlen);
void sd_metrics_stop(struct sd_metrics *m);
int sd_metrics_fd(const struct sd_metrics *m);
uint16_t sd_metrics_port(const struct sd_metrics *m);
/* epoll_wait timeout the endpoint needs (-1: none). */
int sd_metrics_timeout_ms(struct sd_metrics *m);
void sd_metrics_run(struct sd_metrics *m);

/* Renders the whole page into b (pure: used by the endpoint and tests). */
void sd_metrics_render(const struct sd_server *s, struct sd_buf *b);

#endif
