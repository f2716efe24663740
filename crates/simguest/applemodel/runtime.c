/* The runtime functions of the model's contract, each taking runtimeLock where objc4 951.1 does
 * (runtime/objc-runtime-new.mm: look_up_class, lookUpImpOrForward, class_addMethod,
 * class_replaceMethod, method_setImplementation, method_exchangeImplementations,
 * objc_getClassList, objc_copyClassList) and answering with Apple's semantics where they differ
 * from GCC's (class_replaceMethod, object_getClass, objc_getRequiredClass, and a method lookup
 * that misses: objc4's resolver messages the class, which initializes it).
 *
 * GCC's runtime does the work underneath. Its own calls to these names (it calls some of its
 * public functions internally, sometimes under its own lock) go straight to GCC: they are not
 * calls a client of Apple's runtime makes, and taking the model's lock inside GCC's lock could
 * deadlock against a thread taking them in the other order. */
#define _GNU_SOURCE
#include "model.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

void *
applemodel_real(const char *name)
{
  void *symbol = dlsym(RTLD_NEXT, name);
  if (symbol == NULL)
    applemodel_objc_fatal("the Apple-runtime model cannot find GCC's ", name);
  return symbol;
}

/* Whether the return address `ra` lies in GCC's libobjc, i.e. GCC called itself. */
static int
called_by_gcc(void *ra)
{
  static void *gcc_base;
  if (gcc_base == NULL)
    {
      Dl_info gcc;
      if (dladdr(applemodel_real("sel_registerName"), &gcc) == 0)
        return 0;
      gcc_base = gcc.dli_fbase;
    }
  Dl_info caller;
  return dladdr(ra, &caller) != 0 && caller.dli_fbase == gcc_base;
}
#define FROM_GCC() called_by_gcc(__builtin_return_address(0))

typedef model_class (*class_by_name)(const char *);

static model_class
locked_class_by_name(const char *real_name, const char *name)
{
  class_by_name real = (class_by_name)applemodel_real(real_name);
  applemodel_runtime_lock();
  model_class cls = real(name);
  applemodel_runtime_unlock();
  return cls != NULL && applemodel_class_visible(cls) ? cls : NULL;
}

model_class
objc_lookUpClass(const char *name)
{
  if (FROM_GCC())
    return REAL(class_by_name, objc_lookUpClass)(name);
  return locked_class_by_name("objc_lookUpClass", name);
}

model_class
objc_getClass(const char *name)
{
  if (FROM_GCC())
    return REAL(class_by_name, objc_getClass)(name);
  return locked_class_by_name("objc_lookUpClass", name);
}

model_class
objc_getMetaClass(const char *name)
{
  if (FROM_GCC())
    return REAL(class_by_name, objc_getMetaClass)(name);
  model_class cls = locked_class_by_name("objc_lookUpClass", name);
  return cls != NULL ? REAL(model_class (*)(const char *), objc_getMetaClass)(name) : NULL;
}

model_class
objc_getRequiredClass(const char *name)
{
  if (FROM_GCC())
    return REAL(class_by_name, objc_getRequiredClass)(name);
  model_class cls = locked_class_by_name("objc_lookUpClass", name);
  if (cls == NULL)
    /* objc4: _objc_fatal("link error: class '%s' not found.", name) */
    applemodel_objc_fatal("link error: class not found: ", name);
  return cls;
}

/* Apple's object_getClass: Nil for nil, else the isa (GCC's is an inline in its headers, and
 * the object's first word). */
model_class
object_getClass(void *object)
{
  return object != NULL ? *(model_class *)object : NULL;
}

typedef model_method (*method_lookup)(model_class, model_sel);

static model_method own_method(model_class cls, model_sel sel);

/* Caller holds runtimeLock: the method `cls` runs for `sel`, searched in its own method list
 * and its superclasses', without any resolver (objc4's lookUpImpOrForward search). */
static model_method
hierarchy_method_locked(model_class cls, model_sel sel)
{
  model_class (*super_of)(model_class) = REAL(model_class (*)(model_class), class_getSuperclass);
  for (model_class c = cls; c != NULL; c = super_of(c))
    {
      model_method m = own_method(c, sel);
      if (m != NULL)
        return m;
    }
  return NULL;
}

