/* objc4's runtimeLock: an os_unfair_lock (runtime/Threading/darwin.h, objc_lock_base_t), which
 * libplatform refuses to take twice on one thread (src/os/lock.c,
 * _os_unfair_lock_recursive_abort). */
#include "model.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t runtime_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int held;

void
applemodel_client_crash(const char *lock_kind)
{
  char message[160];
  int n = snprintf(message, sizeof message,
                   "BUG IN CLIENT OF LIBPLATFORM: Trying to recursively lock an %s\n", lock_kind);
  if (n > 0)
    {
      ssize_t ignored = write(STDERR_FILENO, message, (size_t)n);
      (void)ignored;
    }
  /* arm64's brk raises EXC_BREAKPOINT, which a Unix process sees as SIGTRAP (exit 133). */
  signal(SIGTRAP, SIG_DFL);
  raise(SIGTRAP);
  abort();
}

void
applemodel_objc_fatal(const char *message, const char *detail)
{
  fprintf(stderr, "objc[%d]: %s%s\n", (int)getpid(), message, detail ? detail : "");
  abort();
}

void
applemodel_runtime_lock(void)
{
  if (held)
    applemodel_client_crash("os_unfair_lock");
  pthread_mutex_lock(&runtime_lock);
  held = 1;
}

void
applemodel_runtime_unlock(void)
{
  held = 0;
  pthread_mutex_unlock(&runtime_lock);
}

int
applemodel_runtime_lock_held(void)
{
  return held;
}
