/* Answers taken from a queue (scope_queue): requests answered on the library's threads, taken on
 * the caller's own, with nothing called back; a host that closed its end costs nothing; a kill
 * after the tool's own exit kills what it left in its scope. */
#include "abi.h"

#include <dirent.h>
#include <poll.h>

/* Waits (up to 10 s) until the queue's reader is readable, drains its bytes, and takes one answer;
 * NULL when none came. */
static scope_answer *next_answer(const scope_queue *queue, int reader) {
    for (int i = 0; i < 1000; i++) {
        scope_answer *answer = SENTINEL;
        CHECK(scope_queue_take(queue, &answer) == SCOPE_RESULT_OK, "take");
        CHECK(answer != SENTINEL, "take writes its out-parameter");
        if (answer) return answer;
        struct pollfd poll_fd = {reader, POLLIN, 0};
        if (poll(&poll_fd, 1, 10) == 1) {
            char bytes[256];
            CHECK(read(reader, bytes, sizeof bytes) > 0, "the reader's bytes");
        }
    }
    return NULL;
}

/* Marks in `open` the descriptors below 1024 this process has open. */
static void open_fds(char open[1024]) {
    memset(open, 0, 1024);
    DIR *dir = opendir("/proc/self/fd");
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        int fd = atoi(entry->d_name);
        if (entry->d_name[0] != '.' && fd != dirfd(dir) && fd < 1024) open[fd] = 1;
    }
    closedir(dir);
}

/* A new queue, and in `*writer` the library's end of its socket, as the descriptor and inode that
 * appeared with it (no other thread opens any meanwhile). */
static scope_queue *queue_and_writer(int *reader, int *writer, ino_t *inode) {
    char before[1024], after[1024];
    open_fds(before);
    scope_queue *queue = NULL;
    CHECK(scope_queue_new(reader, &queue) == SCOPE_RESULT_OK, "queue");
    open_fds(after);
    *writer = -1;
    for (int fd = 0; fd < 1024; fd++)
        if (after[fd] && !before[fd] && fd != *reader) *writer = fd;
    struct stat st;
    CHECK(*writer >= 0 && fstat(*writer, &st) == 0, "the queue's own end");
    *inode = st.st_ino;
    return queue;
}

/* Whether descriptor `fd` no longer is the socket of `inode` (closed, or its number reused). */
static int closed(int fd, ino_t inode) {
    struct stat st;
    return fstat(fd, &st) != 0 || st.st_ino != inode;
}

/* Many requests at once, each answered once with its own token, the launcher taken exactly once. */
static void many_launchers(const scope_queue *queue, int reader) {
    enum { REQUESTS = 300 };
    static int seen[REQUESTS];
    for (uint64_t token = 0; token < REQUESTS; token++)
        CHECK(scope_launcher_for_env_queued(NULL, SCOPE_KIND_TOOL, 3000, queue, 1000 + token) == SCOPE_RESULT_OK, "queued");
    for (int i = 0; i < REQUESTS; i++) {
        scope_answer *answer = next_answer(queue, reader);
        CHECK(answer != NULL, "answer %d of %d never came", i, REQUESTS);
        uint64_t token = scope_answer_token(answer);
        CHECK(token >= 1000 && token < 1000 + REQUESTS && !seen[token - 1000], "token %llu", (unsigned long long)token);
        seen[token - 1000] = 1;
        CHECK(scope_answer_kind_of(answer) == SCOPE_ANSWER_KIND_LAUNCHER, "kind");
        CHECK(scope_answer_result(answer) == SCOPE_RESULT_OK && scope_answer_error(answer) == NULL, "result");
        scope_launcher *launcher = SENTINEL;
        CHECK(scope_answer_take_launcher(answer, &launcher) == SCOPE_RESULT_OK && launcher && launcher != SENTINEL, "taken");
        scope_launcher *again = SENTINEL;
        CHECK(scope_answer_take_launcher(answer, &again) == SCOPE_RESULT_INVALID_ARGUMENT && again == SENTINEL, "taken twice");
        CHECK(scope_answer_take_handle(answer, (scope_handle **)&again) == SCOPE_RESULT_INVALID_ARGUMENT, "another kind");
        CHECK(scope_answer_ending(answer) == NULL && scope_answer_oomd_warning(answer) == NULL, "no other payload");
        scope_launcher_free(launcher);
        scope_answer_free(answer);
    }
}

/* A tool that leaves a process in its scope and exits: after its exit, the handle (found through
 * the manager) kills what it left, waits for the scope to empty, and says how it ended. */
