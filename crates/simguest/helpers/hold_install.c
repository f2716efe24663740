/* Holds the thread that installs the shim's hooks for one class, so that a test can fork while
 * the shim's install lock is held by another thread (probe --fork-while-installing).
 *
 * Preloaded first (LD_PRELOAD="libsimguest_hold.so [model] libcapshim.so"), it stands in for
 * the runtime's class_copyMethodList, which the shim calls with its install lock held before it
 * replaces a class's methods. The first call for the class named by SIMGUEST_HOLD_CLASS sets
 * simguest_hold_started and sleeps 1.5 s before passing the call on; every other call passes
 * straight through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set once the held thread is inside the shim's install lock. */
volatile int simguest_hold_started;

extern const char *class_getName(void *cls);

void **
class_copyMethodList(void *cls, unsigned int *count)
{
  void **(*real)(void *, unsigned int *)
      = (void **(*)(void *, unsigned int *))dlsym(RTLD_NEXT, "class_copyMethodList");
  const char *hold = getenv("SIMGUEST_HOLD_CLASS");
  if (hold != NULL && cls != NULL && !__atomic_load_n(&simguest_hold_started, __ATOMIC_ACQUIRE)
      && strcmp(class_getName(cls), hold) == 0)
    {
      __atomic_store_n(&simguest_hold_started, 1, __ATOMIC_RELEASE);
      usleep(1500000);
    }
  return real(cls, count);
}
