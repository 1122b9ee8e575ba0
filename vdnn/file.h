/* Opening and reading the files a user names (configs, plans, checkpoints, data sets,
 * the profile cache), with the refusals every reader shares (docs/readers.md):
 *  - a folder, a device (/dev/zero, a terminal) or a socket where a file is expected
 *    is an error that says what the path is, never a read that fails, blocks or does
 *    not end;
 *  - a pipe (a FIFO, `<(...)`) is accepted only where a reader says so (text files),
 *    and opening one never blocks;
 *  - a file over the reader's stated limit is refused before it is read, naming both
 *    sizes in bytes; a pipe is read up to the limit, then refused the same way;
 *  - a text file is NUL-terminated, and a NUL byte inside it is an error naming the
 *    line. */
#ifndef VDNN_FILE_H
#define VDNN_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "vdnn/status.h"

enum {
    VDNN_FILE_PIPE = 1,   /* a FIFO is accepted too (read up to the limit) */
    VDNN_FILE_TEXT = 2    /* vdnn_file_read: NUL-terminated, no NUL byte inside */
};

/* Opens `path` for reading: a regular file (or, with VDNN_FILE_PIPE, a FIFO) of at most
 * `max_bytes` (0: no limit). `what` names the kind of file in messages ("config file",
 * "checkpoint"). *size is a regular file's length in bytes, -1 for a FIFO. The caller
 * fclose()s *out. */
vdnn_status vdnn_file_open(const char *path, const char *what, size_t max_bytes, int flags, FILE **out,
                           long long *size);

/* Reads a whole file, checked as by vdnn_file_open, into a malloc'd buffer of *len
 * bytes (plus a NUL with VDNN_FILE_TEXT); the caller free()s *data. */
vdnn_status vdnn_file_read(const char *path, const char *what, size_t max_bytes, int flags, char **data,
                           size_t *len);

/* Replaces `path` with `len` bytes, atomically: they go to an unnamed file in path's
 * folder (O_TMPFILE) that is named PATH.tmp only once it is whole and synced, and is
 * then renamed over PATH (the folder synced after). A crash or a kill at any moment
 * leaves the previous file whole, and, but for the instant between naming and
 * renaming, no PATH.tmp; a PATH.tmp left by an earlier save is replaced. Where the
 * file system has no O_TMPFILE, PATH.tmp is written directly. A failure (a full disk)
 * says whether a previous file was kept. */
vdnn_status vdnn_file_replace(const char *path, const char *what, const void *data, size_t len);

/* vdnn's cache folder (measured profiles, image folders' file lists): $VDNN_CACHE, else
 * $XDG_CACHE_HOME/vdnn, else ~/.cache/vdnn. Returns buf or the variable's value. */
const char *vdnn_cache_dir(char *buf, size_t len);
/* Creates `path` and the folders above it that are missing (as mkdir -p); errors are
 * left to the first write into it to report. */
void vdnn_make_dirs(const char *path);

#endif
