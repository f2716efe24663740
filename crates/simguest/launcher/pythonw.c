/* A framework Python's launcher, as python.org's and Homebrew's `bin/python3.x` are: it replaces
 * itself, in the same process (same pid, same environment), with the interpreter inside the
 * framework's application bundle, ../Resources/Python.app/Contents/MacOS/Python, passing that
 * path as argv[0] (CPython's Mac/Tools/pythonw.c does this with posix_spawn and
 * POSIX_SPAWN_SETEXEC). Here the "interpreter" is the simulated guest's dlopen probe, which
 * loads Metal late, as Python importing MLX or PyTorch does. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int
main(int argc, char **argv)
{
  (void)argc;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    {
      perror("python launcher: /proc/self/exe");
      return 1;
    }
  self[n] = 0;
  static char interpreter[PATH_MAX * 2];
  snprintf(interpreter, sizeof interpreter, "%s/../Resources/Python.app/Contents/MacOS/Python",
           dirname(self));
  argv[0] = interpreter;
  execve(interpreter, argv, environ);
  perror("python launcher: execve");
  return 1;
}
