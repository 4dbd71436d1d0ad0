/* The warning before systemd-oomd acts, from C: where it cannot be given, the watch says why when
 * it is made (the result, the kind, the message), and writes nothing; NULL arguments and getters.
 * The warnings themselves come from the real oomd in the virtual machine (scripts/test-vm.sh). */
#include "abi.h"

static void never_warned(void *userdata, const scope_oomd_warning *warning) {
    (void)warning;
    atomic_fetch_add((atomic_int *)userdata, 1);
}

/* What the asynchronous request handed back. */
struct made {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int calls;
    scope_result result;
    scope_oomd_watch *watch;
    scope_cannot_warn_kind kind;
    char error[512];
};

static void watch_ready(void *userdata, scope_result result, scope_oomd_watch *watch, scope_cannot_warn_kind kind,
                        const char *error) {
    struct made *made = userdata;
    pthread_mutex_lock(&made->lock);
    made->calls++;
    made->result = result;
    made->watch = watch;
    made->kind = kind;
    snprintf(made->error, sizeof made->error, "%s", error ? error : "");
    pthread_cond_signal(&made->cond);
    pthread_mutex_unlock(&made->lock);
}

/* A running tool in its scope, and a handle on it. */
static scope_handle *running_tool(scope_launcher *launcher, scope_argv **wrapped, pid_t *pid) {
    const char *argv[] = {"sleep", "100", NULL};
    *wrapped = must_wrap(launcher, argv);
    *pid = spawn(scope_argv_ptr(*wrapped), 0);
    CHECK(*pid > 0, "spawn the tool");
    return must_handle(scope_argv_unit(*wrapped), *pid);
}

