/* A turn is held until its holder lets it go (issue 48), from C: while a request of this process
 * holds its turn (the harness's stand-in holds its first authentication 600 ms), this process
 * opens and closes every file of the runtime directory, or makes a request that spells the
 * directory with a slash more, or through a symlink; another process's request must still wait
 * for the held turn. */
#include "abi.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>

/* How long the stand-in holds the first authentication (c_abi.rs starts it so). */
#define HELD_MS 600

static void *hold_the_turn(void *scoped) {
    scope_launcher *launcher = NULL;
    scope_result result = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 3000, &launcher);
    *(int *)scoped = result == SCOPE_RESULT_OK && launcher != NULL;
    scope_launcher_free(launcher);
    return NULL;
}

/* Opens and closes every file of `dir`, as a host's own code may (an indexer, a clean-up). */
static void close_every_file(const char *dir) {
    DIR *listing = opendir(dir);
    CHECK(listing != NULL, "opendir %s: %s", dir, strerror(errno));
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (entry->d_type != DT_REG) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
        close(fd);
    }
    closedir(listing);
}

/* A request of this process whose XDG_RUNTIME_DIR is `runtime`, with a short bound. */
static void request_in(const char *runtime) {
    char var[4200];
    snprintf(var, sizeof var, "XDG_RUNTIME_DIR=%s", runtime);
    const char *const drop[] = {"XDG_RUNTIME_DIR", NULL};
    const char *const add[] = {var, NULL};
    const char **env = env_edit(drop, add);
    scope_launcher *launcher = NULL;
    scope_launcher_for_env_timeout(env, SCOPE_KIND_TOOL, 150, &launcher);
    scope_launcher_free(launcher);
    free(env);
}

/* One case: `meanwhile` (0 nothing, 1 close, 2 a slash more, 3 a symlink) while the turn is held;
 * then another process's request, which must end after the held turn. */
static void one_case(int meanwhile, const char *name) {
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    CHECK(runtime != NULL, "XDG_RUNTIME_DIR");
    int scoped = 0;
    double began = now_ms();
    pthread_t holder;
    CHECK(pthread_create(&holder, NULL, hold_the_turn, &scoped) == 0, "pthread_create");
    sleep_ms(100);
    char spelt[4200];
    switch (meanwhile) {
    case 1:
        close_every_file(runtime);
        break;
    case 2:
        snprintf(spelt, sizeof spelt, "%s/", runtime);
        request_in(spelt);
        break;
    case 3: {
        char *link = scratch_path("runtime-link");
        unlink(link);
        CHECK(symlink(runtime, link) == 0, "symlink: %s", strerror(errno));
        request_in(link);
        free(link);
        break;
    }
    default:
        break;
    }
    pid_t other = fork();
    CHECK(other >= 0, "fork: %s", strerror(errno));
    if (other == 0) {
        scope_launcher *launcher = NULL;
        scope_result result = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 3000, &launcher);
        _exit(result == SCOPE_RESULT_OK && launcher != NULL ? 0 : 1);
    }
    int status = wait_exit(other);
    double ended = now_ms() - began;
    CHECK(pthread_join(holder, NULL) == 0, "pthread_join");
    CHECK(scoped, "%s: the holder's request is scoped", name);
    CHECK(status == 0, "%s: the other process's request: status %d", name, status);
    CHECK(ended >= HELD_MS, "%s: the other process's request ended %.0f ms after the turn was taken", name, ended);
}

int scenario_held_turn(void) {
    const char *cases[] = {"nothing else", "the host closes every file of the directory",
                           "a request that spells the directory with a slash more",
                           "a request through a symlink to the directory"};
    int which = atoi(getenv("SYNAPS_TEST_TURN_CASE") ? getenv("SYNAPS_TEST_TURN_CASE") : "0");
    CHECK(which >= 0 && which < 4, "SYNAPS_TEST_TURN_CASE");
    one_case(which, cases[which]);
    return 0;
}
