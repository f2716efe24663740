/* Prints what a Metal device answers, and what llama.cpp's ggml-metal would
 * decide from it, one `key=value` line each, keys prefixed by the device class.
 *
 *   probe [--class NAME]... [--threads N] [--no-device] [--no-metal] [--before CMD] [--then CMD]
 *         [--fork-before] [--fork-after] [--fork-while-installing] [--snapshot-then PATH]
 *         [--watch-environ]
 *
 * --fork-before forks once Metal is loaded, before any device exists; --fork-after once the
 * devices were asked. The child prints its own block of answers (a new pid= block) and exits;
 * the parent waits for it.
 *
 * --fork-while-installing creates a MTLSimSecondDevice on another thread and forks while the
 * shim installs its hooks for that class (with libsimguest_hold preloaded first, which holds the
 * installing thread in class_copyMethodList); the child creates the --class devices under a
 * 20 s alarm and the parent prints fork_child.status=exited N|killed by N.
 *
 * --snapshot-then copies the environment when main starts, as CPython's os.environ does, and
 * after the devices were asked starts PATH with that copy (posix_spawn with a saved envp).
 *
 * --watch-environ saves the environ array and its strings when main starts and, after the
 * devices were asked, prints environ.old_array_intact=true|false: whether that array still
 * holds the same pointers to the same text (a thread reading it would not have seen it change).
 *
 * --before runs CMD (with system()) before Metal is used, --then after every device was
 * created and asked; each fails the probe (exit 4) when CMD fails.
 *
 * Built twice: linked against libMetalSim (Metal loaded at start, as a Metal
 * app is), and with PROBE_DLOPEN (Metal loaded late with dlopen, as Python
 * importing MLX does; --no-metal then never loads it). */
#include "MetalSim.h"

#include <objc/runtime.h>

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dlfcn.h>

static const long families[] = { 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010,
                                 2001, 2002, 3001, 3002, 3003, 4001, 4002, 5001, 5002 };
#define N_FAMILIES (sizeof families / sizeof families[0])

static id (*create_device)(const char *);

static void
print_device(const char *class_name)
{
  id device = create_device(class_name);
  if (device == nil)
    {
      printf("%s.error=no such class\n", class_name);
      return;
    }
  BOOL yes[N_FAMILIES];
  for (size_t i = 0; i < N_FAMILIES; i++)
    {
      yes[i] = [device supportsFamily:families[i]];
      printf("%s.family.%ld=%s\n", class_name, families[i], yes[i] ? "true" : "false");
    }
  printf("%s.name=%s\n", class_name, [device name]);
  printf("%s.metal.bf16_emulation=%s\n", class_name,
         [device requiresBFloat16Emulation] ? "true" : "false");
  printf("%s.max_threadgroup_memory=%lu\n", class_name, [device maxThreadgroupMemoryLength]);
  printf("%s.recommended_working_set_size=%llu\n", class_name,
         [device recommendedMaxWorkingSetSize]);
  /* ggml_metal_device_init's gates (docs/profiles.md, "llama.cpp"). */
  BOOL apple6 = [device supportsFamily:1006], apple7 = [device supportsFamily:1007];
  BOOL metal3 = [device supportsFamily:5001], metal4 = [device supportsFamily:5002];
  BOOL tensor = metal4;
  BOOL bfloat = (metal3 || apple6) && getenv("GGML_METAL_BF16_DISABLE") == NULL && !tensor;
  printf("%s.llama.simdgroup_reduction=%s\n", class_name, (apple7 || metal3) ? "true" : "false");
  printf("%s.llama.simdgroup_mm=%s\n", class_name, apple7 ? "true" : "false");
  printf("%s.llama.bfloat=%s\n", class_name, bfloat ? "true" : "false");
  printf("%s.llama.tensor=%s\n", class_name, tensor ? "true" : "false");
}

struct job
{
  const char *class_name;
  char summary[256];
};

