/* How jobs and the slow-down manager talk (see proto.h). */
#include "manager/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "manager/rules.h"

/* Refuses a folder that is not the user's own: another user could put a socket of
 * theirs there, or replace ours. lstat: a symbolic link is refused, not followed. */
static vdnn_status trusted_dir(const char *dir)
{
    struct stat s;
    if (lstat(dir, &s) != 0) return vdnn_fail(VDNN_EIO, "the manager's folder %s: %s", dir, strerror(errno));
    if (S_ISLNK(s.st_mode))
        return vdnn_fail(VDNN_EIO, "the manager's folder %s is a symbolic link: give --manager PATH in a folder of "
                         "your own", dir);
    if (!S_ISDIR(s.st_mode)) return vdnn_fail(VDNN_EIO, "the manager's folder %s is not a folder", dir);
    if (s.st_uid != geteuid())
        return vdnn_fail(VDNN_EIO, "the manager's folder %s belongs to another user (uid %u): give --manager PATH",
                         dir, (unsigned)s.st_uid);
    if (s.st_mode & 022)
        return vdnn_fail(VDNN_EIO, "the manager's folder %s may be written by others (mode %03o): chmod 700 it",
                         dir, (unsigned)(s.st_mode & 0777));
    return VDNN_OK;
}

/* Makes `dir` (0700) if missing, then checks it. */
static vdnn_status own_dir(const char *dir)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return vdnn_fail(VDNN_EIO, "cannot make the manager's folder %s: %s", dir, strerror(errno));
    return trusted_dir(dir);
}

vdnn_status mgr_check_dir(const char *path)
{
    char dir[512];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) >= sizeof dir)
        return vdnn_fail(VDNN_EINVAL, "the manager's socket path %s is too long", path);
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    return trusted_dir(dir);
}

vdnn_status mgr_check_peer(int fd, const char *path)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return vdnn_fail(VDNN_EIO, "%s: cannot tell who is at the other end: %s", path, strerror(errno));
    if (cr.uid != geteuid())
        return vdnn_fail(VDNN_EIO, "%s: the process at the other end (pid %ld) runs as another user (uid %u, not "
                         "%u): not trusted", path, (long)cr.pid, (unsigned)cr.uid, (unsigned)geteuid());
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
    *fd = -1;
    struct stat s;
    if (lstat(path, &s) != 0 && errno == ENOENT)
        return vdnn_fail(VDNN_EIO, "no vdnn manager is listening at %s (start one with `vdnn manager`)", path);
    vdnn_status st = mgr_check_dir(path);
    if (st != VDNN_OK) return st;
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
    if ((st = mgr_check_peer(*fd, path)) != VDNN_OK) {
        close(*fd);
        *fd = -1;
    }
    return st;
}

/* Takes PATH.lock: whoever holds it owns PATH. Never removed (removing a lock file
 * lets two processes hold locks on two files of one name). */
static vdnn_status take_lock(const char *path, int *lock_fd)
{
    char lock[600];
    snprintf(lock, sizeof lock, "%s.lock", path);
    *lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*lock_fd < 0) return vdnn_fail(VDNN_EIO, "cannot open the manager's lock %s: %s", lock, strerror(errno));
    if (flock(*lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(*lock_fd);
        *lock_fd = -1;
        if (e == EWOULDBLOCK)
            return vdnn_fail(VDNN_EIO, "a vdnn manager is already running at %s (it holds %s; `vdnn manager --status` "
                             "shows it)", path, lock);
        return vdnn_fail(VDNN_EIO, "cannot lock %s: %s", lock, strerror(e));
    }
    return VDNN_OK;
}

/* With the lock held: refuses a live manager (one started by an older vdnn, which
 * took no lock), removes a stale socket, binds and listens. */
static vdnn_status bind_socket(const char *path, mgr_listener *l)
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
    l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (l->fd < 0) return vdnn_fail(VDNN_EIO, "cannot make a socket: %s", strerror(errno));
    struct sockaddr_un a = address(path);
    mode_t old = umask(077);   /* only this user may connect */
    int bound = bind(l->fd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (bound != 0 || listen(l->fd, 64) != 0 || lstat(path, &s) != 0)
        return vdnn_fail(VDNN_EIO, "cannot listen at %s: %s", path, strerror(errno));
    l->dev = s.st_dev;
    l->ino = s.st_ino;
    return VDNN_OK;
}

