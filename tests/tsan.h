/* UNDER_TSAN: 1 in a ThreadSanitizer build. libgomp is not instrumented, so a check
 * that runs OpenMP with several threads on purpose shows its barriers as races there,
 * and timings mean nothing; such checks print a SKIPPED line under it. */
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

#endif
