/* What the C checks run outside the repository share (tests/dist/handles.c in a login session,
 * tests/vm/handles.c in the virtual machine): CHECK, which exits 1 with the file, line and a
 * message when its condition fails, and sleep_ms. */
#ifndef SYNAPS_SCOPE_CHECK_H
#define SYNAPS_SCOPE_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(cond, ...)                                                                                    \
    do {                                                                                                    \
        if (!(cond)) {                                                                                      \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);                                      \
            fprintf(stderr, __VA_ARGS__);                                                                   \
            fprintf(stderr, "\n");                                                                          \
            exit(1);                                                                                        \
        }                                                                                                   \
    } while (0)

static inline void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

#endif