vdnn_status mgr_listen(const char *path, mgr_listener *l)
{
    memset(l, 0, sizeof *l);
    l->fd = l->lock_fd = -1;
    vdnn_status st = mgr_check_dir(path);
    if (st == VDNN_OK) st = take_lock(path, &l->lock_fd);
    if (st == VDNN_OK) st = bind_socket(path, l);
    if (st != VDNN_OK) {
        if (l->fd >= 0) close(l->fd);
        if (l->lock_fd >= 0) close(l->lock_fd);
        l->fd = l->lock_fd = -1;
    }
    return st;
}

void mgr_unlisten(const char *path, mgr_listener *l)
{
    struct stat s;
    if (l->fd >= 0 && lstat(path, &s) == 0 && s.st_dev == l->dev && s.st_ino == l->ino) unlink(path);
    if (l->fd >= 0) close(l->fd);
    if (l->lock_fd >= 0) close(l->lock_fd);   /* releases the lock */
    l->fd = l->lock_fd = -1;
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
    /* a peer that closed with our message unread (a refusal sent at once) leaves
     * ECONNRESET, reported once and before what it sent: read that too */
    if (n < 0 && errno == ECONNRESET) {
        n = recv(fd, buf, len - 1, MSG_DONTWAIT);
        if (n < 0) errno = ECONNRESET;
    }
    if (n < 0) return -1;
    buf[n] = 0;
    return n == 0 ? 0 : (int)n;
}

/* Where the value of `key` starts in msg, and its length in *n; NULL when absent. */
static const char *find_field(const char *msg, const char *key, size_t *n)
{
    size_t k = strlen(key);
    for (const char *p = msg; (p = strstr(p, key)) != NULL; p += k) {
        if ((p != msg && p[-1] != ' ') || p[k] != '=') continue;
        *n = strcspn(p + k + 1, " \n");
        return p + k + 1;
    }
    return NULL;
}

int mgr_field(const char *msg, const char *key, char *out, size_t len)
{
    size_t n = 0;
    const char *v = find_field(msg, key, &n);
    if (!v || n >= len) return 0;
    memcpy(out, v, n);
    out[n] = 0;
    return 1;
}

int mgr_has_field(const char *msg, const char *key)
{
    size_t n = 0;
    return find_field(msg, key, &n) != NULL;
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

int mgr_field_range(const char *msg, const char *key, double lo, double hi, double *out)
{
    char v[64], *end;
    if (!mgr_has_field(msg, key)) return 0;
    if (!mgr_field(msg, key, v, sizeof v)) return -1;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo || x > hi) return -1;
    *out = x;
    return 1;
}

int mgr_request(int fd, const char *msg, char *buf, size_t len, int wait_ms)
{
    if (mgr_send(fd, msg) != 0) wait_ms = 0;   /* only what is already there */
    return mgr_recv(fd, buf, len, wait_ms);
}

int mgr_refusal(const char *msg, char *why, size_t len)
{
    if (strncmp(msg, "refused", 7) || (msg[7] && msg[7] != ' ')) return 0;
    if (!mgr_field(msg, "reason", why, len)) snprintf(why, len, "(no reason given)");
    for (char *p = why; *p; p++)
        if (*p == '_') *p = ' ';
    return 1;
}

int mgr_parse_welcome(const char *msg, int *id, int *units)
{
    double i = 0, u = 0;
    if (strncmp(msg, "welcome ", 8) || mgr_field_range(msg, "id", 1, 1e9, &i) != 1 ||
        mgr_field_range(msg, "units", 2, 1000, &u) != 1 || i != floor(i) || u != floor(u))
        return 0;
    *id = (int)i;
    *units = (int)u;
    return 1;
}

int mgr_parse_dr(const char *msg, int ndev, int units, int *out)
{
    double v[MGR_MAX_DEVICES];
    if (strncmp(msg, "dr ", 3) || ndev > MGR_MAX_DEVICES || mgr_parse_list(msg + 3, v, MGR_MAX_DEVICES) != ndev) return 0;
    int total = 0;
    for (int k = 0; k < ndev; k++) {
        if (!(v[k] >= 0 && v[k] <= units) || v[k] != floor(v[k])) return 0;
        total += (int)v[k];
    }
    if (total != units) return 0;
    for (int k = 0; k < ndev; k++) out[k] = (int)v[k];
    return 1;
}

const char *mgr_text_escape(const char *text, char *buf, size_t len)
{
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        int ctl = (*p < 0x20 && *p != '\n') || *p == 0x7f;
        if (k + (ctl ? 4 : 1) >= len) break;
        if (ctl) k += (size_t)snprintf(buf + k, len - k, "\\x%02x", *p);
        else buf[k++] = (char)*p;
    }
    if (len) buf[k] = 0;
    return buf;
}
