/* The long run (issue 13): a million wraps and ten thousand probes in one process, against the
 * installed library, RSS sampled every 100,000 wraps; over the second half it must stay flat within
 * 8 MB (a leak of 16 bytes a wrap would exceed that). Built and run by scripts/long-run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "synaps_scope.h"

#define WRAPS 1000000L
#define PROBES 10000L
#define SAMPLES (WRAPS / 100000L)
#define MARGIN_MB 8.0

static double rss_mb(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (status != NULL && fgets(line, sizeof line, status) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    }
    if (status != NULL) fclose(status);
    return (double)kib / 1024.0;
}

static int fail(const char *what) {
    fprintf(stderr, "c long run FAILED: %s: %s\n", what, scope_last_error());
    return 1;
}

int main(void) {
    time_t started = time(NULL);
    scope_launcher *launcher = NULL;
    if (scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher) != SCOPE_RESULT_OK || launcher == NULL)
        return fail("the long run needs a manager that scopes launches");
    double samples[SAMPLES];
    char number[32];
    for (long i = 1; i <= WRAPS; i++) {
        snprintf(number, sizeof number, "%ld", i);
        const char *argv[] = {"sh", "-c", "exit 0", number, NULL};
        scope_argv *wrapped = NULL;
        if (scope_wrap_argv(launcher, argv, NULL, NULL, &wrapped) != SCOPE_RESULT_OK) return fail("wrap");
        if (scope_argv_unit(wrapped) == NULL) return fail("wrap left the argv unwrapped");
        scope_argv_free(wrapped);
        if (i % 100000L == 0) samples[i / 100000L - 1] = rss_mb();
    }
    scope_launcher_free(launcher);
    double before = rss_mb();
    for (long i = 1; i <= PROBES; i++) {
        scope_launcher *probed = NULL;
        if (scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &probed) != SCOPE_RESULT_OK || probed == NULL)
            return fail("a probe went direct");
        scope_launcher_free(probed);
    }
    double after = rss_mb();
    double first = samples[SAMPLES / 2 - 1], highest = first;
    printf("c long run: %ld wraps, RSS every 100,000 (MB):", WRAPS);
    for (long i = 0; i < SAMPLES; i++) {
        printf(" %.1f", samples[i]);
        if (i >= SAMPLES / 2 - 1 && samples[i] > highest) highest = samples[i];
    }
    printf("\nc long run: second half grew %.1f MB (margin %.0f); %ld probes: %.1f -> %.1f MB; %ld s\n",
           highest - first, MARGIN_MB, PROBES, before, after, (long)(time(NULL) - started));
    if (highest - first >= MARGIN_MB || after - before >= MARGIN_MB) {
        fprintf(stderr, "c long run FAILED: memory grew past the margin\n");
        return 1;
    }
    return 0;
}
