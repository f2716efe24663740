/* Images: dyld's image list and notifications, objc4's load-image callbacks, and dlopen().
 *
 * dyld 1378 (dyld/DyldRuntimeState.cpp, RuntimeState::notifyLoad) calls the
 * _dyld_register_func_for_add_image callbacks for newly loaded images first, and only then
 * tells objc to map them (map_images), so during those callbacks the new image's classes cannot
 * be found by name. objc4 951.1 (runtime/objc-os.mm, objc_addLoadImageFunc; map_images) calls
 * load-image callbacks with runtimeLock held: at registration for every image already mapped,
 * and after mapping each new image.
 *
 * Here an "image" is an ELF object; its header is the start of its first loaded segment and
 * its slide the load bias. The model calls load-image callbacks for every image, where objc4
 * calls them for images with Objective-C metadata. GCC's runtime registers a dlopen()ed
 * object's classes while glibc runs its constructors, inside the real dlopen(); the model hides
 * them until its own "map" step, from the moment dlopen() starts. */
#define _GNU_SOURCE
#include "model.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IMAGES 512
#define MAX_CALLBACKS 16

struct image
{
  const void *header;
  intptr_t slide;
  const char *name;
};

struct snapshot
{
  struct image images[MAX_IMAGES];
  int count;
};

static int
collect(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  struct snapshot *s = data;
  if (s->count >= MAX_IMAGES)
    return 1;
  const void *header = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD)
      {
        header = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        break;
      }
  if (header == NULL)
    return 0;
  s->images[s->count++] = (struct image){ header, (intptr_t)info->dlpi_addr, info->dlpi_name };
  return 0;
}

static void
take_snapshot(struct snapshot *s)
{
  s->count = 0;
  dl_iterate_phdr(collect, s);
}

static int
contains(const struct snapshot *s, const void *header)
{
  for (int i = 0; i < s->count; i++)
    if (s->images[i].header == header)
      return 1;
  return 0;
}

/* The dlopen() in progress on any thread (dyld serializes them), and the images that were
 * mapped before it started. A recursive lock, as dlopen() from an initializer nests. */
static pthread_mutex_t dlopen_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int dlopen_depth;
static struct snapshot mapped_before;
static pthread_mutex_t mapped_lock = PTHREAD_MUTEX_INITIALIZER;

int
applemodel_class_visible(model_class cls)
{
  pthread_mutex_lock(&mapped_lock);
  int loading = dlopen_depth > 0;
  pthread_mutex_unlock(&mapped_lock);
  if (!loading)
    return 1;
  Dl_info info;
  if (dladdr(cls, &info) == 0)
    return 1;
  pthread_mutex_lock(&mapped_lock);
  int visible = dlopen_depth == 0 || contains(&mapped_before, info.dli_fbase);
  pthread_mutex_unlock(&mapped_lock);
  return visible;
}

typedef void (*add_image_func)(const void *header, intptr_t slide);
typedef void (*load_image_func)(const void *header);

static pthread_mutex_t callbacks_lock = PTHREAD_MUTEX_INITIALIZER;
static add_image_func add_image_funcs[MAX_CALLBACKS];
static int n_add_image_funcs;
static add_image_func remove_image_funcs[MAX_CALLBACKS];
static int n_remove_image_funcs;
/* Guarded by runtimeLock, as objc4's loadImageCallbacks are. */
static load_image_func load_image_funcs[MAX_CALLBACKS];
static int n_load_image_funcs;

void
_dyld_register_func_for_add_image(add_image_func func)
{
  /* dyld: at once for every image already loaded, then for each later one. */
  struct snapshot now;
  take_snapshot(&now);
  for (int i = 0; i < now.count; i++)
    func(now.images[i].header, now.images[i].slide);
  pthread_mutex_lock(&callbacks_lock);
  if (n_add_image_funcs < MAX_CALLBACKS)
    add_image_funcs[n_add_image_funcs++] = func;
  pthread_mutex_unlock(&callbacks_lock);
}

void
_dyld_register_func_for_remove_image(add_image_func func)
{
  pthread_mutex_lock(&callbacks_lock);
  if (n_remove_image_funcs < MAX_CALLBACKS)
    remove_image_funcs[n_remove_image_funcs++] = func;
  pthread_mutex_unlock(&callbacks_lock);
}

void
objc_addLoadImageFunc(load_image_func func)
{
  /* objc4: mutex_locker_t lock(runtimeLock); call it for every mapped image; append. */
  applemodel_runtime_lock();
  struct snapshot now;
  take_snapshot(&now);
  for (int i = 0; i < now.count; i++)
    func(now.images[i].header);
  if (n_load_image_funcs < MAX_CALLBACKS)
    load_image_funcs[n_load_image_funcs++] = func;
  applemodel_runtime_unlock();
}

uint32_t
_dyld_image_count(void)
{
  struct snapshot now;
  take_snapshot(&now);
  return (uint32_t)now.count;
}

const void *
_dyld_get_image_header(uint32_t index)
{
  struct snapshot now;
  take_snapshot(&now);
  return index < (uint32_t)now.count ? now.images[index].header : NULL;
}

intptr_t
_dyld_get_image_vmaddr_slide(uint32_t index)
{
  struct snapshot now;
  take_snapshot(&now);
  return index < (uint32_t)now.count ? now.images[index].slide : 0;
}

const char *
_dyld_get_image_name(uint32_t index)
{
  struct snapshot now;
  take_snapshot(&now);
  return index < (uint32_t)now.count ? now.images[index].name : NULL;
}

void *
dlopen(const char *path, int mode)
{
  void *(*real_dlopen)(const char *, int) = (void *(*)(const char *, int))applemodel_real("dlopen");
  pthread_mutex_lock(&dlopen_lock);
  struct snapshot before;
  take_snapshot(&before);
  pthread_mutex_lock(&mapped_lock);
  if (dlopen_depth++ == 0)
    mapped_before = before;
  pthread_mutex_unlock(&mapped_lock);

  void *handle = real_dlopen(path, mode);

  struct snapshot after;
  take_snapshot(&after);
  struct image added[MAX_IMAGES];
  int n_added = 0;
  for (int i = 0; handle != NULL && i < after.count; i++)
    if (!contains(&before, after.images[i].header))
      added[n_added++] = after.images[i];

  /* dyld: add-image callbacks first, while the new classes cannot be found yet. */
  pthread_mutex_lock(&callbacks_lock);
  int n_add = n_add_image_funcs;
  add_image_func add[MAX_CALLBACKS];
  memcpy(add, add_image_funcs, sizeof add);
  pthread_mutex_unlock(&callbacks_lock);
  for (int f = 0; f < n_add; f++)
    for (int i = 0; i < n_added; i++)
      add[f](added[i].header, added[i].slide);

  /* objc's map_images, under runtimeLock: the classes become visible, then the load-image
   * callbacks run, lock still held. */
  applemodel_runtime_lock();
  pthread_mutex_lock(&mapped_lock);
  dlopen_depth--;
  pthread_mutex_unlock(&mapped_lock);
  for (int f = 0; f < n_load_image_funcs; f++)
    for (int i = 0; i < n_added; i++)
      load_image_funcs[f](added[i].header);
  applemodel_runtime_unlock();

  pthread_mutex_unlock(&dlopen_lock);
  return handle;
}
