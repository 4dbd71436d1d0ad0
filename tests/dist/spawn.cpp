// A C++ program built against the unpacked C tarball through CMake (scripts/test-dist.sh):
// runs its arguments in their own scope and prints "pid N in UNIT", then its version.
#include <synaps_scope.h>

#include <cstdio>
#include <memory>
#include <string>

#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

namespace {
struct LauncherFree {
    void operator()(scope_launcher *launcher) const { scope_launcher_free(launcher); }
};
struct ArgvFree {
    void operator()(scope_argv *argv) const { scope_argv_free(argv); }
};
}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    if (scope_abi_version() != SCOPE_ABI_VERSION) {
        std::fprintf(stderr, "ABI %u, built for %d\n", scope_abi_version(), SCOPE_ABI_VERSION);
        return 1;
    }
    scope_launcher *raw = nullptr;
    if (scope_launcher_for_env(nullptr, SCOPE_KIND_TOOL, &raw) != SCOPE_RESULT_OK) {
        std::fprintf(stderr, "no scope: %s\n", scope_last_error());
        return 1;
    }
    std::unique_ptr<scope_launcher, LauncherFree> launcher(raw);
    std::unique_ptr<scope_argv, ArgvFree> wrapped;
    char *const *child = argv + 1;
    scope_argv *out = nullptr;
    if (launcher && scope_wrap_argv(launcher.get(), argv + 1, nullptr, nullptr, &out) == SCOPE_RESULT_OK) {
        wrapped.reset(out);
        child = scope_argv_ptr(wrapped.get());
    }
    const char *unit = scope_argv_unit(wrapped.get());
    pid_t pid = 0;
    if (posix_spawnp(&pid, child[0], nullptr, nullptr, child, environ) != 0) {
        std::perror("posix_spawnp");
        return 127;
    }
    std::printf("pid %d in %s\n", static_cast<int>(pid), unit ? unit : "(direct)");
    std::printf("wrapper %s\n", child[0]);
    std::printf("version %s\n", scope_version());
    std::fflush(stdout);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
