/* What libcapshim 606a069 did on macOS, reduced: register an objc_addLoadImageFunc callback
 * that looks a class up by name. objc4 calls the callback with runtimeLock held (at once, for
 * every image already loaded), and objc_lookUpClass takes runtimeLock: on a Mac this aborts the
 * process in libplatform. A faithful model must abort it too. */
extern void objc_addLoadImageFunc(void (*func)(const void *header));
extern void *objc_lookUpClass(const char *name);

static void
image_loaded(const void *header)
{
  (void)header;
  (void)objc_lookUpClass("_MTLDevice");
}

__attribute__((constructor)) static void
start(void)
{
  objc_addLoadImageFunc(image_loaded);
}
