/* Fuzz target: the IDX reader on gzip-compressed files (see fuzz_idx.c). */
#define FUZZ_IDX_GZ 1
#define FUZZ_IDX_NAME idx_gz
#include "tests/fuzz/fuzz_idx.c"
