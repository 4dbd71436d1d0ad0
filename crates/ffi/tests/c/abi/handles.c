/* Scope handles from C: kill, read, and the scopes never touched. */
#include "abi.h"

int scenario_scope_kill(void) {
    scope_launcher *launcher = must_launcher(NULL);
    char *pidfile = scratch_path("escaped");
    const char *argv[] = {"sh", "-c", "setsid sleep 1000 & echo $! > \"$0\"; exec sleep 1000", pidfile, NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    pid_t pid = spawn(scope_argv_ptr(wrapped), 1);
    pid_t escaped = 0;
    for (int i = 0; i < 1000 && escaped == 0; i++) {
        sleep_ms(5);
        FILE *f = fopen(pidfile, "r");
        if (f) {
            int value = 0;
            if (fscanf(f, "%d", &value) == 1) escaped = value;
            fclose(f);
        }
    }
    CHECK(escaped > 0, "the escaped pid");
    /* $! is written before the child has run setsid(1): wait until it has left the group. */
    for (int i = 0; i < 1000 && getpgid(escaped) == pid; i++) sleep_ms(5);
    CHECK(getpgid(escaped) != pid, "it left the process group");

    scope_handle *handle = SENTINEL;
    CHECK(scope_handle_from_manager(unit, NULL, 3000, &handle) == SCOPE_RESULT_OK, "found by the manager");
    CHECK(strcmp(scope_handle_unit(handle), unit) == 0, "unit");
    CHECK(ends_with(scope_handle_cgroup(handle), unit), "cgroup %s", scope_handle_cgroup(handle));
    uint32_t *pids = SENTINEL;
    size_t count = 0;
    CHECK(scope_handle_pids(handle, &pids, &count) == SCOPE_RESULT_OK && count == 2, "%zu pids", count);
    scope_pids_free(pids, count);
    scope_stats stats;
    CHECK(scope_handle_stats(handle, &stats) == SCOPE_RESULT_OK, "stats");
    char path[512];
    snprintf(path, sizeof path, "%s/memory.current", scope_handle_cgroup(handle));
    CHECK((stats.memory_current == SCOPE_STAT_UNKNOWN) == (access(path, F_OK) != 0), "unknown iff absent");
    /* Pressure stall information: each resource there iff its file is, its figures its own. */
    scope_pressures pressures;
    memset(&pressures, 0xff, sizeof pressures);
    CHECK(scope_handle_pressure(handle, &pressures) == SCOPE_RESULT_OK, "pressure");
    snprintf(path, sizeof path, "%s/cpu.pressure", scope_handle_cgroup(handle));
    CHECK(pressures.cpu.has_some == (access(path, F_OK) == 0), "cpu pressure iff its file");
    CHECK(pressures.memory.has_some && pressures.memory.has_full, "memory: some and full");
    CHECK(pressures.memory.some.avg10 >= 0 && pressures.memory.some.avg10 <= 100, "a share in percent");
    CHECK(scope_handle_pressure(NULL, &pressures) == SCOPE_RESULT_NULL_PARAMETER, "NULL handle");
    CHECK(scope_handle_pressure(handle, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL out");

    CHECK(kill(-pid, SIGKILL) == 0, "killpg");
    CHECK(wait_exit(pid) == 128 + SIGKILL, "the group leader died");
    CHECK(alive(escaped), "a process-group kill misses the escaped descendant");
    uint32_t *killed = SENTINEL;
    size_t killed_count = 0;
    CHECK(scope_handle_kill_pids(handle, 5000, NULL, &killed_count) == SCOPE_RESULT_NULL_PARAMETER && killed_count == 0,
          "NULL pids refused, nothing written");
    CHECK(scope_handle_kill_pids(handle, 5000, &killed, &killed_count) == SCOPE_RESULT_OK, "scope kill");
    int reported = 0;
    for (size_t i = 0; i < killed_count; i++) reported |= killed[i] == (uint32_t)escaped;
    CHECK(killed_count == 1 && reported, "the kill reports the escaped pid (%zu pids)", killed_count);
    scope_pids_free(killed, killed_count);
    for (int i = 0; i < 400 && alive(escaped); i++) sleep_ms(5);
    CHECK(!alive(escaped), "the scope kill reached it");
    CHECK(scope_handle_wait_empty(handle, 100) == SCOPE_RESULT_OK, "empty");

    scope_handle *refused = SENTINEL;
    CHECK(scope_handle_of_process((uint32_t)getpid(), &refused) == SCOPE_RESULT_NOT_OURS, "own cgroup refused");
    CHECK(scope_handle_from_pid(unit, (uint32_t)getpid(), &refused) == SCOPE_RESULT_NOT_IN_SCOPE, "not in it");
    CHECK(refused == SENTINEL, "out untouched");
    scope_handle_free(handle);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    free(pidfile);
    return 0;
}

/* Another user's scope: its cgroup directory is that user's, as delegation makes it. Handed to
 * uid 1000 here, the scope is refused by every route with a message naming the owner, nothing in it
 * touched; given back, it is accepted. */
int scenario_other_users_scope(void) {
    scope_launcher *launcher = must_launcher(NULL);
    const char *argv[] = {"sleep", "1000", NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    pid_t pid = spawn(scope_argv_ptr(wrapped), 1);
    scope_handle *handle = must_handle(unit, pid);
    CHECK(chown(scope_handle_cgroup(handle), 1000, (gid_t)-1) == 0, "chown: %s", strerror(errno));
    char expected[256];
    snprintf(expected, sizeof expected, "%s belongs to uid 1000, not to this user (uid 0); refusing it", unit);
    scope_handle *refused = SENTINEL;
    CHECK(scope_handle_from_pid(unit, (uint32_t)pid, &refused) == SCOPE_RESULT_NOT_OURS, "from_pid refused");
    CHECK(strstr(scope_last_error(), expected) != NULL, "message: %s", scope_last_error());
    CHECK(scope_handle_of_process((uint32_t)pid, &refused) == SCOPE_RESULT_NOT_OURS, "of_process refused");
    CHECK(scope_handle_from_manager(unit, NULL, 3000, &refused) == SCOPE_RESULT_NOT_OURS, "from_manager refused");
    CHECK(strstr(scope_last_error(), expected) != NULL, "message: %s", scope_last_error());
    CHECK(refused == SENTINEL, "out untouched");
    CHECK(alive(pid), "nothing in it was touched");
    CHECK(chown(scope_handle_cgroup(handle), 0, (gid_t)-1) == 0, "chown back: %s", strerror(errno));
    scope_handle *again = NULL;
    CHECK(scope_handle_of_process((uint32_t)pid, &again) == SCOPE_RESULT_OK, "given back, accepted");
    CHECK(scope_handle_kill(again, 5000) == SCOPE_RESULT_OK, "killed");
    CHECK(wait_exit(pid) == 128 + SIGKILL, "the child died of the kill");
    scope_handle_free(again);
    scope_handle_free(handle);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}

/* Run in a synaps-daemon scope of its own: the scope of a child launched directly is this
 * process's own, and is refused (issue 13, item 1). */
int scenario_holds_caller(void) {
    char *const argv[] = {"/bin/sleep", "100", NULL};
    pid_t child = spawn(argv, 0);
    scope_handle *handle = SENTINEL;
    scope_result r = scope_handle_of_process((uint32_t)child, &handle);
    kill(child, SIGKILL);
    wait_exit(child);
    CHECK(r == SCOPE_RESULT_NOT_OURS, "result %u: %s", (unsigned)r, scope_last_error());
    CHECK(handle == SENTINEL, "out untouched on failure");
    CHECK(strstr(scope_last_error(), "holds this process") != NULL, "message: %s", scope_last_error());
    return 0;
}

/* Reads a handle's scope from a second thread until its cgroup is gone; a failed read is kept. */
struct reader {
    const scope_handle *handle;
    scope_result failure;
    char message[256];
};

static void *read_until_removed(void *arg) {
    struct reader *reader = arg;
    double end = now_ms() + 10000;
    while (access(scope_handle_cgroup(reader->handle), F_OK) == 0 && now_ms() < end) {
        uint32_t *pids = NULL;
        size_t count = 0;
        scope_stats stats;
        scope_result result = scope_handle_pids(reader->handle, &pids, &count);
        if (result == SCOPE_RESULT_OK) {
            scope_pids_free(pids, count);
            result = scope_handle_stats(reader->handle, &stats);
        }
        if (result != SCOPE_RESULT_OK) {
            reader->failure = result;
            snprintf(reader->message, sizeof reader->message, "%s", scope_last_error());
            break;
        }
    }
    return NULL;
}

/* The manager removes a scope's cgroup once its last process dies, also between a read's open and
 * its read (ENODEV): a second thread reads the scope while it is killed, many times over. */
int scenario_removed_while_read(void) {
    scope_launcher *launcher = must_launcher(NULL);
    for (int round = 0; round < 15; round++) {
        const char *argv[] = {"sleep", "1000", NULL};
        scope_argv *wrapped = must_wrap(launcher, argv);
        pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
        scope_handle *handle = NULL;
        for (int i = 0; i < 2000 && scope_handle_from_pid(scope_argv_unit(wrapped), (uint32_t)pid, &handle) != SCOPE_RESULT_OK; i++)
            sleep_ms(5);
        CHECK(handle != NULL, "round %d: the child reached its scope", round);
        struct reader reader = {handle, SCOPE_RESULT_OK, ""};
        pthread_t thread;
        CHECK(pthread_create(&thread, NULL, read_until_removed, &reader) == 0, "reader thread");
        uint32_t *killed = NULL;
        size_t killed_count = 0;
        scope_result result = scope_handle_kill_pids(handle, 5000, &killed, &killed_count);
        CHECK(pthread_join(thread, NULL) == 0, "join");
        CHECK(result == SCOPE_RESULT_OK, "round %d: kill", round);
        CHECK(killed_count == 1 && killed[0] == (uint32_t)pid, "round %d: %zu pids killed", round, killed_count);
        scope_pids_free(killed, killed_count);
        CHECK(reader.failure == SCOPE_RESULT_OK, "round %d: a read failed (%d): %s", round, (int)reader.failure, reader.message);
        CHECK(wait_exit(pid) == 128 + SIGKILL, "round %d: killed", round);
        scope_handle_free(handle);
        scope_argv_free(wrapped);
    }
    scope_launcher_free(launcher);
    return 0;
}