static void *
thread_main(void *arg)
{
  struct job *job = arg;
  id device = create_device(job->class_name);
  size_t used = 0;
  for (size_t i = 0; i < N_FAMILIES && used < sizeof job->summary - 32; i++)
    if ([device supportsFamily:families[i]])
      used += snprintf(job->summary + used, sizeof job->summary - used, "%ld,", families[i]);
  snprintf(job->summary + used, sizeof job->summary - used, " tg=%lu", [device maxThreadgroupMemoryLength]);
  return NULL;
}

/* Runs CMD with system(), flushing what was printed before and after. */
static int
run(const char *cmd)
{
  fflush(stdout);
  int status = system(cmd);
  fflush(stdout);
  return status;
}

static void
print_env(const char *name)
{
  const char *value = getenv(name);
  printf("env.%s=%s\n", name, value ? value : "(unset)");
}

/* Forks; the child prints the answers of every class as its own block and exits. */
static int
fork_and_print(const char **classes, int n_classes)
{
  fflush(stdout);
  pid_t child = fork();
  if (child < 0)
    return -1;
  if (child == 0)
    {
      printf("pid=%d\nforked=true\n", (int)getpid());
      for (int i = 0; i < n_classes; i++)
        print_device(classes[i]);
      fflush(stdout);
      _exit(0);
    }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

extern char **environ;

/* A copy of the environment's entries (own strings), as a runtime that copies it at start keeps. */
static char **
copy_environment(void)
{
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  char **copy = calloc(n + 1, sizeof *copy);
  for (size_t i = 0; i < n; i++)
    copy[i] = strdup(environ[i]);
  return copy;
}

static char **watched_array, **watched_entries, **watched_text;

static void
watch_environment(void)
{
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  watched_array = environ;
  watched_entries = calloc(n + 1, sizeof *watched_entries);
  memcpy(watched_entries, environ, (n + 1) * sizeof *environ);
  watched_text = copy_environment();
}

static int
watched_environment_intact(void)
{
  for (size_t i = 0; watched_entries[i] != NULL; i++)
    if (watched_array[i] != watched_entries[i] || strcmp(watched_array[i], watched_text[i]) != 0)
      return 0;
  return 1;
}

static int
spawn_with(const char *path, char **envp)
{
  char *argv[] = { (char *)path, NULL };
  pid_t child;
  fflush(stdout);
  if (posix_spawn(&child, path, NULL, NULL, argv, envp) != 0)
    return -1;
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void *
second_device_thread(void *unused)
{
  (void)unused;
  create_device("MTLSimSecondDevice");
  return NULL;
}

/* Forks while another thread installs the shim's hooks for MTLSimSecondDevice. */
static int
fork_while_installing(const char **classes, int n_classes)
{
  volatile int *started = dlsym(RTLD_DEFAULT, "simguest_hold_started");
  if (started == NULL)
    {
      fprintf(stderr, "probe: --fork-while-installing needs libsimguest_hold preloaded\n");
      return -1;
    }
  pthread_t thread;
  pthread_create(&thread, NULL, second_device_thread, NULL);
  while (!__atomic_load_n(started, __ATOMIC_ACQUIRE))
    usleep(1000);
  fflush(stdout);
  pid_t child = fork();
  if (child == 0)
    {
      alarm(20);
      printf("pid=%d\nforked=true\n", (int)getpid());
      for (int i = 0; i < n_classes; i++)
        print_device(classes[i]);
      fflush(stdout);
      _exit(0);
    }
  int status = 0;
  waitpid(child, &status, 0);
  pthread_join(thread, NULL);
  printf("pid=%d\n", (int)getpid());
  if (WIFEXITED(status))
    printf("fork_child.status=exited %d\n", WEXITSTATUS(status));
  else
    printf("fork_child.status=killed by %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
  return 0;
}

int
main(int argc, char **argv)
{
  const char *classes[16];
  int n_classes = 0, threads = 0, no_device = 0, no_metal = 0, fork_before = 0, fork_after = 0;
  int fork_while = 0, watch = 0;
  const char *then = NULL, *before = NULL, *snapshot_then = NULL;
  char **snapshot = copy_environment();
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp(argv[i], "--class") && i + 1 < argc && n_classes < 16)
        classes[n_classes++] = argv[++i];
      else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
        threads = atoi(argv[++i]);
      else if (!strcmp(argv[i], "--then") && i + 1 < argc)
        then = argv[++i];
      else if (!strcmp(argv[i], "--before") && i + 1 < argc)
        before = argv[++i];
      else if (!strcmp(argv[i], "--no-device"))
        no_device = 1;
      else if (!strcmp(argv[i], "--no-metal"))
        no_metal = 1;
      else if (!strcmp(argv[i], "--fork-before"))
        fork_before = 1;
      else if (!strcmp(argv[i], "--fork-after"))
        fork_after = 1;
      else if (!strcmp(argv[i], "--fork-while-installing"))
        fork_while = 1;
      else if (!strcmp(argv[i], "--snapshot-then") && i + 1 < argc)
        snapshot_then = argv[++i];
      else if (!strcmp(argv[i], "--watch-environ"))
        watch = 1;
      else
        {
          fprintf(stderr, "probe: unknown argument %s\n", argv[i]);
          return 2;
        }
    }
#ifndef PROBE_DLOPEN
  metal_sim_main_started = 1;
#endif
  if (n_classes == 0)
    classes[n_classes++] = "AppleParavirtDevice";
  if (watch)
    watch_environment();
  printf("pid=%d\n", (int)getpid());
  print_env("LD_PRELOAD");
  print_env("CAPSHIM_APPLE_FAMILY_MAX");
  fflush(stdout);
  if (before != NULL)
    {
      if (run(before) != 0)
        return 4;
      /* A new block, so that what follows is not read as the child's. */
      printf("pid=%d\n", (int)getpid());
    }
#ifdef PROBE_DLOPEN
  if (no_metal)
    {
      /* Whether anything (such as an injected library) brought Metal in anyway. */
      printf("metal=%s\n", dlsym(RTLD_DEFAULT, "MTLSimCreateDevice") ? "loaded by someone else" : "not loaded");
      no_device = 1;
    }
  else
    {
      /* SIMGUEST_METAL picks another build of the simulated Metal library. */
      const char *path = getenv("SIMGUEST_METAL") ? getenv("SIMGUEST_METAL") : METAL_PATH;
      void *metal = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
      if (metal == NULL)
        {
          fprintf(stderr, "probe: dlopen %s: %s\n", path, dlerror());
          return 3;
        }
      create_device = (id (*)(const char *))dlsym(metal, "MTLSimCreateDevice");
      printf("metal=dlopened\n");
    }
#else
  (void)no_metal;
  create_device = MTLSimCreateDevice;
  printf("metal=linked\n");
  printf("metal.messaged_before_main=%s\n", metal_sim_messaged_before_main ? "true" : "false");
#endif
  fflush(stdout);
  if (fork_before && !no_device)
    {
      if (fork_and_print(classes, n_classes) != 0)
        return 5;
      printf("pid=%d\n", (int)getpid());
    }
  if (fork_while && !no_device)
    {
      if (fork_while_installing(classes, n_classes) != 0)
        return 5;
    }
  else if (!no_device && threads > 0)
    {
      pthread_t ids[64];
      struct job jobs[64];
      if (threads > 64)
        threads = 64;
      for (int i = 0; i < threads; i++)
        {
          jobs[i].class_name = classes[i % n_classes];
          jobs[i].summary[0] = 0;
          pthread_create(&ids[i], NULL, thread_main, &jobs[i]);
        }
      for (int i = 0; i < threads; i++)
        {
          pthread_join(ids[i], NULL);
          printf("thread.%d.%s=%s\n", i, jobs[i].class_name, jobs[i].summary);
        }
    }
  else if (!no_device)
    for (int i = 0; i < n_classes; i++)
      print_device(classes[i]);
  fflush(stdout);
  if (fork_after && !no_device && fork_and_print(classes, n_classes) != 0)
    return 5;
  if (watch)
    printf("environ.old_array_intact=%s\n", watched_environment_intact() ? "true" : "false");
  fflush(stdout);
  if (then != NULL && run(then) != 0)
    return 4;
  if (snapshot_then != NULL && spawn_with(snapshot_then, snapshot) != 0)
    return 4;
  return 0;
}
