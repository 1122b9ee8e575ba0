/* Deterministic random numbers.
 *
 * Two kinds: a sequential generator (splitmix64-seeded xoshiro256**) whose whole state
 * fits in a checkpoint, and a counter-based hash that maps (seed, a, b) to 64 random
 * bits with no state at all. The hash is what makes dropout masks and augmentation
 * reproducible regardless of thread scheduling, and lets a dropped map be recomputed
 * with the very same mask. */
#ifndef VDNN_RNG_H
#define VDNN_RNG_H

#include <math.h>
#include <stdint.h>

/* The hash must give the very same bits in CUDA kernels (the dropout masks), so these
 * functions are callable from device code when compiled by nvcc. */
#if defined(__CUDACC__)
#define VDNN_HD __host__ __device__
#else
#define VDNN_HD
#endif

typedef struct rng { uint64_t s[4]; } rng;   /* the whole state; plain data */

static inline VDNN_HD uint64_t rng_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline VDNN_HD void rng_seed(rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix(&x);
}

static inline VDNN_HD uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline VDNN_HD uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rng_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1) with 24 random bits. */
static inline VDNN_HD float rng_u01(uint64_t bits) { return (float)(bits >> 40) * (1.0f / 16777216.0f); }

static inline VDNN_HD float rng_uniform(rng *r) { return rng_u01(rng_next(r)); }

/* Uniform integer in [0, n), n > 0. */
static inline VDNN_HD uint32_t rng_below(rng *r, uint32_t n) { return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32); }

/* Standard normal (Box-Muller, one value per call). */
static inline VDNN_HD float rng_normal(rng *r)
{
    double u1 = ((rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740994.0);
    double u2 = (rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Stateless: 64 random bits for the triple (seed, a, b). */
static inline VDNN_HD uint64_t rng_hash(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = seed ^ (a * 0xD1B54A32D192ED03ull) ^ (b * 0x8CB92BA72F3D8DD7ull);
    uint64_t z = rng_splitmix(&x);
    return rng_splitmix(&z);
}

/* Standard normal number k of the stream `seed`, with no state: the same value on the
 * host and in a kernel (Box-Muller on two hashes), so any thread can fill any element. */
static inline VDNN_HD float rng_normal_at(uint64_t seed, uint64_t k)
{
    double u1 = ((rng_hash(seed, k, 0) >> 11) + 1.0) * (1.0 / 9007199254740994.0);
    double u2 = (rng_hash(seed, k, 1) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
