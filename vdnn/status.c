/* Thread-local error messages and small shared parsing/formatting helpers. */
#include "vdnn/status.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char err_buf[1024];

vdnn_status vdnn_fail(vdnn_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return s;
}

vdnn_status vdnn_wrap(vdnn_status s, const char *fmt, ...)
{
    char prefix[512], joined[sizeof prefix + sizeof err_buf + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(joined, sizeof joined, "%s: %s", prefix, err_buf);
    size_t n = strlen(joined);
    if (n >= sizeof err_buf) n = sizeof err_buf - 1;
    memcpy(err_buf, joined, n);
    err_buf[n] = 0;
    return s;
}

const char *vdnn_errmsg(void)
{
    return err_buf[0] ? err_buf : "unknown error";
}

static FILE *notice_stream;
static int notice_set;

void vdnn_notice(const char *fmt, ...)
{
    FILE *f = notice_set ? notice_stream : stderr;
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("vdnn: notice: ", f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
    va_end(ap);
}

FILE *vdnn_set_notice_stream(FILE *f)
{
    FILE *old = notice_set ? notice_stream : stderr;
    notice_stream = f;
    notice_set = 1;
    return old;
}

const char *vdnn_status_name(vdnn_status s)
{
    switch (s) {
    case VDNN_OK: return "ok";
    case VDNN_EINVAL: return "invalid";
    case VDNN_ENOMEM: return "out of host memory";
    case VDNN_EBUDGET: return "over budget";
    case VDNN_EIO: return "io";
    case VDNN_EFORMAT: return "format";
    case VDNN_EDEVICE: return "device";
    case VDNN_ENUMERIC: return "numeric";
    }
    return "?";
}

vdnn_status vdnn_parse_bytes(const char *text, const char *what, size_t *out)
{
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p))
        return vdnn_fail(VDNN_EINVAL, "%s: '%s' is not a size (expected e.g. 512M, 6G, 1048576)", what, text);
    errno = 0;
    char *end;
    double v = strtod(p, &end);
    if (errno || end == p)
        return vdnn_fail(VDNN_EINVAL, "%s: '%s' is not a size", what, text);
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    int power = u ? (int)(u - units) + 1 : 0;
    double mul = 1;
    for (int k = 0; k < power; k++) mul *= 1024.0;
    if (power) end++;
    /* KB, MB, GB, TB are powers of 1000 to some and of 1024 to others */
    if (power && toupper((unsigned char)*end) == 'B')
        return vdnn_fail(VDNN_EINVAL, "%s: '%s' is ambiguous (%cB is 1000^%d bytes to some, 1024^%d to others): write "
                         "%.*s%c or %.*s%ciB for powers of 1024, or the bytes", what, text, *u, power, power,
                         (int)(end - 1 - p), p, *u, (int)(end - 1 - p), p, *u);
    if (power && toupper((unsigned char)end[0]) == 'I' && toupper((unsigned char)end[1]) == 'B') end += 2;
    else if (!power && toupper((unsigned char)*end) == 'B') end++;
    while (isspace((unsigned char)*end)) end++;
    if (*end)
        return vdnn_fail(VDNN_EINVAL, "%s: '%s' has trailing characters (expected e.g. 512M, 6G)", what, text);
    double bytes = v * mul;
    if (!(bytes >= 1) || bytes > (double)(SIZE_MAX / 2))
        return vdnn_fail(VDNN_EINVAL, "%s: '%s' is out of range", what, text);
    *out = (size_t)bytes;
    return VDNN_OK;
}

char *vdnn_fmt_bytes(size_t bytes, char *buf, size_t buflen)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; u++; }
    if (u == 0) snprintf(buf, buflen, "%zu B", bytes);
    else snprintf(buf, buflen, "%.2f %s", v, units[u]);
    return buf;
}

char *vdnn_join(char *buf, size_t buflen, const char *a, const char *b, const char *c)
{
    if (!buflen) return buf;
    const char *parts[3] = {a, b, c};
    size_t at = 0;
    for (int k = 0; k < 3; k++)
        for (const char *s = parts[k]; s && *s && at + 1 < buflen; s++) buf[at++] = *s;
    buf[at] = 0;
    return buf;
}

char *vdnn_itoa(int v, char *buf, size_t buflen)
{
    char rev[16];
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    int k = 0;
    do {
        rev[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t at = 0;
    if (v < 0 && at + 1 < buflen) buf[at++] = '-';
    while (k > 0 && at + 1 < buflen) buf[at++] = rev[--k];
    if (buflen) buf[at] = 0;
    return buf;
}

char *vdnn_fmt_bytes_exact(size_t bytes, char *buf, size_t buflen)
{
    char rounded[32];
    vdnn_fmt_bytes(bytes, rounded, sizeof rounded);
    if (bytes < 1024) snprintf(buf, buflen, "%s", rounded);
    else snprintf(buf, buflen, "%s (%zu bytes)", rounded, bytes);
    return buf;
}
