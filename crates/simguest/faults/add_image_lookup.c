/* The dyld fallback of libcapshim 606a069, reduced: look a class up by name from a
 * _dyld_register_func_for_add_image callback. dyld calls these callbacks for a new image before
 * objc maps its classes, so the class of a dlopen()ed image is never found from there. Prints
 * one line per callback: "add-image: _MTLDevice found" or "... absent". */
#include <stdint.h>
#include <stdio.h>

extern void _dyld_register_func_for_add_image(void (*func)(const void *header, intptr_t slide));
extern void *objc_lookUpClass(const char *name);

static void
image_added(const void *header, intptr_t slide)
{
  (void)header;
  (void)slide;
  fprintf(stderr, "add-image: _MTLDevice %s\n", objc_lookUpClass("_MTLDevice") ? "found" : "absent");
}

__attribute__((constructor)) static void
start(void)
{
  _dyld_register_func_for_add_image(image_added);
}
