/* Internal to libmooncake_store (offthread.go): not part of the public API. */
#ifndef MOONCAKE_OFFTHREAD_H
#define MOONCAKE_OFFTHREAD_H
#include <stdint.h>
#include <stddef.h>

/* One call run off the calling C thread. The C side owns it (on its stack) and waits until
 * done is 1; the goroutine writes rc and err (malloc'd text of the last error, or NULL)
 * before it sets done, and never touches the call after. */
typedef struct mc_call {
	uint32_t done;
	int64_t rc;
	char *err;
} mc_call;

void mc_call_done(mc_call *call);

#endif
