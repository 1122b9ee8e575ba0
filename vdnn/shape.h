/* A 4-D tensor shape (N, C, H, W), row-major with W fastest. Vectors are (N, C, 1, 1). */
#ifndef VDNN_SHAPE_H
#define VDNN_SHAPE_H

#include <stddef.h>

typedef struct shape4 { int n, c, h, w; } shape4;

static inline size_t shape_count(shape4 s) { return (size_t)s.n * s.c * s.h * s.w; }
static inline size_t shape_per_item(shape4 s) { return (size_t)s.c * s.h * s.w; }
static inline size_t shape_bytes(shape4 s) { return shape_count(s) * sizeof(float); }
static inline shape4 shape_make(int n, int c, int h, int w) { shape4 s = {n, c, h, w}; return s; }

#endif
