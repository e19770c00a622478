// A target that measures, from inside, how long hangscope stops it: N-1 threads block in a
// condition wait (as hung ranks' threads do), one thread spins reading CLOCK_MONOTONIC and keeps
// the largest gap between two consecutive reads. Commands on stdin, answers on stdout:
//   reset   -> "ok" (forget the largest gap so far)
//   report  -> "<largest gap in microseconds>"
// Usage: pause_target THREADS
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_llong largest_gap_ns;
static atomic_int reset_requested;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void* blocked_thread(void* arg) {
  (void)arg;
  pthread_mutex_lock(&mutex);
  for (;;) pthread_cond_wait(&never, &mutex);
  return NULL;
}

static void* ticker_thread(void* arg) {
  (void)arg;
  long long last = now_ns();
  for (;;) {
    const long long t = now_ns();
    if (atomic_exchange(&reset_requested, 0)) {
      atomic_store(&largest_gap_ns, 0);
    } else if (t - last > atomic_load(&largest_gap_ns)) {
      atomic_store(&largest_gap_ns, t - last);
    }
    last = t;
  }
  return NULL;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 10;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (int i = 0; i < threads - 2; ++i) {  // main thread + ticker + the blocked ones
    pthread_t t;
    if (pthread_create(&t, &attr, blocked_thread, NULL) != 0) return 1;
  }
  pthread_t ticker;
  pthread_create(&ticker, &attr, ticker_thread, NULL);
  printf("ready %d\n", threads);
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "reset", 5) == 0) {
      atomic_store(&reset_requested, 1);
      while (atomic_load(&reset_requested)) {
      }
      printf("ok\n");
    } else if (strncmp(line, "report", 6) == 0) {
      printf("%lld\n", atomic_load(&largest_gap_ns) / 1000);
    }
    fflush(stdout);
  }
  return 0;
}
