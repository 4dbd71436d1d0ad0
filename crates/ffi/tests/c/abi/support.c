/* Helpers the scenarios share. */
#include "abi.h"

#include <fcntl.h>

pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* What SENTINEL points to. */
char sentinel_storage;

static char scratch[256];

/* A directory of this process's own: not named by its pid, which two scenarios run at once in pid
 * namespaces of their own (`unshare --pid`) share, and so shared each other's report files. */
static void make_scratch_dir(void) {
    snprintf(scratch, sizeof scratch, "/tmp/synaps-cabi-XXXXXX");
    CHECK(mkdtemp(scratch) != NULL, "mkdtemp %s", scratch);
}

/* Made once, by whichever thread asks first: the burst's 256 threads ask at once, and a thread
 * that saw the name half written used a directory that does not exist. */
const char *scratch_dir(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    CHECK(pthread_once(&once, make_scratch_dir) == 0, "pthread_once");
    return scratch;
}

char *scratch_path(const char *name) {
    size_t size = strlen(scratch_dir()) + strlen(name) + 2;
    char *path = malloc(size);
    CHECK(path != NULL, "malloc");
    snprintf(path, size, "%s/%s", scratch_dir(), name);
    return path;
}

/* environ without the variables named in `drop` (NULL-terminated), plus `add` entries. The
 * array is malloc'd; its strings are borrowed. */
const char **env_edit(const char *const *drop, const char *const *add) {
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

const char *const NO_BUS[] = {"XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", NULL};

char *read_file(const char *path, size_t *len) {
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

void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s", path);
    fputs(text, f);
    fclose(f);
}

pid_t spawn(char *const *argv, int new_group) {
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

int wait_exit(pid_t pid) {
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int ends_with(const char *text, const char *suffix) {
    size_t t = strlen(text), s = strlen(suffix);
    return t >= s && strcmp(text + t - s, suffix) == 0;
}

void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int alive(pid_t pid) {
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

scope_launcher *must_launcher(const char *const *envp) {
    scope_launcher *launcher = SENTINEL;
    scope_result r = scope_launcher_for_env(envp, SCOPE_KIND_TOOL, &launcher);
    CHECK(r == SCOPE_RESULT_OK, "scope_launcher_for_env returned %u", (unsigned)r);
    CHECK(launcher != NULL && launcher != SENTINEL, "expected a launcher from the rig's manager");
    return launcher;
}

scope_argv *must_wrap(const scope_launcher *launcher, const char *const *argv) {
    scope_argv *wrapped = SENTINEL;
    scope_result r = scope_wrap_argv(launcher, argv, NULL, NULL, &wrapped);
    CHECK(r == SCOPE_RESULT_OK && wrapped != SENTINEL, "scope_wrap_argv returned %u", (unsigned)r);
    return wrapped;
}

/* The handle of `unit` once the child `pid` has entered it (the launcher program makes the scope
 * before it execs the command). */
scope_handle *must_handle(const char *unit, pid_t pid) {
    scope_handle *handle = SENTINEL;
    for (int i = 0; i < 2000 && scope_handle_from_pid(unit, (uint32_t)pid, &handle) != SCOPE_RESULT_OK; i++) sleep_ms(5);
    CHECK(handle != SENTINEL, "the child never reached %s", unit);
    return handle;
}

/* The first line of the child's report file: its cgroup, and it must be the unit's. */
void check_cgroup_file(const char *path, const char *unit) {
    char *text = read_file(path, NULL);
    char *newline = strchr(text, '\n');
    if (newline) *newline = '\0';
    CHECK(ends_with(text, unit), "cgroup %s is not in %s", text, unit);
    free(text);
}

/* The monotonic clock, in milliseconds. */
double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}


void oomd_bus_start(struct oomd_bus *bus) {
    oomd_bus_start_slow(bus, NULL);
}

/* oomd_bus_start, where `slow_set_up` (seconds, or NULL) has the environment name a stand-in in
 * front of the bus that holds a subscription's question on oomd's introspection that long. */
void oomd_bus_start_slow(struct oomd_bus *bus, const char *slow_set_up) {
    const char *script = getenv("SYNAPS_OOMD_BUS");
    CHECK(script != NULL, "SYNAPS_OOMD_BUS names tests/tools/oomd_bus.py");
    int in[2], out[2];
    CHECK(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipes");
    bus->pid = fork();
    CHECK(bus->pid >= 0, "fork");
    if (bus->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execlp("python3", "python3", script, scratch_dir(), slow_set_up, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    bus->to = in[1];
    bus->from = fdopen(out[0], "r");
    char line[4300];
    CHECK(bus->from != NULL && fgets(line, sizeof line, bus->from) != NULL && strncmp(line, "ready ", 6) == 0,
          "the stand-in oomd's bus started");
    line[strcspn(line, "\n")] = '\0';
    snprintf(bus->address, sizeof bus->address, "DBUS_SYSTEM_BUS_ADDRESS=%s", line + 6);
    const char *add[] = {bus->address, NULL};
    const char *drop[] = {"DBUS_SYSTEM_BUS_ADDRESS", NULL};
    bus->env = env_edit(drop, add);
}

/* oomd's Killed(cgroup, reason), sent as oomd sends it after a kill. */
void oomd_bus_killed(struct oomd_bus *bus, const char *cgroup, const char *reason) {
    CHECK(dprintf(bus->to, "kill %s %s\n", cgroup, reason) > 0, "the kill to the stand-in");
    char line[64];
    CHECK(fgets(line, sizeof line, bus->from) != NULL && strcmp(line, "sent\n") == 0, "the stand-in sent the signal");
}

/* oomd's whole kill of the cgroup at `dir` in one turn of the stand-in's loop (its mark, the kill,
 * `busy_ms` of other work, its signal), answering nothing on the bus meanwhile; oomd_bus_sent
 * waits for its end. */
void oomd_bus_kill_begun(struct oomd_bus *bus, const char *dir, const char *cgroup, const char *reason, int busy_ms) {
    CHECK(dprintf(bus->to, "oomd-kill %s %s %s %d\n", dir, cgroup, reason, busy_ms) > 0, "the kill to the stand-in");
}

void oomd_bus_sent(struct oomd_bus *bus) {
    char line[64];
    CHECK(fgets(line, sizeof line, bus->from) != NULL && strcmp(line, "sent\n") == 0, "the stand-in sent the signal");
}

void oomd_bus_stop(struct oomd_bus *bus) {
    close(bus->to);
    fclose(bus->from);
    CHECK(wait_exit(bus->pid) == 0, "the stand-in's bus ended cleanly");
    free(bus->env);
}
