/* How jobs and the slow-down manager talk (see proto.h). */
#include "manager/proto.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Makes `dir` (0700) if missing; refuses one that is not the user's own or that others
 * may write: another user could put a socket of theirs there. */
static vdnn_status own_dir(const char *dir)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return vdnn_fail(VDNN_EIO, "cannot make the manager's folder %s: %s", dir, strerror(errno));
    struct stat s;
    if (lstat(dir, &s) != 0) return vdnn_fail(VDNN_EIO, "the manager's folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(s.st_mode)) return vdnn_fail(VDNN_EIO, "the manager's folder %s is not a folder", dir);
    if (s.st_uid != geteuid())
        return vdnn_fail(VDNN_EIO, "the manager's folder %s belongs to another user (uid %u): give --manager PATH",
                         dir, (unsigned)s.st_uid);
    if (s.st_mode & 022)
        return vdnn_fail(VDNN_EIO, "the manager's folder %s may be written by others (mode %03o): chmod 700 it",
                         dir, (unsigned)(s.st_mode & 0777));
    return VDNN_OK;
}

vdnn_status mgr_socket_path(const char *given, int make_dir, char *out, size_t len)
{
    const char *env = getenv("VDNN_MANAGER");
    const char *path = given && *given ? given : env && *env ? env : NULL;
    char dir[512];
    if (!path) {
        const char *run = getenv("XDG_RUNTIME_DIR");
        if (run && *run) snprintf(dir, sizeof dir, "%s/vdnn", run);
        else snprintf(dir, sizeof dir, "/tmp/vdnn-%u", (unsigned)geteuid());
        if (make_dir) {
            vdnn_status st = own_dir(dir);
            if (st != VDNN_OK) return st;
        }
        if ((size_t)snprintf(out, len, "%s/manager.sock", dir) >= len)
            return vdnn_fail(VDNN_EINVAL, "the manager's socket path %s/manager.sock is too long", dir);
    } else if ((size_t)snprintf(out, len, "%s", path) >= len) {
        return vdnn_fail(VDNN_EINVAL, "the manager's socket path %s is too long", path);
    }
    if (strlen(out) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return vdnn_fail(VDNN_EINVAL, "the manager's socket path %s is longer than a Unix socket's %zu characters",
                         out, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    return VDNN_OK;
}

static struct sockaddr_un address(const char *path)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    return a;
}

vdnn_status mgr_dial(const char *path, int *fd)
{
    *fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (*fd < 0) return vdnn_fail(VDNN_EIO, "cannot make a socket: %s", strerror(errno));
    struct sockaddr_un a = address(path);
    if (connect(*fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(*fd);
        *fd = -1;
        if (e == ENOENT || e == ECONNREFUSED)
            return vdnn_fail(VDNN_EIO, "no vdnn manager is listening at %s (start one with `vdnn manager`)", path);
        return vdnn_fail(VDNN_EIO, "cannot reach the manager at %s: %s", path, strerror(e));
    }
    return VDNN_OK;
}

vdnn_status mgr_listen(const char *path, int *fd)
{
    int probe = -1;
    if (mgr_dial(path, &probe) == VDNN_OK) {
        close(probe);
        return vdnn_fail(VDNN_EIO, "a vdnn manager is already running at %s (`vdnn manager --status` shows it)", path);
    }
    struct stat s;
    if (lstat(path, &s) == 0) {
        if (!S_ISSOCK(s.st_mode))
            return vdnn_fail(VDNN_EIO, "%s exists and is not a socket: give the manager another path", path);
        if (unlink(path) != 0)   /* left by a manager that died */
            return vdnn_fail(VDNN_EIO, "cannot remove the stale socket %s: %s", path, strerror(errno));
    }
    *fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (*fd < 0) return vdnn_fail(VDNN_EIO, "cannot make a socket: %s", strerror(errno));
    struct sockaddr_un a = address(path);
    mode_t old = umask(077);   /* only this user may connect */
    int bound = bind(*fd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (bound != 0 || listen(*fd, 64) != 0) {
        int e = errno;
        close(*fd);
        *fd = -1;
        return vdnn_fail(VDNN_EIO, "cannot listen at %s: %s", path, strerror(e));
    }
    return VDNN_OK;
}

int mgr_send(int fd, const char *msg)
{
    ssize_t n = send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
    return n == (ssize_t)strlen(msg) ? 0 : -1;
}

int mgr_recv(int fd, char *buf, size_t len, int wait_ms)
{
    if (wait_ms != 0) {
        struct pollfd p = {fd, POLLIN, 0};
        int r;
        do r = poll(&p, 1, wait_ms);
        while (r < 0 && errno == EINTR);
        if (r == 0) {
            errno = EAGAIN;
            return -1;
        }
    }
    ssize_t n;
    do n = recv(fd, buf, len - 1, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    buf[n] = 0;
    return n == 0 ? 0 : (int)n;
}

int mgr_field(const char *msg, const char *key, char *out, size_t len)
{
    size_t k = strlen(key);
    for (const char *p = msg; (p = strstr(p, key)) != NULL; p += k) {
        if ((p != msg && p[-1] != ' ') || p[k] != '=') continue;
        const char *v = p + k + 1;
        size_t n = strcspn(v, " \n");
        if (n >= len) return 0;
        memcpy(out, v, n);
        out[n] = 0;
        return 1;
    }
    return 0;
}

int mgr_field_double(const char *msg, const char *key, double *out)
{
    char v[64], *end;
    if (!mgr_field(msg, key, v, sizeof v)) return 0;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x)) return 0;
    *out = x;
    return 1;
}

int mgr_parse_list(const char *text, double *out, int max)
{
    int n = 0;
    for (const char *p = text; *p;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || !isfinite(x) || n >= max) return -1;
        out[n++] = x;
        if (*end == ',' && end[1]) end++;
        else if (*end) return -1;
        p = end;
    }
    return n;
}