/* objc4 searches method lists with runtimeLock held and releases it before running
 * +resolveInstanceMethod: (resolveMethod_locked). That resolver message is a message to the
 * class, so an uninitialized class is initialized first (willInitialize callbacks included).
 * GCC's function, which runs its own resolver, runs here only when the search failed, lock
 * released. */
static model_method
method_lookup_with_resolver(const char *real_name, model_class cls, model_class search, model_sel sel)
{
  if (cls == NULL || sel == NULL)
    return NULL;
  applemodel_runtime_lock();
  model_method m = hierarchy_method_locked(search, sel);
  applemodel_runtime_unlock();
  if (m != NULL)
    return m;
  applemodel_first_message(cls);
  return ((method_lookup)applemodel_real(real_name))(cls, sel);
}

model_method
class_getInstanceMethod(model_class cls, model_sel sel)
{
  if (FROM_GCC())
    return REAL(method_lookup, class_getInstanceMethod)(cls, sel);
  return method_lookup_with_resolver("class_getInstanceMethod", cls, cls, sel);
}

model_method
class_getClassMethod(model_class cls, model_sel sel)
{
  if (FROM_GCC())
    return REAL(method_lookup, class_getClassMethod)(cls, sel);
  if (cls == NULL)
    return NULL;
  /* Class methods are the metaclass's instance methods; the metaclass is the class's isa. */
  return method_lookup_with_resolver("class_getClassMethod", cls, *(model_class *)cls, sel);
}

typedef model_imp (*imp_lookup)(model_class, model_sel);

model_imp
class_getMethodImplementation(model_class cls, model_sel sel)
{
  if (FROM_GCC())
    return REAL(imp_lookup, class_getMethodImplementation)(cls, sel);
  if (cls == NULL || sel == NULL)
    return NULL;
  /* objc4: LOOKUP_INITIALIZE | LOOKUP_RESOLVER, so the class is initialized first. */
  applemodel_first_message(cls);
  applemodel_runtime_lock();
  model_method m = hierarchy_method_locked(cls, sel);
  model_imp imp = m != NULL ? REAL(model_imp (*)(model_method), method_getImplementation)(m) : NULL;
  applemodel_runtime_unlock();
  if (imp != NULL)
    return imp;
  /* Not found: GCC's answer (its forwarding implementation), lock released as for resolvers. */
  return REAL(imp_lookup, class_getMethodImplementation)(cls, sel);
}

typedef unsigned char (*responds_fn)(model_class, model_sel);

unsigned char
class_respondsToSelector(model_class cls, model_sel sel)
{
  if (FROM_GCC())
    return REAL(responds_fn, class_respondsToSelector)(cls, sel);
  if (cls == NULL || sel == NULL)
    return 0;
  applemodel_runtime_lock();
  int found = hierarchy_method_locked(cls, sel) != NULL;
  applemodel_runtime_unlock();
  if (found)
    return 1;
  applemodel_first_message(cls);
  return REAL(responds_fn, class_respondsToSelector)(cls, sel);
}

typedef unsigned char (*add_method_fn)(model_class, model_sel, model_imp, const char *);
typedef model_imp (*set_imp_fn)(model_method, model_imp);

/* The class's own method for `sel` (not an inherited one), or NULL. */
static model_method
own_method(model_class cls, model_sel sel)
{
  unsigned int count = 0;
  model_method *methods
      = REAL(model_method * (*)(model_class, unsigned int *), class_copyMethodList)(cls, &count);
  model_sel (*name)(model_method) = REAL(model_sel (*)(model_method), method_getName);
  const char *(*sel_name)(model_sel) = REAL(const char *(*)(model_sel), sel_getName);
  model_method found = NULL;
  for (unsigned int i = 0; i < count && found == NULL; i++)
    if (strcmp(sel_name(name(methods[i])), sel_name(sel)) == 0)
      found = methods[i];
  free(methods);
  return found;
}

/* Caller holds runtimeLock. objc4's addMethod: a method of the class itself gets the new
 * implementation (the old one is returned when replacing); otherwise a method is added to the
 * class, overriding an inherited one, and nil is returned. */
