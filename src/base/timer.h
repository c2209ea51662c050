/* base/timer: monotonic wall clock in microseconds. */
#ifndef TL_BASE_TIMER_H
#define TL_BASE_TIMER_H
#include <stdint.h>
#include <time.h>
static inline int64_t tl_time_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
#endif
