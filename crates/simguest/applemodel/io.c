/* No file I/O under a class's +initialize lock.
 *
 * objc4 906 and later call willInitialize callbacks with the class's own initialization lock
 * held (runtime/objc-initialize.mm, initializeNonMetaClass: lockClass before the callbacks,
 * unlockClass after +initialize), and every other thread that messages the class, such as one
 * creating a Metal device, waits for it. A callback that writes a file or stderr there makes
 * them all wait on that I/O. The model stops the process, as a lock-order checker would, when
 * the shim opens or writes a file from such a callback (initialize.c counts the locks held).
 *
 * The shim reaches these through libc's exported open, open64 and write (Rust's std uses them);
 * libc's own internal calls do not come here. Outside a callback they go straight to the
 * kernel. */
#define _GNU_SOURCE
#include "model.h"

#include <fcntl.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

static void
refuse(const char *call)
{
  if (applemodel_class_locks_held > 0)
    {
      applemodel_class_locks_held = 0;
      applemodel_objc_fatal("the Apple-runtime model: file I/O while a class's +initialize lock "
                            "is held (a willInitialize callback, objc4 906 and later): ",
                            call);
    }
}

ssize_t
write(int fd, const void *buf, size_t count)
{
  refuse("write");
  return syscall(SYS_write, fd, buf, count);
}

static int
open_at(const char *call, const char *path, int flags, va_list args)
{
  refuse(call);
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE))
    mode = va_arg(args, mode_t);
  return syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

int
open(const char *path, int flags, ...)
{
  va_list args;
  va_start(args, flags);
  int fd = open_at("open", path, flags, args);
  va_end(args);
  return fd;
}

int
open64(const char *path, int flags, ...)
{
  va_list args;
  va_start(args, flags);
  int fd = open_at("open64", path, flags | O_LARGEFILE, args);
  va_end(args);
  return fd;
}
