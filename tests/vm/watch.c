/* A daemon's watch from C on its tools' scopes, as alice in the virtual machine, against the real
 * systemd-oomd: built on the host by scripts/test-vm.sh against the C tarball,
 *   cc -std=c11 -Wall -Wextra -Werror -pedantic watch.c -lsynaps_scope -lpthread -Wl,-rpath,/home/alice/.local/lib
 * and started by daemon.py beside its tools:
 *   watch-c FILE UNIT...
 * Each warning goes to FILE as "SECONDS UNIT RULE SURE FIGURE LIMIT" (SECONDS on CLOCK_MONOTONIC,
 * Python's time.monotonic()). On SIGTERM the watch is freed, and a warning that came after
 * scope_oomd_watch_free returned would write "after-free" (the library promises none). */
#define _POSIX_C_SOURCE 200809L
#include <synaps_scope.h>

#include "check.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int freed;

static void warned(void *userdata, const scope_oomd_warning *warning) {
    (void)userdata;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&out_lock);
    if (atomic_load(&freed)) fprintf(out, "after-free\n");
    fprintf(out, "%.3f %s %s %s %.2f %.2f\n", (double)now.tv_sec + (double)now.tv_nsec / 1e9, warning->unit,
            warning->rule == SCOPE_OOMD_RULE_SWAP ? "swap" : "memory-pressure",
            warning->sure == SCOPE_SURENESS_LIKELY ? "likely" : "possible", warning->figure, warning->limit);
    fflush(out);
    pthread_mutex_unlock(&out_lock);
}

int main(int argc, char **argv) {
    CHECK(argc >= 3, "usage: %s FILE UNIT...", argv[0]);
    /* Blocked before the library starts any thread (they inherit the mask): SIGTERM is taken by
     * sigwait below, never by default on another thread. */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    CHECK(pthread_sigmask(SIG_BLOCK, &term, NULL) == 0, "block SIGTERM");
    out = fopen(argv[1], "a");
    CHECK(out != NULL, "%s", argv[1]);
    size_t count = (size_t)argc - 2;
    const scope_handle *handles[16];
    CHECK(count <= 16, "at most 16 units");
    for (size_t i = 0; i < count; i++) {
        scope_handle *handle = NULL;
        CHECK(scope_handle_from_manager(argv[2 + i], NULL, 3000, &handle) == SCOPE_RESULT_OK, "a handle on %s: %s",
              argv[2 + i], scope_last_error());
        handles[i] = handle;
    }
    scope_oomd_watch *watch = NULL;
    scope_result result = scope_oomd_watch_new(handles, count, NULL, 3000, warned, NULL, &watch);
    CHECK(result == SCOPE_RESULT_OK, "the watch: %s (kind %d)", scope_last_error(), (int)scope_oomd_last_cannot_warn());
    for (size_t i = 0; i < count; i++) scope_handle_free((scope_handle *)handles[i]);
    pthread_mutex_lock(&out_lock);
    fprintf(out, "watching %zu\n", scope_oomd_watch_watched_count(watch));
    fflush(out);
    pthread_mutex_unlock(&out_lock);
    int signal_number = 0;
    CHECK(sigwait(&term, &signal_number) == 0, "sigwait");
    scope_oomd_watch_free(watch);
    atomic_store(&freed, 1);
    struct timespec pause = {1, 0};
    nanosleep(&pause, NULL);
    fclose(out);
    return 0;
}