static void kill_after_the_tools_exit(const scope_queue *queue, int reader) {
    scope_launcher *launcher = must_launcher(NULL);
    char *left = scratch_path("left");
    char script[600];
    snprintf(script, sizeof script, "sleep 60 & echo $! > '%s'; exit 0", left);
    const char *argv[] = {"sh", "-c", script, NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    pid_t tool = spawn((char *const *)scope_argv_ptr(wrapped), 0);
    CHECK(wait_exit(tool) == 0, "the tool exits 0");
    CHECK(scope_handle_from_manager_queued(scope_argv_unit(wrapped), NULL, 3000, queue, 7) == SCOPE_RESULT_OK, "queued");
    scope_answer *answer = next_answer(queue, reader);
    CHECK(answer && scope_answer_kind_of(answer) == SCOPE_ANSWER_KIND_HANDLE && scope_answer_token(answer) == 7, "handle answer");
    scope_handle *handle = SENTINEL;
    CHECK(scope_answer_take_handle(answer, &handle) == SCOPE_RESULT_OK, "handle taken");
    scope_answer_free(answer);
    char *text = read_file(left, NULL);
    pid_t sleeper = (pid_t)atoi(text);
    free(text);
    CHECK(sleeper > 0 && alive(sleeper), "the process the tool left runs on");

    CHECK(scope_handle_kill_queued(handle, 5000, queue, 8) == SCOPE_RESULT_OK, "kill queued");
    answer = next_answer(queue, reader);
    CHECK(answer && scope_answer_kind_of(answer) == SCOPE_ANSWER_KIND_PIDS && scope_answer_result(answer) == SCOPE_RESULT_OK, "kill answer: %s", answer ? scope_answer_error(answer) : "none");
    size_t len = 99;
    const uint32_t *pids = scope_answer_pids(answer, &len);
    CHECK(len == 1 && pids[0] == (uint32_t)sleeper, "the kill found the process left (%zu pids)", len);
    scope_answer_free(answer);

    CHECK(scope_handle_wait_empty_queued(handle, 5000, queue, 9) == SCOPE_RESULT_OK, "wait queued");
    answer = next_answer(queue, reader);
    CHECK(answer && scope_answer_kind_of(answer) == SCOPE_ANSWER_KIND_DONE && scope_answer_result(answer) == SCOPE_RESULT_OK, "empty");
    scope_answer_free(answer);
    CHECK(!alive(sleeper), "the process left is dead");

    CHECK(scope_handle_ending_queued(handle, NULL, 3000, queue, 10) == SCOPE_RESULT_OK, "ending queued");
    answer = next_answer(queue, reader);
    const scope_ending *ending = answer ? scope_answer_ending(answer) : NULL;
    CHECK(ending && ending->kind == SCOPE_ENDING_KIND_HANDLE_KILL && ending->evidence == SCOPE_EVIDENCE_OWN_KILL, "ending");
    scope_answer_free(answer);
    scope_handle_free(handle);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    free(left);
}

/* Log lines come as answers with the log's token; NULL puts stderr back. */
static void log_lines(const scope_queue *queue, int reader) {
    CHECK(scope_set_log_queue(queue, 42) == SCOPE_RESULT_OK, "log queue");
    char *config = scratch_path("config");
    write_file(config, "tool_scope_slice = cabiqueue.service\n");
    char entry[300];
    snprintf(entry, sizeof entry, "SYNAPS_CONFIG=%s", config);
    free(config);
    const char *add[] = {entry, NULL};
    const char **env = env_edit(NULL, add);
    scope_launcher *launcher = SENTINEL;
    CHECK(scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK && launcher == NULL, "direct");
    free(env);
    scope_answer *answer = next_answer(queue, reader);
    CHECK(answer && scope_answer_kind_of(answer) == SCOPE_ANSWER_KIND_LOG && scope_answer_token(answer) == 42, "a log line");
    scope_log_level level = 0;
    const char *line = scope_answer_log_line(answer, &level);
    CHECK(level == SCOPE_LOG_LEVEL_WARN && strstr(line, "cabiqueue.service") && strstr(line, "is not a slice"), "the line: %s", line);
    scope_answer_free(answer);
    CHECK(scope_set_log_queue(NULL, 0) == SCOPE_RESULT_OK, "stderr again");
}

/* A host that closed its end: answers for it are freed as they come (AddressSanitizer's leak check
 * sees any left), and its end of the socket is closed by the first answer, or, with none in
 * flight, when the next queue is made. */
static void host_gone(void) {
    int reader = -1, writer = -1;
    ino_t inode = 0;
    scope_queue *queue = queue_and_writer(&reader, &writer, &inode);
    for (uint64_t token = 1; token <= 20; token++)
        CHECK(scope_launcher_for_env_queued(NULL, SCOPE_KIND_TOOL, 3000, queue, token) == SCOPE_RESULT_OK, "queued");
    close(reader);
    for (int i = 0; i < 300 && !closed(writer, inode); i++) sleep_ms(10);
    CHECK(closed(writer, inode), "the first answer for a gone host closes its socket");
    scope_answer *answer = SENTINEL;
    CHECK(scope_queue_take(queue, &answer) == SCOPE_RESULT_OK && answer == NULL, "nothing kept for it");
    sleep_ms(1000);
    scope_queue_free(queue);

    scope_queue *idle = queue_and_writer(&reader, &writer, &inode);
    close(reader);
    int again_reader = -1;
    scope_queue *again = NULL;
    CHECK(scope_queue_new(&again_reader, &again) == SCOPE_RESULT_OK, "another queue");
    CHECK(closed(writer, inode), "a new queue closes the socket of a gone host's idle one");
    scope_queue_free(idle);
    scope_queue_free(again);
    close(again_reader);
}

/* A watch asked through the queue that cannot warn says why in its answer: oomd runs (a stand-in
 * owns its name), and no manager on that bus says which rules cover the scope. */
static void watch_that_cannot_warn(const scope_queue *queue, int reader) {
    struct oomd_bus bus;
    oomd_bus_start(&bus);
    scope_launcher *launcher = must_launcher(bus.env);
    const char *argv[] = {"sleep", "30", NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    pid_t tool = spawn((char *const *)scope_argv_ptr(wrapped), 0);
    scope_handle *handle = must_handle(scope_argv_unit(wrapped), tool);
    const scope_handle *handles[] = {handle};
    CHECK(scope_oomd_watch_new_queued(handles, 1, bus.env, 3000, queue, 11) == SCOPE_RESULT_OK, "queued");
    scope_answer *answer = next_answer(queue, reader);
    CHECK(answer && scope_answer_kind_of(answer) == SCOPE_ANSWER_KIND_OOMD_WATCH && scope_answer_token(answer) == 11, "watch answer");
    CHECK(scope_answer_result(answer) == SCOPE_RESULT_CANNOT_WARN, "result %u", (unsigned)scope_answer_result(answer));
    CHECK(scope_answer_cannot_warn_kind(answer) == SCOPE_CANNOT_WARN_KIND_CANNOT_ASK, "kind");
    CHECK(strstr(scope_answer_error(answer), "-.slice could not say") != NULL, "message: %s", scope_answer_error(answer));
    scope_oomd_watch *watch = SENTINEL;
    CHECK(scope_answer_take_oomd_watch(answer, &watch) == SCOPE_RESULT_INVALID_ARGUMENT && watch == SENTINEL, "no watch");
    scope_answer_free(answer);
    CHECK(scope_handle_kill(handle, 5000) == SCOPE_RESULT_OK, "kill");
    CHECK(wait_exit(tool) != 0, "killed");
    scope_handle_free(handle);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    oomd_bus_stop(&bus);
}

int scenario_queue(void) {
    int reader = -1;
    scope_queue *queue = SENTINEL;
    CHECK(scope_queue_new(NULL, &queue) == SCOPE_RESULT_NULL_PARAMETER && queue == SENTINEL, "NULL reader");
    CHECK(scope_queue_new(&reader, NULL) == SCOPE_RESULT_NULL_PARAMETER && reader == -1, "NULL out");
    CHECK(scope_queue_take(NULL, (scope_answer **)&queue) == SCOPE_RESULT_NULL_PARAMETER && queue == SENTINEL, "NULL queue");
    CHECK(scope_launcher_for_env_queued(NULL, SCOPE_KIND_TOOL, 3000, NULL, 1) == SCOPE_RESULT_NULL_PARAMETER, "NULL queue");
    CHECK(scope_queue_new(&reader, &queue) == SCOPE_RESULT_OK && reader >= 0, "queue");
    CHECK(scope_launcher_for_env_queued(NULL, SCOPE_KIND_TOOL, 0, queue, 1) == SCOPE_RESULT_INVALID_ARGUMENT, "zero bound");
    CHECK(scope_answer_kind_of(NULL) == SCOPE_ANSWER_KIND_NONE && scope_answer_token(NULL) == 0, "NULL answer");
    scope_answer_free(NULL);
    scope_queue_free(NULL);

    many_launchers(queue, reader);
    kill_after_the_tools_exit(queue, reader);
    log_lines(queue, reader);
    watch_that_cannot_warn(queue, reader);
    host_gone();

    /* A forked child is refused the parent's queue. */
    pid_t child = fork();
    if (child == 0) {
        scope_answer *answer = SENTINEL;
        _exit(scope_queue_take(queue, &answer) == SCOPE_RESULT_INVALID_ARGUMENT && answer == SENTINEL ? 0 : 1);
    }
    CHECK(wait_exit(child) == 0, "the child is refused");

    /* Freed with answers still in it: they are freed with it. */
    CHECK(scope_launcher_for_env_queued(NULL, SCOPE_KIND_TOOL, 3000, queue, 1) == SCOPE_RESULT_OK, "queued");
    sleep_ms(500);
    scope_queue_free(queue);
    close(reader);
    return 0;
}
