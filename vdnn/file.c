/* The shared file opener and reader (see file.h). */
#include "vdnn/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a non-regular path is, for "PATH is a folder, not a config file". */
static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m)) return "a folder";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISFIFO(m)) return "a pipe";
    return "not a regular file";
}

/* "a" or "an" before a kind of file ("an IDX file", "a plan"). */
static const char *article(const char *what)
{
    return what[0] && strchr("aeiouAEIOU", what[0]) ? "an" : "a";
}

static vdnn_status too_large(const char *path, const char *what, unsigned long long bytes, int at_least,
                             size_t max_bytes)
{
    char have[32], limit[32];
    vdnn_fmt_bytes((size_t)bytes, have, sizeof have);
    vdnn_fmt_bytes(max_bytes, limit, sizeof limit);
    return vdnn_fail(VDNN_EFORMAT, "%s: %s%s (%llu bytes) is over the %s (%zu bytes) limit for %s %s", path,
                     at_least ? "at least " : "", have, bytes, limit, max_bytes, article(what), what);
}

vdnn_status vdnn_file_open(const char *path, const char *what, size_t max_bytes, int flags, FILE **out,
                           long long *size)
{
    *out = NULL;
    *size = -1;
    /* O_NONBLOCK: opening a FIFO that no one writes to returns at once */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return vdnn_fail(VDNN_EIO, "%s: cannot open the %s: %s", path, what, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return vdnn_fail(VDNN_EIO, "%s: cannot open the %s: %s", path, what, strerror(err));
    }
    int pipe_ok = S_ISFIFO(st.st_mode) && (flags & VDNN_FILE_PIPE);
    if (!S_ISREG(st.st_mode) && !pipe_ok) {
        close(fd);
        return vdnn_fail(VDNN_EIO, "%s: is %s, not %s %s (a regular file%s is needed)", path, kind_of(st.st_mode),
                         article(what), what, flags & VDNN_FILE_PIPE ? " or a pipe" : "");
    }
    if (S_ISREG(st.st_mode) && max_bytes && (unsigned long long)st.st_size > max_bytes) {
        close(fd);
        return too_large(path, what, (unsigned long long)st.st_size, 0, max_bytes);
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int err = errno;
        close(fd);
        return vdnn_fail(VDNN_EIO, "%s: cannot open the %s: %s", path, what, strerror(err));
    }
    *out = f;
    *size = S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
    return VDNN_OK;
}

/* The line of the first NUL byte in buf[0..len), for the message. */
static long nul_line(const char *buf, size_t len)
{
    long line = 1;
    for (size_t i = 0; i < len && buf[i]; i++) line += buf[i] == '\n';
    return line;
}

vdnn_status vdnn_file_read(const char *path, const char *what, size_t max_bytes, int flags, char **data,
                           size_t *len)
{
    *data = NULL;
    *len = 0;
    FILE *f = NULL;
    long long size = -1;
    vdnn_status st = vdnn_file_open(path, what, max_bytes, flags, &f, &size);
    if (st != VDNN_OK) return st;
    /* a regular file is read whole at once (one byte more to see it has not grown);
     * a pipe in chunks that double, up to one byte past the limit */
    size_t limit = max_bytes ? max_bytes : (size_t)-2;
    size_t cap = size >= 0 ? (size_t)size + 1 : 4096, n = 0;
    char *buf = NULL;
    for (;;) {
        if (n == cap) cap = cap > limit / 2 ? limit + 1 : cap * 2;
        char *bigger = realloc(buf, cap + 1);
        if (!bigger) {
            st = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory reading the %s", path, what);
            break;
        }
        buf = bigger;
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > limit) {
            st = too_large(path, what, n, 1, max_bytes);
            break;
        }
        if (got == 0 || (n < cap && (feof(f) || ferror(f)))) break;
    }
    if (st == VDNN_OK && ferror(f)) st = vdnn_fail(VDNN_EIO, "%s: cannot read the %s: %s", path, what, strerror(errno));
    fclose(f);
    if (st == VDNN_OK && (flags & VDNN_FILE_TEXT)) {
        buf[n] = '\0';
        if (strlen(buf) != n)
            st = vdnn_fail(VDNN_EFORMAT, "%s:%ld: a NUL byte (not a text %s?)", path, nul_line(buf, n), what);
    }
    if (st != VDNN_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *len = n;
    return VDNN_OK;
}

/* Writes all of data to fd and syncs it; 0 or an errno. */
static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        p += w;
        len -= (size_t)w;
    }
    return fsync(fd) == 0 ? 0 : errno;
}

/* Gives the unnamed file fd the name tmp (replacing a stale one); 0 or an errno. */
static int name_file(int fd, const char *tmp)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (unlink(tmp) != 0 && errno != ENOENT) return errno;
    if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
    return linkat(fd, "", AT_FDCWD, tmp, AT_EMPTY_PATH) == 0 ? 0 : errno;
}

static void sync_folder(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

vdnn_status vdnn_file_replace(const char *path, const char *what, const void *data, size_t len)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5), *dir = malloc(plen + 2);
    if (!tmp || !dir) {
        free(tmp);
        free(dir);
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory writing the %s", path, what);
    }
    snprintf(tmp, plen + 5, "%s.tmp", path);
    const char *slash = strrchr(path, '/');
    snprintf(dir, plen + 2, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    int had_previous = access(path, F_OK) == 0;
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666), named = fd < 0, err = 0;
    if (named) fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) err = errno;
    if (!err) err = write_all(fd, data, len);
    if (!err && !named) err = name_file(fd, tmp);
    if (fd >= 0 && close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    vdnn_status st = VDNN_OK;
    if (err) {
        if (named || access(tmp, F_OK) == 0) unlink(tmp);
        st = vdnn_fail(VDNN_EIO, "%s: writing the %s failed: %s (%s)", path, what, strerror(err),
                       had_previous ? "the previous one is untouched" : "none was written");
    } else {
        sync_folder(dir);
    }
    free(tmp);
    free(dir);
    return st;
}

const char *vdnn_cache_dir(char *buf, size_t len)
{
    const char *e = getenv("VDNN_CACHE");
    if (e && *e) return e;
    e = getenv("XDG_CACHE_HOME");
    if (e && *e) {
        snprintf(buf, len, "%s/vdnn", e);
        return buf;
    }
    e = getenv("HOME");
    snprintf(buf, len, "%s/.cache/vdnn", e && *e ? e : ".");
    return buf;
}

void vdnn_make_dirs(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *c = buf + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            mkdir(buf, 0755);
            *c = '/';
        }
    mkdir(buf, 0755);
}
