/* FNV-1a, the 64-bit hash of bytes behind the project's keys and fingerprints (profile
 * caches, image-list caches, name tables): start from
 * VDNN_HASH_START, continue over as many pieces as a key has. Cached file names are
 * made of it, so its values must never change. */
#ifndef VDNN_HASH_H
#define VDNN_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VDNN_HASH_START 1469598103934665603ull

static inline uint64_t vdnn_hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *b = data;
    for (size_t k = 0; k < len; k++) h = (h ^ b[k]) * 1099511628211ull;
    return h;
}

/* A hash of bytes for keys that live in memory only (the simulator's memos, whose keys
 * run to kilobytes and are hashed at every replay): eight bytes a step, several times
 * as fast as FNV-1a. Its values may change from one build to the next. */
static inline uint64_t vdnn_hash_mem(const void *data, size_t len)
{
    const unsigned char *b = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len, w;
    size_t k = 0;
    for (; k + 8 <= len; k += 8) {
        memcpy(&w, b + k, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, b + k, len - k);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static inline uint64_t vdnn_hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

#endif
