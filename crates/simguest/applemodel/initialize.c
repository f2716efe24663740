/* objc4 951.1's +initialize machinery (runtime/objc-initialize.mm): initializeNonMetaClass and
 * _objc_addWillInitializeClassFunc.
 *
 * A class is initialized at its first message: superclasses first, each under its own
 * recursive class lock (objc4 906 and later: lockClass, held across the callbacks and
 * +initialize; every other thread messaging the class waits for it). The thread that wins marks
 * the class initializing and copies the willInitialize callbacks under classInitLock, releases
 * classInitLock, and calls them (runtime lock NOT held) before +initialize. A callback that
 * does file I/O while holding the class lock makes every such thread wait on it: io.c stops the
 * process when one does. Registering a callback calls it at once, outside every
 * lock, for each class already initializing or initialized.
 *
 * GCC's runtime sends +initialize itself; the model only runs the callbacks, when the simulated
 * Metal tells it a class gets its first message (applemodel_first_message). */
#define _GNU_SOURCE
#include "model.h"

#include <pthread.h>
#include <stdio.h>

#define MAX_CLASSES 512
#define MAX_CALLBACKS 16

enum state
{
  UNINITIALIZED,
  INITIALIZING,
  INITIALIZED
};

struct class_state
{
  model_class cls;
  enum state state;
  pthread_mutex_t lock; /* objc4's per-class lock (lockClass), recursive */
};

typedef void (*will_initialize_func)(void *context, model_class cls);

struct callback
{
  will_initialize_func func;
  void *context;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct class_state classes[MAX_CLASSES];
static int n_classes;

static pthread_mutex_t class_init_lock = PTHREAD_MUTEX_INITIALIZER;

__thread int applemodel_class_locks_held;
static struct callback callbacks[MAX_CALLBACKS];
static int n_callbacks;

static struct class_state *
state_of(model_class cls)
{
  pthread_mutex_lock(&table_lock);
  struct class_state *found = NULL;
  for (int i = 0; i < n_classes && found == NULL; i++)
    if (classes[i].cls == cls)
      found = &classes[i];
  if (found == NULL && n_classes < MAX_CLASSES)
    {
      found = &classes[n_classes++];
      found->cls = cls;
      found->state = UNINITIALIZED;
      pthread_mutexattr_t attr;
      pthread_mutexattr_init(&attr);
      pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
      pthread_mutex_init(&found->lock, &attr);
      pthread_mutexattr_destroy(&attr);
    }
  pthread_mutex_unlock(&table_lock);
  if (found == NULL)
    applemodel_objc_fatal("the Apple-runtime model's class table is full", NULL);
  return found;
}

static enum state
current_state(struct class_state *s)
{
  pthread_mutex_lock(&class_init_lock);
  enum state state = s->state;
  pthread_mutex_unlock(&class_init_lock);
  return state;
}

static void
initialize_non_meta_class(model_class cls)
{
  model_class (*super_of)(model_class) = REAL(model_class (*)(model_class), class_getSuperclass);
  model_class super = super_of(cls);
  if (super != NULL && current_state(state_of(super)) != INITIALIZED)
    initialize_non_meta_class(super);

  struct class_state *s = state_of(cls);
  pthread_mutex_lock(&s->lock);
  /* Initialized while we waited, or being initialized by this very thread: nothing to do. */
  if (current_state(s) != UNINITIALIZED)
    {
      pthread_mutex_unlock(&s->lock);
      return;
    }
  struct callback copy[MAX_CALLBACKS];
  int n_copy;
  pthread_mutex_lock(&class_init_lock);
  s->state = INITIALIZING;
  n_copy = n_callbacks;
  for (int i = 0; i < n_copy; i++)
    copy[i] = callbacks[i];
  pthread_mutex_unlock(&class_init_lock);

  if (applemodel_runtime_lock_held())
    applemodel_objc_fatal("the Apple-runtime model: +initialize with runtimeLock held", NULL);
  applemodel_class_locks_held++;
  for (int i = 0; i < n_copy; i++)
    copy[i].func(copy[i].context, cls);
  applemodel_class_locks_held--;

  pthread_mutex_lock(&class_init_lock);
  s->state = INITIALIZED;
  pthread_mutex_unlock(&class_init_lock);
  pthread_mutex_unlock(&s->lock);
}

void
applemodel_first_message(model_class cls)
{
  if (cls != NULL)
    initialize_non_meta_class(cls);
}

void
_objc_addWillInitializeClassFunc(will_initialize_func func, void *context)
{
  model_class existing[MAX_CLASSES];
  int n_existing = 0;
  pthread_mutex_lock(&class_init_lock);
  pthread_mutex_lock(&table_lock);
  for (int i = 0; i < n_classes; i++)
    if (classes[i].state != UNINITIALIZED)
      existing[n_existing++] = classes[i].cls;
  pthread_mutex_unlock(&table_lock);
  if (n_callbacks < MAX_CALLBACKS)
    callbacks[n_callbacks++] = (struct callback){ func, context };
  pthread_mutex_unlock(&class_init_lock);
  for (int i = 0; i < n_existing; i++)
    func(context, existing[i]);
}
