/* checks.h: the CHECK and EQ assertions of the C test programs (check.c, gpucheck.c). A failed
 * check prints a FAIL line with the library's last error and counts in failures. */
#ifndef MOONCAKE_CHECKS_H
#define MOONCAKE_CHECKS_H
#include <stdio.h>

#include "mooncake_store.h"

static int failures;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            printf(__VA_ARGS__);                                                  \
            printf(" (last error: %s)\n", mooncake_store_last_error());           \
            failures++;                                                           \
        }                                                                         \
    } while (0)

#define EQ(got, want, what)                                                       \
    CHECK((long long)(got) == (long long)(want), "%s: got %lld, want %lld", what, \
          (long long)(got), (long long)(want))
#endif
