package main

// The C side: the calling thread and the futex the goroutine of case B wakes.

/*
#cgo LDFLAGS: -lpthread
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef struct { volatile uint32_t done; int64_t rc; } mb_slot;
extern int64_t mbDirect(void);
extern void mbStart(mb_slot *);
extern int64_t mbChan(void);

void mb_wake(mb_slot *s) {
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &s->done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
static void mb_wait_spin(mb_slot *s) {
	struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) return;
		__builtin_ia32_pause();
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 50000) break;
	}
	while (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) == 0)
		syscall(SYS_futex, &s->done, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}
static void mb_wait(mb_slot *s) {
	while (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) == 0)
		syscall(SYS_futex, &s->done, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}
struct arg { int mode, iters; double us; };
static void *thr(void *p) {
	struct arg *a = p;
	struct timespec t0, t1;
	// warm: the thread's first call into Go binds it an M
	mbDirect();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < a->iters; i++) {
		if (a->mode == 0) mbDirect();
		else if (a->mode == 2) mbChan();
		else if (a->mode == 4) { mb_slot s = {0, 0}; mbStart(&s); mb_wait_spin(&s); }
		else { mb_slot s = {0, 0}; mbStart(&s); mb_wait(&s); }
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	a->us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / a->iters;
	return NULL;
}
double mb_run(int mode, int iters) {
	pthread_t t; struct arg a = {mode, iters, 0};
	pthread_create(&t, NULL, thr, &a);
	pthread_join(t, NULL);
	return a.us;
}
*/
import "C"
