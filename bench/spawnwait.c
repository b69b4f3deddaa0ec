/* The bench's reference for the guard's cost (bench/run.sh builds it
   static, like pgrun): spawn argv in a new group and wait for it, the
   least pgrun does. With --fork, first fork a child that _exits at once
   and is reaped at the end: the difference between the two is "one fork
   of a static binary". With --guard, the child instead lives until the
   command has ended, blocked on a pipe as pgrun's guard is, and is then
   killed and reaped: the least any guard that outlives the spawn costs. */
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv) {
    int fork_first = argc > 1 && strcmp(argv[1], "--fork") == 0;
    int guard = argc > 1 && strcmp(argv[1], "--guard") == 0;
    char **cmd = argv + 1 + (fork_first || guard);
    int tie[2] = {-1, -1};
    if (guard && pipe(tie) != 0) return 125;
    pid_t g = -1;
    if (fork_first || guard) {
        g = fork();
        if (g == 0) {
            if (guard) { char c; close(tie[1]); (void)read(tie[0], &c, 1); }
            _exit(0);
        }
        if (guard) close(tie[0]);
    }
    posix_spawnattr_t a; posix_spawnattr_init(&a);
    posix_spawnattr_setflags(&a, POSIX_SPAWN_SETPGROUP); posix_spawnattr_setpgroup(&a, 0);
    pid_t c; if (posix_spawn(&c, cmd[0], NULL, &a, cmd, environ)) return 127;
    int st; waitpid(c, &st, 0);
    if (g > 0) { if (guard) kill(g, SIGKILL); waitpid(g, NULL, 0); }
    return WEXITSTATUS(st);
}