static model_imp
add_method_locked(model_class cls, model_sel sel, model_imp imp, const char *types, int replace)
{
  model_method own = own_method(cls, sel);
  if (own != NULL)
    {
      model_imp old = REAL(model_imp (*)(model_method), method_getImplementation)(own);
      if (replace)
        REAL(set_imp_fn, method_setImplementation)(own, imp);
      return old;
    }
  /* GCC builds dispatch tables lazily, sharing one placeholder until a class is messaged; an
   * addition made then can leak into other classes. Asking each class in the chain first makes
   * it install its own table (Apple's runtime has no such sharing). */
  model_class (*super_of)(model_class) = REAL(model_class (*)(model_class), class_getSuperclass);
  for (model_class c = cls; c != NULL; c = super_of(c))
    REAL(unsigned char (*)(model_class, model_sel), class_respondsToSelector)(c, sel);
  REAL(add_method_fn, class_addMethod)(cls, sel, imp, types != NULL ? types : "");
  return NULL;
}

unsigned char
class_addMethod(model_class cls, model_sel sel, model_imp imp, const char *types)
{
  if (FROM_GCC())
    return REAL(add_method_fn, class_addMethod)(cls, sel, imp, types);
  if (cls == NULL)
    return 0;
  applemodel_runtime_lock();
  int existed = own_method(cls, sel) != NULL;
  if (!existed)
    add_method_locked(cls, sel, imp, types, 0);
  applemodel_runtime_unlock();
  return !existed;
}

model_imp
class_replaceMethod(model_class cls, model_sel sel, model_imp imp, const char *types)
{
  if (FROM_GCC())
    return REAL(model_imp (*)(model_class, model_sel, model_imp, const char *), class_replaceMethod)(
        cls, sel, imp, types);
  if (cls == NULL)
    return NULL;
  applemodel_runtime_lock();
  model_imp old = add_method_locked(cls, sel, imp, types, 1);
  applemodel_runtime_unlock();
  return old;
}

model_imp
method_setImplementation(model_method method, model_imp imp)
{
  if (FROM_GCC())
    return REAL(set_imp_fn, method_setImplementation)(method, imp);
  applemodel_runtime_lock();
  model_imp old = REAL(set_imp_fn, method_setImplementation)(method, imp);
  applemodel_runtime_unlock();
  return old;
}

void
method_exchangeImplementations(model_method a, model_method b)
{
  if (FROM_GCC())
    {
      REAL(void (*)(model_method, model_method), method_exchangeImplementations)(a, b);
      return;
    }
  applemodel_runtime_lock();
  REAL(void (*)(model_method, model_method), method_exchangeImplementations)(a, b);
  applemodel_runtime_unlock();
}

/* Caller holds runtimeLock: every class that can be found by name, in GCC's order. */
static model_class *
visible_classes_locked(unsigned int *count)
{
  int (*list)(model_class *, int) = REAL(int (*)(model_class *, int), objc_getClassList);
  int total = list(NULL, 0);
  model_class *all = calloc((size_t)total + 1, sizeof *all);
  if (all == NULL)
    applemodel_objc_fatal("out of memory listing classes", NULL);
  int got = list(all, total);
  unsigned int kept = 0;
  for (int i = 0; i < got; i++)
    if (applemodel_class_visible(all[i]))
      all[kept++] = all[i];
  all[kept] = NULL;
  *count = kept;
  return all;
}

int
objc_getClassList(model_class *buffer, int buffer_count)
{
  if (FROM_GCC())
    return REAL(int (*)(model_class *, int), objc_getClassList)(buffer, buffer_count);
  applemodel_runtime_lock();
  unsigned int count = 0;
  model_class *all = visible_classes_locked(&count);
  applemodel_runtime_unlock();
  for (int i = 0; buffer != NULL && i < buffer_count && (unsigned int)i < count; i++)
    buffer[i] = all[i];
  free(all);
  return (int)count;
}

model_class *
objc_copyClassList(unsigned int *out_count)
{
  applemodel_runtime_lock();
  unsigned int count = 0;
  model_class *all = visible_classes_locked(&count);
  applemodel_runtime_unlock();
  if (out_count != NULL)
    *out_count = count;
  return all;
}
