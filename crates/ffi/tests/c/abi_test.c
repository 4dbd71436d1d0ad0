/* The C ABI, exercised from C against a real systemd user manager. Compiled with
 * -Wall -Wextra -Werror -pedantic under AddressSanitizer and UBSan by tests/c_abi.rs, which runs
 * each scenario (argv[1]) in its own process. Exit 0 means the scenario held. */
#define _GNU_SOURCE
#include "synaps_scope.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, " (scope_last_error: %s)\n", scope_last_error());        \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* A sentinel that must survive any failed call: out-parameters are written only on success. */
static char sentinel_storage;
#define SENTINEL ((void *)&sentinel_storage)

static const char *scratch_dir(void) {
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/synaps-cabi-%d", (int)getpid());
        CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir %s", dir);
    }
    return dir;
}

static char *scratch_path(const char *name) {
    size_t size = strlen(scratch_dir()) + strlen(name) + 2;
    char *path = malloc(size);
    CHECK(path != NULL, "malloc");
    snprintf(path, size, "%s/%s", scratch_dir(), name);
    return path;
}

/* environ without the variables named in `drop` (NULL-terminated), plus `add` entries. The
 * array is malloc'd; its strings are borrowed. */
static const char **env_edit(const char *const *drop, const char *const *add) {
    size_t n = 0, k = 0;
    while (environ[n]) n++;
    while (add && add[k]) k++;
    const char **env = calloc(n + k + 1, sizeof *env);
    CHECK(env != NULL, "calloc");
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        int dropped = 0;
        for (size_t d = 0; drop && drop[d]; d++) {
            size_t len = strlen(drop[d]);
            if (strncmp(environ[i], drop[d], len) == 0 && environ[i][len] == '=') dropped = 1;
        }
        if (!dropped) env[out++] = environ[i];
    }
    for (size_t i = 0; i < k; i++) env[out++] = add[i];
    env[out] = NULL;
    return env;
}

static const char *const NO_BUS[] = {"XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", NULL};

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    char *data = malloc(1 << 16);
    CHECK(data != NULL, "malloc");
    size_t got = fread(data, 1, (1 << 16) - 1, f);
    fclose(f);
    data[got] = '\0';
    if (len) *len = got;
    return data;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s", path);
    fputs(text, f);
    fclose(f);
}

