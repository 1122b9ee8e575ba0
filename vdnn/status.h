/* Status codes and the thread-local error message.
 *
 * Library code never exits: it returns a vdnn_status and, for any failure, leaves a
 * human-readable message (naming the file, line, layer or tensor concerned) that the
 * caller fetches with vdnn_errmsg(). The CLI prints it prefixed with "vdnn: ". */
#ifndef VDNN_STATUS_H
#define VDNN_STATUS_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    VDNN_OK = 0,
    VDNN_EINVAL,   /* bad argument, config value or command-line flag */
    VDNN_ENOMEM,   /* a host allocation failed */
    VDNN_EBUDGET,  /* the device pool cannot satisfy a request */
    VDNN_EIO,      /* a file could not be opened, read or written */
    VDNN_EFORMAT,  /* a file's content is corrupt, truncated or of the wrong kind */
    VDNN_EDEVICE,  /* the device is missing or failed */
    VDNN_ENUMERIC  /* a NaN or infinite value where a finite one is needed */
} vdnn_status;

/* Sets the calling thread's error message (printf-style) and returns s. */
vdnn_status vdnn_fail(vdnn_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with "prefix: " (for adding context on the way up). */
vdnn_status vdnn_wrap(vdnn_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The calling thread's last message; never NULL. Owned by the library. */
const char *vdnn_errmsg(void);

/* A one-line notice from library code about something it worked around and went on
 * (a convolution algorithm that could not run, replaced by another): written, with a
 * newline, to the notice stream, stderr unless vdnn_set_notice_stream says otherwise. */
void vdnn_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Where notices go (NULL: nowhere); the stream is not owned. Returns the previous one. */
FILE *vdnn_set_notice_stream(FILE *f);

/* A short name for a status code ("budget", "io", ...). */
const char *vdnn_status_name(vdnn_status s);

/* Parses a size with an optional K/M/G/T or KiB/MiB/GiB/TiB suffix (powers of 1024)
 * into bytes, or a bare count of bytes (with or without a B). Returns VDNN_EINVAL with
 * a message naming `what` on a malformed or overflowing value, and on KB/MB/GB/TB, which
 * mean powers of 1000 to some: the message says what to write instead. */
vdnn_status vdnn_parse_bytes(const char *text, const char *what, size_t *out);

/* Formats bytes as "1.50 MiB" into buf; returns buf. */
char *vdnn_fmt_bytes(size_t bytes, char *buf, size_t buflen);
/* As vdnn_fmt_bytes with the exact count too, "1.50 MiB (1572864 bytes)", for refusals:
 * two rounded figures can read "13.56 MiB is below the 13.56 MiB needed". */
char *vdnn_fmt_bytes_exact(size_t bytes, char *buf, size_t buflen);

/* a, b and c (NULL: empty) one after another in buf, cut to fit; returns buf. Names
 * the blocks of every iteration, simulated ones included, where snprintf costs. */
char *vdnn_join(char *buf, size_t buflen, const char *a, const char *b, const char *c);
/* v in decimal into buf (16 bytes hold any int); returns buf. */
char *vdnn_itoa(int v, char *buf, size_t buflen);

#endif