int scenario_oomd_watch(void) {
    atomic_int calls = 0;
    struct oomd_bus bus;
    oomd_bus_start(&bus);
    scope_launcher *launcher = must_launcher(bus.env);
    scope_argv *wrapped;
    pid_t pid;
    scope_handle *handle = running_tool(launcher, &wrapped, &pid);
    const scope_handle *handles[] = {handle};

    /* oomd runs (the stand-in owns its name) but no manager on that bus says which rules cover
     * the scope: the watch says so, and writes nothing. */
    scope_oomd_watch *watch = SENTINEL;
    scope_result result = scope_oomd_watch_new(handles, 1, bus.env, 3000, never_warned, &calls, &watch);
    CHECK(result == SCOPE_RESULT_CANNOT_WARN, "a watch no manager can tell the rules of: %d", (int)result);
    CHECK(watch == SENTINEL, "nothing written on failure");
    CHECK(scope_oomd_last_cannot_warn() == SCOPE_CANNOT_WARN_KIND_CANNOT_ASK, "the kind: %d",
          (int)scope_oomd_last_cannot_warn());
    CHECK(strstr(scope_last_error(), "-.slice could not say") != NULL, "the message: %s", scope_last_error());
    CHECK(strstr(scope_result_name(SCOPE_RESULT_CANNOT_WARN), "systemd-oomd") != NULL, "the result's name");

    /* The same, asked on the request's own thread: the handle may be freed at once. */
    struct made made = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, SCOPE_RESULT_PANIC, SENTINEL, 0, {0}};
    scope_handle *copy = must_handle(scope_argv_unit(wrapped), pid);
    const scope_handle *copies[] = {copy};
    CHECK(scope_oomd_watch_new_async(copies, 1, bus.env, 3000, never_warned, watch_ready, &made) == SCOPE_RESULT_OK,
          "the request started");
    scope_handle_free(copy);
    pthread_mutex_lock(&made.lock);
    while (made.calls == 0) pthread_cond_wait(&made.cond, &made.lock);
    pthread_mutex_unlock(&made.lock);
    sleep_ms(20);
    CHECK(made.calls == 1 && made.result == SCOPE_RESULT_CANNOT_WARN && made.watch == NULL &&
              made.kind == SCOPE_CANNOT_WARN_KIND_CANNOT_ASK && strstr(made.error, "-.slice could not say") != NULL,
          "async: calls %d, result %d, kind %d, error %s", made.calls, (int)made.result, (int)made.kind, made.error);
    CHECK(scope_oomd_watch_new_async(handles, 1, bus.env, 3000, never_warned, NULL, &made) == SCOPE_RESULT_NULL_PARAMETER,
          "async: a NULL ready");

    /* No system bus at all: no oomd can be asked. */
    const char *add[] = {"DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/system_bus_socket", NULL};
    const char *drop[] = {"DBUS_SYSTEM_BUS_ADDRESS", NULL};
    const char **no_bus = env_edit(drop, add);
    CHECK(scope_oomd_watch_new(handles, 1, no_bus, 3000, never_warned, &calls, &watch) == SCOPE_RESULT_CANNOT_WARN,
          "no system bus");
    CHECK(scope_oomd_last_cannot_warn() == SCOPE_CANNOT_WARN_KIND_NO_OOMD, "the kind: %d",
          (int)scope_oomd_last_cannot_warn());
    CHECK(strstr(scope_last_error(), "/nonexistent/system_bus_socket") != NULL, "the message: %s", scope_last_error());

    /* NULL arguments: their own result, and no cannot-warn kind. */
    const scope_handle *null_handles[] = {NULL};
    CHECK(scope_oomd_watch_new(NULL, 1, no_bus, 3000, never_warned, &calls, &watch) == SCOPE_RESULT_NULL_PARAMETER,
          "NULL handles");
    CHECK(scope_oomd_last_cannot_warn() == SCOPE_CANNOT_WARN_KIND_NONE, "no kind for a NULL argument");
    CHECK(scope_oomd_watch_new(null_handles, 1, no_bus, 3000, never_warned, &calls, &watch) ==
              SCOPE_RESULT_NULL_PARAMETER,
          "a NULL handle");
    CHECK(strstr(scope_last_error(), "handles[0]") != NULL, "names the argument: %s", scope_last_error());
    CHECK(scope_oomd_watch_new(handles, 1, no_bus, 3000, NULL, &calls, &watch) == SCOPE_RESULT_NULL_PARAMETER,
          "a NULL callback");
    CHECK(scope_oomd_watch_new(handles, 1, no_bus, 3000, never_warned, &calls, NULL) == SCOPE_RESULT_NULL_PARAMETER,
          "a NULL out");
    CHECK(scope_oomd_watch_new(handles, 1, no_bus, 0, never_warned, &calls, &watch) == SCOPE_RESULT_INVALID_ARGUMENT,
          "a zero timeout");
    CHECK(scope_oomd_watch_new(handles, 0, no_bus, 3000, never_warned, &calls, &watch) == SCOPE_RESULT_CANNOT_WARN,
          "no handles");
    CHECK(scope_oomd_last_cannot_warn() == SCOPE_CANNOT_WARN_KIND_SCOPE_GONE, "no scope given");
    CHECK(watch == SENTINEL, "nothing written by any failure");

    /* NULL-safe getters and free. */
    CHECK(scope_oomd_watch_watched_count(NULL) == 0 && scope_oomd_watch_watched(NULL, 0) == NULL, "NULL watched");
    CHECK(scope_oomd_watch_cannot_count(NULL) == 0, "NULL cannot count");
    scope_cannot_warn why;
    CHECK(scope_oomd_watch_cannot(NULL, 0, &why) == SCOPE_RESULT_NULL_PARAMETER, "NULL watch");
    scope_oomd_watch_free(NULL);
    CHECK(atomic_load(&calls) == 0, "no warning was given");

    CHECK(scope_handle_kill(handle, 3000) == SCOPE_RESULT_OK, "the tool killed");
    CHECK(wait_exit(pid) == 128 + SIGKILL, "the tool ended by the kill");
    scope_handle_free(handle);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    free(no_bus);
    oomd_bus_stop(&bus);
    return 0;
}
