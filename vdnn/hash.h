/* FNV-1a, the 64-bit hash of bytes behind the project's keys and fingerprints (profile
 * caches, image-list caches, name tables, the simulator's memo): start from
 * VDNN_HASH_START, continue over as many pieces as a key has. Cached file names are
 * made of it, so its values must never change. */
#ifndef VDNN_HASH_H
#define VDNN_HASH_H

#include <stddef.h>
#include <stdint.h>

#define VDNN_HASH_START 1469598103934665603ull

static inline uint64_t vdnn_hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *b = data;
    for (size_t k = 0; k < len; k++) h = (h ^ b[k]) * 1099511628211ull;
    return h;
}

static inline uint64_t vdnn_hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

#endif