static pid_t spawn(char *const *argv, int new_group) {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (new_group) {
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
    }
    pid_t pid;
    int err = posix_spawn(&pid, argv[0], NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    CHECK(err == 0, "posix_spawn %s: %s", argv[0], strerror(err));
    return pid;
}

static int wait_exit(pid_t pid) {
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int ends_with(const char *text, const char *suffix) {
    size_t t = strlen(text), s = strlen(suffix);
    return t >= s && strcmp(text + t - s, suffix) == 0;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int alive(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[512];
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    const char *close = strrchr(buf, ')');
    return close && close[1] == ' ' && close[2] != 'Z';
}

static scope_launcher *must_launcher(const char *const *envp) {
    scope_launcher *launcher = SENTINEL;
    scope_result r = scope_launcher_for_env(envp, SCOPE_KIND_TOOL, &launcher);
    CHECK(r == SCOPE_RESULT_OK, "scope_launcher_for_env returned %u", (unsigned)r);
    CHECK(launcher != NULL && launcher != SENTINEL, "expected a launcher from the rig's manager");
    return launcher;
}

static scope_argv *must_wrap(const scope_launcher *launcher, const char *const *argv) {
    scope_argv *wrapped = SENTINEL;
    scope_result r = scope_wrap_argv(launcher, argv, NULL, NULL, &wrapped);
    CHECK(r == SCOPE_RESULT_OK && wrapped != SENTINEL, "scope_wrap_argv returned %u", (unsigned)r);
    return wrapped;
}

/* The first line of the child's report file: its cgroup, and it must be the unit's. */
static void check_cgroup_file(const char *path, const char *unit) {
    char *text = read_file(path, NULL);
    char *newline = strchr(text, '\n');
    if (newline) *newline = '\0';
    CHECK(ends_with(text, unit), "cgroup %s is not in %s", text, unit);
    free(text);
}

static int scenario_abi_version(void) {
    CHECK(scope_abi_version() == SCOPE_ABI_VERSION, "header %d, library %u", SCOPE_ABI_VERSION, scope_abi_version());
    CHECK(strlen(scope_version()) > 0, "empty version");
    CHECK(strcmp(scope_result_name(SCOPE_RESULT_OK), "ok") == 0, "%s", scope_result_name(0));
    CHECK(strcmp(scope_result_name(999), "unknown result") == 0, "%s", scope_result_name(999));
    CHECK(scope_last_error() != NULL, "scope_last_error is never NULL");
    return 0;
}

static int scenario_scoped_spawn(void) {
    scope_launcher *launcher = must_launcher(NULL);
    const char *expected = getenv("SYNAPS_RIG_SYSTEMD_VERSION");
    const char *asked = getenv("SYNAPS_SCOPE_LAUNCHER");
    scope_wrapper wrapper = scope_launcher_wrapper(launcher);
    CHECK(wrapper == SCOPE_WRAPPER_EXEC || wrapper == SCOPE_WRAPPER_SYSTEMD_RUN, "wrapper %u", wrapper);
    if (asked && strcmp(asked, "synaps-scope-exec") == 0) CHECK(wrapper == SCOPE_WRAPPER_EXEC, "the launcher program");
    if (asked && strcmp(asked, "systemd-run") == 0) CHECK(wrapper == SCOPE_WRAPPER_SYSTEMD_RUN, "systemd-run");
    uint32_t version = scope_launcher_systemd_version(launcher);
    CHECK(wrapper == SCOPE_WRAPPER_EXEC ? version == 0 : expected && version == (uint32_t)atoi(expected), "version %u",
          version);
    CHECK(scope_launcher_kind(launcher) == SCOPE_KIND_TOOL, "kind");
    CHECK(scope_launcher_slice(launcher) == NULL, "no slice configured");

    char *report = scratch_path("report");
    const char *argv[] = {"sh", "-c", "grep ^0:: /proc/$$/cgroup > \"$0\"; echo $$ >> \"$0\"", report, NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    CHECK(unit && strncmp(unit, "synaps-tool-", 12) == 0, "unit %s", unit ? unit : "(null)");
    CHECK(scope_argv_ptr(wrapped)[scope_argv_len(wrapped)] == NULL, "NULL-terminated");
    pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
    CHECK(wait_exit(pid) == 0, "the scoped child failed");
    check_cgroup_file(report, unit);
    char *text = read_file(report, NULL);
    char pid_line[32];
    snprintf(pid_line, sizeof pid_line, "\n%d\n", (int)pid);
    CHECK(strstr(text, pid_line) != NULL, "the spawned pid %d is the command's pid: %s", (int)pid, text);
    free(text);
    free(report);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}

/* A login shell: the program is /bin/sh, its argv[0] is "-sh" (scope_wrap_program, like execv). */
static int scenario_login_shell(void) {
    scope_launcher *launcher = must_launcher(NULL);
    char *report = scratch_path("argv0");
    char script[512];
    /* Without arguments after the script, sh -c sets $0 to its own argv[0]. */
    snprintf(script, sizeof script, "printf '%%s' \"$0\" > '%s'", report);
    const char *argv[] = {"-sh", "-c", script, NULL};
    scope_argv *wrapped = NULL;
    CHECK(scope_wrap_program(launcher, "sh", argv, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "wrap: %s",
          scope_last_error());
    CHECK(scope_argv_unit(wrapped) != NULL, "wrapped");
    pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
    CHECK(wait_exit(pid) == 0, "the scoped login shell failed");
    char *text = read_file(report, NULL);
    const char *want = scope_launcher_wrapper(launcher) == SCOPE_WRAPPER_EXEC ? "-sh" : NULL;
    if (want) CHECK(strcmp(text, want) == 0, "argv[0] is %s", text);
    else CHECK(text[0] == '/', "systemd-run passes the program's path as argv[0]: %s", text);
    free(text);
    free(report);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}

static int scenario_nonutf8_argv(void) {
    scope_launcher *launcher = must_launcher(NULL);
    char *out = scratch_path("args");
    const char *payload[] = {"\xff\xfe", "${HOME}", "", "-h", "--", "caf\xc3\xa9 \"q\" \\", "line\nbreak"};
    const size_t count = sizeof payload / sizeof payload[0];
    const char *argv[5 + sizeof payload / sizeof payload[0]];
    argv[0] = "sh";
    argv[1] = "-c";
    argv[2] = "for a; do printf '%s\\0' \"$a\"; done > \"$0\"";
    argv[3] = out;
    for (size_t i = 0; i < count; i++) argv[4 + i] = payload[i];
    argv[4 + count] = NULL;
    scope_argv *wrapped = must_wrap(launcher, argv);
    size_t len = scope_argv_len(wrapped);
    for (size_t i = 0; i < count; i++) {
        size_t got_len = 0;
        const char *got = scope_argv_get(wrapped, len - count + i, &got_len);
        CHECK(got && got_len == strlen(payload[i]) && memcmp(got, payload[i], got_len) == 0, "argv element %zu", i);
    }
    /* The whole argv in one copy: each argument NUL-terminated, byte for byte as scope_argv_get. */
    size_t size = scope_argv_size(wrapped);
    char *copy = malloc(size);
    CHECK(copy != NULL, "malloc");
    CHECK(scope_argv_copy(wrapped, (uint8_t *)copy, size - 1) == SCOPE_RESULT_INVALID_ARGUMENT, "a short buffer is refused");
    CHECK(scope_argv_copy(wrapped, NULL, size) == SCOPE_RESULT_NULL_PARAMETER, "a NULL buffer is refused");
    CHECK(scope_argv_copy(NULL, (uint8_t *)copy, size) == SCOPE_RESULT_NULL_PARAMETER, "a NULL argv is refused");
    CHECK(scope_argv_size(NULL) == 0, "NULL has no size");
    CHECK(scope_argv_copy(wrapped, (uint8_t *)copy, size) == SCOPE_RESULT_OK, "copy: %s", scope_last_error());
    size_t offset = 0;
    for (size_t i = 0; i < len; i++) {
        size_t arg_len = 0;
        const char *arg = scope_argv_get(wrapped, i, &arg_len);
        CHECK(offset + arg_len < size && memcmp(copy + offset, arg, arg_len) == 0 && copy[offset + arg_len] == '\0',
              "copied argument %zu", i);
        offset += arg_len + 1;
    }
    CHECK(offset == size, "the copy is exactly the argv");
    free(copy);
    int has_flag = 0;
    for (size_t i = 0; i < len; i++) has_flag |= strcmp(scope_argv_get(wrapped, i, NULL), "--expand-environment=no") == 0;
    CHECK(has_flag == (scope_launcher_systemd_version(launcher) >= 254), "--expand-environment=no exactly on 254");
    CHECK(wait_exit(spawn(scope_argv_ptr(wrapped), 0)) == 0, "child failed");
    size_t got_len;
    char *got = read_file(out, &got_len);
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(payload[i]);
        CHECK(at + n < got_len + 1 && memcmp(got + at, payload[i], n) == 0 && got[at + n] == '\0', "arg %zu arrived changed", i);
        at += n + 1;
    }
    CHECK(at == got_len, "%zu bytes expected, %zu arrived", at, got_len);
    free(got);
    free(out);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}

static int scenario_direct_no_manager(void) {
    const char **env = env_edit(NO_BUS, NULL);
    scope_launcher *launcher = SENTINEL;
    CHECK(scope_launcher_for_env(env, SCOPE_KIND_DAEMON, &launcher) == SCOPE_RESULT_OK, "direct is not an error");
    CHECK(launcher == NULL, "NULL means launch directly");
    free(env);
    return 0;
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int refused_warnings;

static void count_refused(void *userdata, scope_log_level level, const char *message, size_t len) {
    CHECK(userdata == &refused_warnings, "userdata comes back");
    CHECK(strlen(message) == len, "len is the message's length");
    if (level == SCOPE_LOG_LEVEL_WARN && strstr(message, "cabi.service") && strstr(message, "is not a slice")) {
        pthread_mutex_lock(&log_lock);
        refused_warnings++;
        pthread_mutex_unlock(&log_lock);
    }
}

static const char **refused_slice_env(const char *slice) {
    char *config = scratch_path("config");
    char text[128];
    snprintf(text, sizeof text, "tool_scope_slice = %s\n", slice);
    write_file(config, text);
    static char entry[300];
    snprintf(entry, sizeof entry, "SYNAPS_CONFIG=%s", config);
    free(config);
    const char *add[] = {entry, NULL};
    return env_edit(NULL, add);
}

static int scenario_refused_slice(void) {
    scope_set_log_callback(count_refused, &refused_warnings);
    const char **env = refused_slice_env("cabi.service");
    for (int i = 0; i < 3; i++) {
        scope_launcher *launcher = SENTINEL;
        CHECK(scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK, "request %d", i);
        CHECK(launcher == NULL, "a refused slice means a direct launch");
    }
    CHECK(refused_warnings == 1, "%d warnings, expected exactly one", refused_warnings);
    scope_set_log_callback(NULL, NULL);
    free(env);
    return 0;
}

static int scenario_default_log_stderr(void) {
    const char **env = refused_slice_env("cabistderr.service");
    scope_launcher *launcher = SENTINEL;
    CHECK(scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK && launcher == NULL, "direct");
    free(env);
    return 0;
}

static int scenario_required(void) {
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=required", NULL};
    const char **env = env_edit(NO_BUS, add);
    scope_launcher *launcher = SENTINEL;
    scope_result r = scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher);
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE, "result %u", (unsigned)r);
    CHECK(launcher == SENTINEL, "out untouched on failure");
    CHECK(strstr(scope_last_error(), "required") != NULL, "message: %s", scope_last_error());
    char message[32];
    memset(message, 'x', sizeof message);
    r = scope_launcher_for_env_r(env, SCOPE_KIND_TOOL, 3000, &launcher, message, sizeof message);
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE && launcher == SENTINEL, "result %u", (unsigned)r);
    CHECK(strlen(message) == sizeof message - 1, "truncated and NUL-terminated: %s", message);
    CHECK(strncmp(message, "process scopes are required", 27) == 0, "the message: %s", message);
    free(env);
    /* With the manager there, a launcher that says it was made in required mode. */
    const char **with_bus = env_edit(NULL, add);
    launcher = must_launcher(with_bus);
    CHECK(scope_launcher_required(launcher), "made in required mode");
    scope_launcher_free(launcher);
    free(with_bus);
    launcher = must_launcher(NULL);
    CHECK(!scope_launcher_required(launcher), "made in on mode");
    scope_launcher_free(launcher);
    CHECK(!scope_launcher_required(NULL), "NULL is not required");
    return 0;
}

static int user_switch_warnings;

static void count_user_switch(void *userdata, scope_log_level level, const char *message, size_t len) {
    CHECK(userdata == &user_switch_warnings && strlen(message) == len, "userdata and len come back");
    if (level == SCOPE_LOG_LEVEL_WARN && strstr(message, "switches user (uid=65534)") &&
        strstr(message, "cannot hold another user's process")) {
        pthread_mutex_lock(&log_lock);
        user_switch_warnings++;
        pthread_mutex_unlock(&log_lock);
    }
}

static int scenario_user_switch(void) {
    scope_set_log_callback(count_user_switch, &user_switch_warnings);
    scope_launcher *launcher = must_launcher(NULL);
    for (int i = 0; i < 3; i++) {
        scope_result r = scope_launcher_user_switch(launcher, "uid=65534");
        CHECK(r == SCOPE_RESULT_OK, "child %d switches user: run directly, result %u", i, (unsigned)r);
    }
    CHECK(user_switch_warnings == 1, "%d warnings, expected one per process", user_switch_warnings);
    CHECK(scope_launcher_user_switch(NULL, "uid=1") == SCOPE_RESULT_NULL_PARAMETER, "NULL launcher");
    CHECK(scope_launcher_user_switch(launcher, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL switches");
    CHECK(scope_launcher_user_switch(launcher, "uid=\xff") == SCOPE_RESULT_INVALID_UTF8, "not UTF-8");
    scope_launcher_free(launcher);
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=required", NULL};
    const char **env = env_edit(NULL, add);
    launcher = must_launcher(env);
    scope_result r = scope_launcher_user_switch(launcher, "gid=65534");
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE, "required mode refuses, result %u", (unsigned)r);
    CHECK(strstr(scope_last_error(), "switches user (gid=65534)") != NULL, "message: %s", scope_last_error());
    scope_launcher_free(launcher);
    scope_set_log_callback(NULL, NULL);
    free(env);
    return 0;
}

static int scenario_scope_kill(void) {
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
static int scenario_other_users_scope(void) {
    scope_launcher *launcher = must_launcher(NULL);
    const char *argv[] = {"sleep", "1000", NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    pid_t pid = spawn(scope_argv_ptr(wrapped), 1);
    scope_handle *handle = NULL;
    for (int i = 0; i < 1000 && scope_handle_from_pid(unit, (uint32_t)pid, &handle) != SCOPE_RESULT_OK; i++) sleep_ms(5);
    CHECK(handle != NULL, "the child is in its scope");
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

static void expect(scope_result got, scope_result want, const char *what) {
    CHECK(got == want, "%s: result %u (%s), expected %u", what, (unsigned)got, scope_result_name(got), (unsigned)want);
    CHECK(strlen(scope_last_error()) > 0, "%s: a message explains it", what);
}

static int scenario_bad_input(void) {
    scope_launcher *launcher = must_launcher(NULL);
    scope_launcher *out = SENTINEL;
    const char *no_equals[] = {"PATH=/usr/bin:/bin", "NOEQUALS", NULL};
    const char *empty_key[] = {"=value", NULL};

    /* Issue 13, item 14: a script without #! is left unwrapped, so posix_spawn fails on it as it
     * does direct (ENOEXEC), instead of running through /bin/sh (no binfmt_misc formats here). */
    char *bare = scratch_path("bare");
    write_file(bare, "exit 0\n");
    CHECK(chmod(bare, 0755) == 0, "chmod");
    const char *bare_argv[] = {bare, NULL};
    scope_argv *left = NULL;
    CHECK(scope_wrap_argv(launcher, bare_argv, NULL, NULL, &left) == SCOPE_RESULT_OK, "wrap: %s", scope_last_error());
    CHECK(scope_argv_unit(left) == NULL && scope_argv_len(left) == 1, "a script without #! is left unwrapped");
    pid_t never;
    CHECK(posix_spawn(&never, scope_argv_ptr(left)[0], NULL, NULL, scope_argv_ptr(left), environ) == ENOEXEC,
          "posix_spawn refuses it as a direct spawn does");
    scope_argv_free(left);
    free(bare);

    expect(scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, NULL), SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    expect(scope_launcher_for_env(no_equals, SCOPE_KIND_TOOL, &out), SCOPE_RESULT_INVALID_ARGUMENT, "entry without =");
    CHECK(strstr(scope_last_error(), "envp[1]") != NULL, "names the entry: %s", scope_last_error());
    expect(scope_launcher_for_env(empty_key, SCOPE_KIND_TOOL, &out), SCOPE_RESULT_INVALID_ARGUMENT, "empty key");
    expect(scope_launcher_for_env(NULL, 7, &out), SCOPE_RESULT_INVALID_KIND, "kind 7");
    expect(scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 0, &out), SCOPE_RESULT_INVALID_ARGUMENT, "0 ms");
    CHECK(out == SENTINEL, "out untouched by every failure");

    const char *argv[] = {"echo", "a", NULL, "b", NULL};
    const char *empty[] = {NULL};
    scope_argv *wrapped = SENTINEL;
    expect(scope_wrap_argv(NULL, argv, NULL, NULL, &wrapped), SCOPE_RESULT_NULL_PARAMETER, "NULL launcher");
    CHECK(strstr(scope_last_error(), "launch directly") != NULL, "hint: %s", scope_last_error());
    expect(scope_wrap_argv(launcher, NULL, NULL, NULL, &wrapped), SCOPE_RESULT_NULL_PARAMETER, "NULL argv");
    /* An empty argv is left unwrapped, as an unresolvable program is (R4). */
    CHECK(scope_wrap_argv(launcher, empty, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "empty argv");
    CHECK(scope_argv_len(wrapped) == 0 && scope_argv_ptr(wrapped)[0] == NULL && scope_argv_unit(wrapped) == NULL,
          "returned empty, without a unit");
    scope_argv_free(wrapped);
    wrapped = SENTINEL;
    expect(scope_wrap_argv(launcher, argv, no_equals, NULL, &wrapped), SCOPE_RESULT_INVALID_ARGUMENT, "bad envp");
    expect(scope_wrap_argv(launcher, argv, NULL, NULL, NULL), SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    CHECK(wrapped == SENTINEL, "out untouched by every failure");
    CHECK(scope_wrap_argv(launcher, argv, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "NULL in the middle ends argv");
    size_t len = scope_argv_len(wrapped);
    CHECK(strcmp(scope_argv_get(wrapped, len - 1, NULL), "a") == 0, "argv ends at the first NULL");
    CHECK(scope_argv_get(wrapped, len, NULL) == NULL, "out of range");
    scope_argv_free(wrapped);

    const char *missing[] = {"synaps-no-such-program", "x", NULL};
    wrapped = must_wrap(launcher, missing);
    CHECK(scope_argv_unit(wrapped) == NULL && scope_argv_len(wrapped) == 2, "a missing program is left unwrapped");
    CHECK(strcmp(scope_argv_get(wrapped, 0, NULL), "synaps-no-such-program") == 0, "unchanged");
    scope_argv_free(wrapped);

    scope_handle *handle = SENTINEL;
    expect(scope_handle_from_pid(NULL, 1, &handle), SCOPE_RESULT_NULL_PARAMETER, "NULL unit");
    expect(scope_handle_from_pid("\xff.scope", 1, &handle), SCOPE_RESULT_INVALID_UTF8, "non-UTF-8 unit");
    expect(scope_handle_from_pid("app.slice", 1, &handle), SCOPE_RESULT_NOT_OURS, "foreign unit");
    expect(scope_handle_from_manager("synaps-tool-0123456789abcdef0123456789abcdef.scope", NULL, 3000, &handle),
           SCOPE_RESULT_NOT_FOUND, "no such scope");
    expect(scope_handle_kill(NULL, 1000), SCOPE_RESULT_NULL_PARAMETER, "NULL handle");
    CHECK(handle == SENTINEL, "out untouched by every failure");

    char *path = SENTINEL;
    expect(scope_resolve_program("synaps-no-such-program", NULL, NULL, &path), SCOPE_RESULT_NOT_FOUND, "missing");
    expect(scope_resolve_program(NULL, NULL, NULL, &path), SCOPE_RESULT_NULL_PARAMETER, "NULL program");
    CHECK(path == SENTINEL, "out untouched");
    CHECK(scope_resolve_program("sh", NULL, "/", &path) == SCOPE_RESULT_OK && path[0] == '/', "sh resolves");
    scope_string_free(path);
    expect(scope_set_log_level(9), SCOPE_RESULT_INVALID_ARGUMENT, "log level 9");

    scope_launcher_free(NULL);
    scope_argv_free(NULL);
    scope_handle_free(NULL);
    scope_string_free(NULL);
    scope_pids_free(NULL, 0);
    CHECK(scope_argv_len(NULL) == 0 && scope_argv_ptr(NULL) == NULL && scope_argv_unit(NULL) == NULL, "NULL getters");
    CHECK(scope_argv_get(NULL, 0, NULL) == NULL && scope_launcher_slice(NULL) == NULL, "NULL getters");
    CHECK(scope_launcher_systemd_version(NULL) == 0 && scope_handle_unit(NULL) == NULL, "NULL getters");
    scope_launcher_free(launcher);
    return 0;
}

#define THREADS 32

struct thread_job {
    const scope_launcher *launcher;
    int index;
    char unit[128];
    int ok;
};

static void *thread_launch(void *arg) {
    struct thread_job *job = arg;
    char name[32];
    snprintf(name, sizeof name, "thread-%d", job->index);
    char *report = scratch_path(name);
    const char *argv[] = {"sh", "-c", "grep ^0:: /proc/$$/cgroup > \"$0\"", report, NULL};
    scope_argv *wrapped = must_wrap(job->launcher, argv);
    snprintf(job->unit, sizeof job->unit, "%s", scope_argv_unit(wrapped));
    job->ok = wait_exit(spawn(scope_argv_ptr(wrapped), 0)) == 0;
    check_cgroup_file(report, job->unit);
    scope_argv_free(wrapped);
    free(report);
    return NULL;
}

static int scenario_threads(void) {
    scope_launcher *launcher = must_launcher(NULL);
    struct thread_job jobs[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct thread_job){.launcher = launcher, .index = i};
        CHECK(pthread_create(&threads[i], NULL, thread_launch, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    for (int i = 0; i < THREADS; i++) {
        CHECK(jobs[i].ok, "thread %d's child failed", i);
        for (int j = 0; j < i; j++) CHECK(strcmp(jobs[i].unit, jobs[j].unit) != 0, "threads %d and %d share a unit", i, j);
    }
    scope_launcher_free(launcher);
    return 0;
}

/* 64 requests at once against a stopped manager (the test stops it): each answers within its own
 * bound + 100 ms, from 64 threads and from 64 async requests. */
#define STOPPED_REQUESTS 64
#define STOPPED_BOUND_MS 500

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

struct stopped_job {
    double took_ms;
    scope_result result;
    int direct;
};

static void *stopped_request(void *arg) {
    struct stopped_job *job = arg;
    double started = now_ms();
    scope_launcher *launcher = NULL;
    job->result = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, STOPPED_BOUND_MS, &launcher);
    job->took_ms = now_ms() - started;
    job->direct = launcher == NULL;
    scope_launcher_free(launcher);
    return NULL;
}

struct async_requests {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int answered;
    double started;
    double took_ms[STOPPED_REQUESTS];
    int direct[STOPPED_REQUESTS];
};

static void async_ready(void *userdata, scope_result result, scope_launcher *launcher, const char *error) {
    struct async_requests *all = userdata;
    (void)error;
    pthread_mutex_lock(&all->lock);
    int i = all->answered++;
    all->took_ms[i] = now_ms() - all->started;
    all->direct[i] = result == SCOPE_RESULT_OK && launcher == NULL;
    pthread_cond_signal(&all->done);
    pthread_mutex_unlock(&all->lock);
    scope_launcher_free(launcher);
}

static int scenario_stopped_manager_requests(void) {
    static struct stopped_job jobs[STOPPED_REQUESTS];
    pthread_t threads[STOPPED_REQUESTS];
    for (int i = 0; i < STOPPED_REQUESTS; i++)
        CHECK(pthread_create(&threads[i], NULL, stopped_request, &jobs[i]) == 0, "pthread_create");
    for (int i = 0; i < STOPPED_REQUESTS; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    for (int i = 0; i < STOPPED_REQUESTS; i++) {
        CHECK(jobs[i].result == SCOPE_RESULT_OK && jobs[i].direct, "thread %d: result %d", i, (int)jobs[i].result);
        CHECK(jobs[i].took_ms < STOPPED_BOUND_MS + 100, "thread %d answered after %.0f ms", i, jobs[i].took_ms);
    }

    static struct async_requests all = {.lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
    all.started = now_ms();
    for (int i = 0; i < STOPPED_REQUESTS; i++)
        CHECK(scope_launcher_for_env_async(NULL, SCOPE_KIND_TOOL, STOPPED_BOUND_MS, async_ready, &all) == SCOPE_RESULT_OK,
              "async request %d: %s", i, scope_last_error());
    pthread_mutex_lock(&all.lock);
    while (all.answered < STOPPED_REQUESTS) pthread_cond_wait(&all.done, &all.lock);
    pthread_mutex_unlock(&all.lock);
    for (int i = 0; i < STOPPED_REQUESTS; i++) {
        CHECK(all.direct[i], "async answer %d is not a direct launch", i);
        CHECK(all.took_ms[i] < STOPPED_BOUND_MS + 100, "async answer %d came after %.0f ms", i, all.took_ms[i]);
    }
    CHECK(scope_launcher_for_env_async(NULL, SCOPE_KIND_TOOL, STOPPED_BOUND_MS, NULL, NULL) == SCOPE_RESULT_NULL_PARAMETER,
          "a NULL callback is refused");
    /* The detached request threads may still be unwinding: let them finish before exit. */
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000}, NULL);
    return 0;
}

/* A burst (issue 22): 256 threads at once, each with a request of its own, a wrap and a
 * posix_spawn; each command appends its cgroup to a report of its own as it starts. None goes
 * direct, every command starts in its own scope, and runs once. */
#define BURST 256

struct burst_job {
    pthread_barrier_t *start;
    int index;
    char unit[128];
    int direct;
    int ok;
};

static void *burst_launch(void *arg) {
    struct burst_job *job = arg;
    char name[32];
    snprintf(name, sizeof name, "burst-%d", job->index);
    char *report = scratch_path(name);
    const char *argv[] = {"sh", "-c", "grep ^0:: /proc/$$/cgroup >> \"$0\"", report, NULL};
    pthread_barrier_wait(job->start);
    scope_launcher *launcher = NULL;
    scope_result r = scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher);
    CHECK(r == SCOPE_RESULT_OK, "scope_launcher_for_env returned %u", (unsigned)r);
    job->direct = launcher == NULL;
    if (launcher) {
        scope_argv *wrapped = must_wrap(launcher, argv);
        snprintf(job->unit, sizeof job->unit, "%s", scope_argv_unit(wrapped));
        job->ok = wait_exit(spawn(scope_argv_ptr(wrapped), 0)) == 0;
        scope_argv_free(wrapped);
        scope_launcher_free(launcher);
    }
    free(report);
    return NULL;
}

static int scenario_burst(void) {
    pthread_barrier_t start;
    CHECK(pthread_barrier_init(&start, NULL, BURST) == 0, "pthread_barrier_init");
    static struct burst_job jobs[BURST];
    pthread_t threads[BURST];
    double began = now_ms();
    for (int i = 0; i < BURST; i++) {
        jobs[i] = (struct burst_job){.start = &start, .index = i};
        CHECK(pthread_create(&threads[i], NULL, burst_launch, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < BURST; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    double took = now_ms() - began;
    pthread_barrier_destroy(&start);
    for (int i = 0; i < BURST; i++) {
        CHECK(!jobs[i].direct, "launch %d went direct", i);
        CHECK(jobs[i].ok, "launch %d's command failed", i);
        char name[32];
        snprintf(name, sizeof name, "burst-%d", i);
        char *report = scratch_path(name);
        char *text = read_file(report, NULL);
        char *newline = strchr(text, '\n');
        CHECK(newline && newline[1] == '\0', "launch %d ran once: %s", i, text);
        free(text);
        check_cgroup_file(report, jobs[i].unit);
        free(report);
    }
    fprintf(stderr, "%d launches at once from C threads: all scoped, each once, in %.0f ms\n", BURST, took);
    return 0;
}

/* Run in a synaps-daemon scope of its own: the scope of a child launched directly is this
 * process's own, and is refused (issue 13, item 1). */
static int scenario_holds_caller(void) {
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

/* Issue 13, item 9: once scope_set_log_callback returns, the callback it replaced is not running
 * anywhere and never runs again, so its userdata can be freed at once. Four threads log without
 * pause (a DEBUG line a request) while the main thread installs a callback whose userdata it
 * frees right after replacing it, 300 times. The callback reads its userdata (a plain read, which
 * ASan checks) on entry and after a pause, and checks that its round is still on in a table that
 * is never freed. */
#define LOG_ROUNDS 300

struct log_box {
    int round;
};

static atomic_int round_on[LOG_ROUNDS];
static atomic_long boxed_calls;
static atomic_int log_violations;
static atomic_int logging_stop;

static void boxed_callback(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)level;
    (void)message;
    (void)len;
    const struct log_box *box = userdata;
    if (!atomic_load(&round_on[box->round])) atomic_fetch_add(&log_violations, 1);
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 50 * 1000}, NULL);
    if (!atomic_load(&round_on[box->round])) atomic_fetch_add(&log_violations, 1);
    atomic_fetch_add(&boxed_calls, 1);
}

static void quiet_callback(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata;
    (void)level;
    (void)message;
    (void)len;
}

static void *keep_logging(void *env) {
    while (!atomic_load(&logging_stop)) {
        scope_launcher *launcher = SENTINEL;
        if (scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher) != SCOPE_RESULT_OK || launcher != NULL) {
            atomic_fetch_add(&log_violations, 1000);
            return NULL;
        }
    }
    return NULL;
}

static int scenario_log_callback_replaced(void) {
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=off", NULL};
    const char **env = env_edit(NULL, add);
    CHECK(scope_set_log_level(SCOPE_LOG_LEVEL_DEBUG) == SCOPE_RESULT_OK, "debug level");
    scope_set_log_callback(quiet_callback, NULL);
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&threads[i], NULL, keep_logging, env) == 0, "pthread_create");
    for (int round = 0; round < LOG_ROUNDS; round++) {
        struct log_box *box = malloc(sizeof *box);
        CHECK(box != NULL, "malloc");
        box->round = round;
        atomic_store(&round_on[round], 1);
        scope_set_log_callback(boxed_callback, box);
        sleep_ms(1);
        /* Replaced by another callback, or by NULL (the lines go to stderr) every third round. */
        if (round % 3 == 0) {
            scope_set_log_callback(NULL, NULL);
        } else {
            scope_set_log_callback(quiet_callback, NULL);
        }
        atomic_store(&round_on[round], 0);
        free(box);
    }
    atomic_store(&logging_stop, 1);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    scope_set_log_callback(NULL, NULL);
    CHECK(scope_set_log_level(SCOPE_LOG_LEVEL_WARN) == SCOPE_RESULT_OK, "warn level");
    long calls = atomic_load(&boxed_calls);
    fprintf(stderr, "log_callback_replaced: %ld calls of the boxed callbacks, %d of a replaced one\n", calls,
            atomic_load(&log_violations));
    CHECK(atomic_load(&log_violations) == 0, "%d calls of a replaced callback", atomic_load(&log_violations));
    CHECK(calls > LOG_ROUNDS, "the callback ran %ld times", calls);
    free(env);
    return 0;
}

/* The slice checks' WARN lines, counted by the callback from whichever thread logs. */
static int slice_warned, unanswered_warned;

static void count_slice_lines(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata;
    (void)len;
    if (level != SCOPE_LOG_LEVEL_WARN) return;
    pthread_mutex_lock(&log_lock);
    if (strstr(message, "slice cabibusy.slice sets no limits") != NULL) slice_warned++;
    if (strstr(message, "could not check whether slice cabiflush.slice sets any limits") != NULL) unanswered_warned++;
    pthread_mutex_unlock(&log_lock);
}

static int counted(int *count) {
    pthread_mutex_lock(&log_lock);
    int value = *count;
    pthread_mutex_unlock(&log_lock);
    return value;
}

/* A launch that must be scoped, answered within 300 ms + 100 ms whatever the slice check does. */
static void request_scoped_quickly(void) {
    scope_launcher *launcher = NULL;
    double started = now_ms();
    scope_result r = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 300, &launcher);
    if (r != SCOPE_RESULT_OK || launcher == NULL) {
        fprintf(stderr, "FAIL: a scoped launcher: result %u: %s\n", (unsigned)r, scope_last_error());
        exit(1);
    }
    if (now_ms() - started >= 400) {
        fprintf(stderr, "FAIL: a request waited %.0f ms for the slice check\n", now_ms() - started);
        exit(1);
    }
    scope_launcher_free(launcher);
}

/* The environment names cabibusy.slice, and its manager answers the first check 5 s late: the
 * check asks again on its own, with no further request, and the warning comes once. */
static int scenario_busy_slice_check(void) {
    scope_set_log_callback(count_slice_lines, NULL);
    request_scoped_quickly();
    double deadline = now_ms() + 10000;
    while (counted(&slice_warned) == 0) {
        CHECK(now_ms() < deadline, "the warning never came");
        sleep_ms(50);
    }
    for (int i = 0; i < 5; i++) request_scoped_quickly();
    sleep_ms(1500);
    CHECK(counted(&slice_warned) == 1, "%d warnings, expected exactly one", counted(&slice_warned));
    scope_set_log_callback(NULL, NULL);
    return 0;
}

/* The environment names cabiflush.slice, and its manager answers every slice check 5 s late. */
static int scenario_flush_warnings(void) {
    scope_set_log_callback(count_slice_lines, NULL);
    scope_launcher *launcher = NULL;
    CHECK(scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 500, &launcher) == SCOPE_RESULT_OK && launcher != NULL,
          "scoped: %s", scope_last_error());
    scope_launcher_free(launcher);
    double started = now_ms();
    scope_result r = scope_flush_warnings(300);
    CHECK(r == SCOPE_RESULT_TIMED_OUT, "result %u", (unsigned)r);
    CHECK(now_ms() - started < 500, "flushed after %.0f ms", now_ms() - started);
    CHECK(counted(&unanswered_warned) == 1, "%d warnings, expected one", counted(&unanswered_warned));
    scope_set_log_callback(NULL, NULL);
    /* The check's own bound (500 ms) ends its attempt; it then pauses before asking again. */
    CHECK(scope_flush_warnings(2000) == SCOPE_RESULT_OK, "the attempt ended by its bound");
    return 0;
}

/* The environment names an undefined slice (SYNAPS_TEST_SLICE, for tool launches); six threads
 * launch with a config naming none while the main thread makes the one request that names it:
 * the warning reaches the callback exactly once. Run in 20 fresh processes by the Rust test. */
static char concurrent_needle[160];
static int concurrent_warned;

static void count_concurrent(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata;
    (void)len;
    if (level != SCOPE_LOG_LEVEL_WARN || strstr(message, concurrent_needle) == NULL) return;
    pthread_mutex_lock(&log_lock);
    concurrent_warned++;
    pthread_mutex_unlock(&log_lock);
}

static void *launch_plain(void *envp) {
    for (int i = 0; i < 5; i++) {
        scope_launcher *launcher = must_launcher(envp);
        scope_launcher_free(launcher);
    }
    return NULL;
}

static int scenario_concurrent_slice_warning(void) {
    const char *slice = getenv("SYNAPS_TEST_SLICE");
    CHECK(slice != NULL, "SYNAPS_TEST_SLICE names the undefined slice");
    snprintf(concurrent_needle, sizeof concurrent_needle, "slice %s sets no limits", slice);
    char *plain = scratch_path("plain.config");
    write_file(plain, "");
    char config_entry[300];
    snprintf(config_entry, sizeof config_entry, "SYNAPS_CONFIG=%s", plain);
    const char *drop[] = {"SYNAPS_CONFIG", NULL};
    const char *add[] = {config_entry, NULL};
    const char **plain_env = env_edit(drop, add);
    scope_set_log_callback(count_concurrent, NULL);
    pthread_t threads[6];
    for (int i = 0; i < 6; i++) CHECK(pthread_create(&threads[i], NULL, launch_plain, plain_env) == 0, "pthread_create");
    scope_launcher_free(must_launcher(NULL));
    for (int i = 0; i < 6; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    double deadline = now_ms() + 10000;
    while (counted(&concurrent_warned) == 0 && now_ms() < deadline) sleep_ms(10);
    sleep_ms(300);
    CHECK(counted(&concurrent_warned) == 1, "the R12 warning came %d times", counted(&concurrent_warned));
    scope_set_log_callback(NULL, NULL);
    free(plain_env);
    free(plain);
    return 0;
}

/* The doctor's report goes to stderr for the test to read; bad input gets its code and a message. */
static int scenario_doctor(void) {
    char *report = NULL;
    scope_result r = scope_doctor(NULL, 3000, &report);
    CHECK(r == SCOPE_RESULT_OK && report != NULL, "doctor: %u %s", (unsigned)r, scope_last_error());
    CHECK(strstr(report, "\nverdict:       ") != NULL, "no verdict in:\n%s", report);
    fputs(report, stderr);
    scope_string_free(report);

    char *untouched = (char *)"untouched";
    CHECK(scope_doctor(NULL, 3000, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    CHECK(scope_doctor(NULL, 0, &untouched) == SCOPE_RESULT_INVALID_ARGUMENT, "a zero timeout");
    CHECK(strstr(scope_last_error(), "timeout_ms is 0 ms") != NULL, "message: %s", scope_last_error());
    const char *bad_env[] = {"NO_EQUALS_SIGN", NULL};
    char error[64];
    CHECK(scope_doctor_r(bad_env, 3000, &untouched, error, sizeof error) == SCOPE_RESULT_INVALID_ARGUMENT, "bad envp");
    CHECK(strncmp(error, "envp[0]", 7) == 0, "error buffer: %s", error);
    CHECK(strcmp(untouched, "untouched") == 0, "an out-parameter written on failure");
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
static int scenario_removed_while_read(void) {
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

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*run)(void);
    } scenarios[] = {
        {"abi_version", scenario_abi_version},       {"scoped_spawn", scenario_scoped_spawn},
        {"nonutf8_argv", scenario_nonutf8_argv},     {"direct_no_manager", scenario_direct_no_manager},
        {"refused_slice", scenario_refused_slice},   {"default_log_stderr", scenario_default_log_stderr},
        {"required", scenario_required},             {"scope_kill", scenario_scope_kill},
        {"bad_input", scenario_bad_input},           {"threads", scenario_threads},
        {"login_shell", scenario_login_shell},       {"stopped_manager_requests", scenario_stopped_manager_requests},
        {"busy_slice_check", scenario_busy_slice_check}, {"flush_warnings", scenario_flush_warnings},
        {"holds_caller", scenario_holds_caller},     {"log_callback_replaced", scenario_log_callback_replaced},
        {"doctor", scenario_doctor},                 {"removed_while_read", scenario_removed_while_read},
        {"other_users_scope", scenario_other_users_scope},
        {"concurrent_slice_warning", scenario_concurrent_slice_warning},
        {"burst", scenario_burst},                   {"user_switch", scenario_user_switch},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        if (strcmp(argv[1], scenarios[i].name) == 0) {
            int status = scenarios[i].run();
            char command[300];
            snprintf(command, sizeof command, "rm -rf '%s'", scratch_dir());
            if (system(command) != 0) fprintf(stderr, "could not remove %s\n", scratch_dir());
            return status;
        }
    }
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
}
