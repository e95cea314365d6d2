/* dp_install.h: files the plugin provides on the node (see dp_install.c). */
#ifndef DP_INSTALL_H
#define DP_INSTALL_H

#include <stddef.h>

#include "k8s/dp.h"

/* Copies src to dst (creating dst's directory) unless they are one file. */
int dp_install_lib(const char *src, const char *dst, char *err, size_t cap);
/* Writes the ld.so.preload file naming the library's path in containers. */
int dp_install_preload(const char *file, const char *lib_in_container, char *err, size_t cap);

#endif
