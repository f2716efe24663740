#include "MetalSim.h"

#include <objc/runtime.h>
#include <string.h>

/* Apple's runtime initializes a class at its first message, calling the functions registered
 * with _objc_addWillInitializeClassFunc just before (superclass first). GCC's runtime has no
 * such callbacks; the Apple-runtime model (applemodel/), when preloaded, provides this hook
 * and runs them. Without the model the symbol is absent and nothing happens. */
extern void applemodel_first_message(Class cls) __attribute__((weak));

int metal_sim_main_started;
int metal_sim_messaged_before_main;

static void
note_class_message(void)
{
  if (!metal_sim_main_started)
    metal_sim_messaged_before_main = 1;
}

@implementation _MTLDevice
+ (void)initialize
{
  note_class_message();
}
+ (BOOL)resolveInstanceMethod:(SEL)sel
{
  (void)sel;
  note_class_message();
  return NO;
}
#ifndef METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT
- (void)initGPUFamilySupport
{
  [self loadFeatureProfile];
}
#endif
- (void)loadFeatureProfile
{
  const struct MTLSimFeatureProfile *profile = [self featureProfile];
  n_families_ = 0;
  for (int i = 0; i < profile->n_families && i < 32; i++)
    families_[n_families_++] = profile->families[i];
  max_threadgroup_memory_ = profile->max_threadgroup_memory;
  recommended_working_set_size_ = profile->recommended_working_set_size;
}
- (const struct MTLSimFeatureProfile *)featureProfile
{
  static const struct MTLSimFeatureProfile none = { NULL, 0, 0, 0, "_MTLDevice" };
  return &none;
}
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  for (int i = 0; i < n_families_; i++)
    if (families_[i] == family)
      return YES;
  return NO;
}
- (unsigned long)maxThreadgroupMemoryLength
{
  return max_threadgroup_memory_;
}
- (unsigned long long)recommendedMaxWorkingSetSize
{
  return recommended_working_set_size_;
}
- (BOOL)requiresBFloat16Emulation
{
  /* Metal's own decision: bf16 is emulated unless the device supports Apple9. */
  return ![self supportsFamily:1009];
}
- (const char *)name
{
  return [self featureProfile]->name;
}
@end

/* Apple1-Apple5 and Common1-Common3, as a macOS 26 guest answers. */
static const long paravirt_families[] = { 1001, 1002, 1003, 1004, 1005, 3001, 3002, 3003 };

@implementation AppleParavirtDevice
- (const struct MTLSimFeatureProfile *)featureProfile
{
  /* 32768 bytes of threadgroup memory; 11453.25 MB of working set in a 16 GiB guest. */
  static const struct MTLSimFeatureProfile profile
      = { paravirt_families, sizeof paravirt_families / sizeof paravirt_families[0], 32768,
          12009603072ULL, "Apple Paravirtual device" };
  return &profile;
}
@end

static const long second_families[] = { 1001, 1002, 1003, 1004, 3001, 3002 };

@implementation MTLSimSecondDevice
- (const struct MTLSimFeatureProfile *)featureProfile
{
  static const struct MTLSimFeatureProfile profile
      = { second_families, sizeof second_families / sizeof second_families[0], 0,
          8589934592ULL, "Simulated second device" };
  return &profile;
}
- (unsigned long)maxThreadgroupMemoryLength
{
  return 16384;
}
@end

@implementation MTLSimSubDevice
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  return [super supportsFamily:family] || family == 4001;
}
@end

@implementation MTLSimNestedDevice
- (const struct MTLSimFeatureProfile *)featureProfile
{
  static const struct MTLSimFeatureProfile profile
      = { paravirt_families, sizeof paravirt_families / sizeof paravirt_families[0], 32768,
          12009603072ULL, "Simulated nested device" };
  return &profile;
}
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  if (family == 3003)
    return [self supportsFamily:1004];
  if (family == 2002)
    return [self supportsFamily:1008];
  return [super supportsFamily:family];
}
@end

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
@implementation MTLSimBrokenDevice
- (const struct MTLSimFeatureProfile *)featureProfile
{
  static const long families[] = { 1001 };
  static const struct MTLSimFeatureProfile profile
      = { families, 1, 4096, 4294967296ULL, "Simulated broken device" };
  return &profile;
}
- (unsigned int)maxThreadgroupMemoryLength
{
  return 4096;
}
@end
#pragma GCC diagnostic pop

id
MTLSimCreateDevice(const char *class_name)
{
  Class cls = objc_lookUpClass(class_name);
  if (cls == Nil)
    return nil;
  if (applemodel_first_message)
    applemodel_first_message(cls);
  id device = class_createInstance(cls, 0);
#ifndef METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT
  [device initGPUFamilySupport];
#else
  [device loadFeatureProfile];
#endif
  return device;
}

id
MTLCreateSystemDefaultDevice(void)
{
  return MTLSimCreateDevice("AppleParavirtDevice");
}
