/* UNDER_TSAN: 1 in a ThreadSanitizer build. libgomp is not instrumented, so a check
 * that runs OpenMP with several threads on purpose shows its barriers as races there,
 * and timings mean nothing; such checks print a SKIPPED line under it.
 * UNDER_SANITIZER: 1 under ThreadSanitizer or AddressSanitizer, where arithmetic runs
 * 10 to 50 times slower: checks of large nets run smaller there, and say so. */
#ifndef VDNN_TEST_TSAN_H
#define VDNN_TEST_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define UNDER_SANITIZER (UNDER_TSAN || UNDER_ASAN)

#endif
