/* A model of Apple's Objective-C runtime (objc4) and loader (dyld) semantics, built on GCC's
 * GNU Objective-C runtime, for testing libcapshim's Apple path on Linux.
 *
 * Preloaded before the shim (LD_PRELOAD="libapplemodel.so libcapshim.so"), it exports the
 * Apple runtime and loader functions the shim may call, with the behaviour docs/apple-runtime.md
 * records from objc4 951.1 and dyld 1378, and is less forgiving than GCC's runtime where Apple's
 * is: the runtime lock is not recursive, objc_addLoadImageFunc calls back with it held, dyld's
 * add-image callbacks for a dlopen()ed image run before that image's classes can be found, and
 * willInitialize callbacks run outside the lock, superclass first.
 *
 * Types are opaque pointers here, so that the GNU headers' inline object_getClass does not
 * clash with the exported function of the same name. */
#ifndef APPLEMODEL_MODEL_H
#define APPLEMODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef void *model_class;
typedef void *model_sel;
typedef void *model_imp;
typedef void *model_method;

/* lock.c: objc4's runtimeLock, an os_unfair_lock. */
void applemodel_runtime_lock(void);
void applemodel_runtime_unlock(void);
int applemodel_runtime_lock_held(void);
/* libplatform's crash for a lock taken twice by one thread: prints its message and stops the
 * process with SIGTRAP, as the brk instruction of __LIBPLATFORM_CLIENT_CRASH__ does on arm64. */
_Noreturn void applemodel_client_crash(const char *lock_kind);
/* objc4's _objc_fatal: prints "objc[pid]: message" and aborts. */
_Noreturn void applemodel_objc_fatal(const char *message, const char *detail);

/* runtime.c: GCC's implementation of a runtime function, from the next object in lookup order. */
void *applemodel_real(const char *name);
#define REAL(type, name) ((type)applemodel_real(#name))

/* images.c: whether a class belongs to an image that dlopen() is still loading (not yet mapped
 * by the model's objc), and so cannot be found by name yet. */
int applemodel_class_visible(model_class cls);

/* initialize.c: objc4's initializeNonMetaClass, run at a class's first message. */
void applemodel_first_message(model_class cls);
/* initialize.c: how many class +initialize locks this thread holds while it runs willInitialize
 * callbacks (io.c refuses file I/O then). */
extern __thread int applemodel_class_locks_held;

#endif
