/* gnuplot, for the plots `vdnn sweep` and `vdnn manager --plot` draw (tools/commands.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/commands.h"

void cli_gp_quote(const char *text, char *buf, size_t len)
{
    size_t k = 0;
    for (; *text && k + 3 < len; text++) {
        if (*text == '"' || *text == '\\') buf[k++] = '\\';
        buf[k++] = *text;
    }
    buf[k] = 0;
}

int cli_on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, n ? path : ".", prog);
        if (access(buf, X_OK) == 0) return 1;
        path = colon ? colon + 1 : NULL;
    }
    return 0;
}

/* gnuplot runs in the output folder, so the script names its files without a folder
 * and still works when the user reruns it there. */
vdnn_status cli_gnuplot(const char *dir, const char *script, const char *data)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return vdnn_fail(VDNN_EIO, "cannot start gnuplot: %s", strerror(errno));
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int w = 0;
    while (waitpid(pid, &w, 0) < 0)
        if (errno != EINTR) return vdnn_fail(VDNN_EIO, "waiting for gnuplot: %s", strerror(errno));
    if (WIFEXITED(w) && WEXITSTATUS(w) == 0) return VDNN_OK;
    if (WIFEXITED(w))
        return vdnn_fail(VDNN_EIO, "gnuplot %s/%s failed with exit status %d; %s in %s", dir, script, WEXITSTATUS(w),
                         data, dir);
    return vdnn_fail(VDNN_EIO, "gnuplot %s/%s was killed by signal %d; %s in %s", dir, script,
                     WIFSIGNALED(w) ? WTERMSIG(w) : 0, data, dir);
}
