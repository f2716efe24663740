/* A simulated Metal library for testing capshim on Linux with GCC's GNU
 * Objective-C runtime, shaped like the guest's real one (docs/apple-runtime.md,
 * "The guest's Metal"): the private base class _MTLDevice owns the capability
 * queries; -supportsFamily: searches a list that -initGPUFamilySupport fills
 * from the concrete class's -featureProfile, and Metal's own
 * -requiresBFloat16Emulation asks [self supportsFamily:1009]. The concrete
 * AppleParavirtDevice only supplies its feature profile and name. */
#ifndef METAL_SIM_H
#define METAL_SIM_H

#include <objc/Object.h>

/* MTLGPUFamily is an NSInteger. */
typedef long MTLGPUFamily;

/* What a concrete device class reports about itself. */
struct MTLSimFeatureProfile
{
  const long *families;
  int n_families;
  unsigned long max_threadgroup_memory;
  unsigned long long recommended_working_set_size;
  const char *name;
};

@interface _MTLDevice : Object
{
  long families_[32];
  int n_families_;
  unsigned long max_threadgroup_memory_;
  unsigned long long recommended_working_set_size_;
}
/* Absent when built with METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT: a Metal whose private
 * hook point is gone, as a future macOS might ship. The list is then filled by
 * -loadFeatureProfile, which the shim does not know. */
#ifndef METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT
- (void)initGPUFamilySupport;
#endif
- (void)loadFeatureProfile;
- (const struct MTLSimFeatureProfile *)featureProfile;
- (BOOL)supportsFamily:(MTLGPUFamily)family;
- (unsigned long)maxThreadgroupMemoryLength;
- (unsigned long long)recommendedMaxWorkingSetSize;
- (BOOL)requiresBFloat16Emulation;
- (const char *)name;
@end

/* The stock "Apple Paravirtual device" of a macOS 26 guest: overrides none of the queries. */
@interface AppleParavirtDevice : _MTLDevice
@end

/* A second, unrelated device class with different stock answers and its own
 * -maxThreadgroupMemoryLength (so two classes have two different originals). */
@interface MTLSimSecondDevice : _MTLDevice
@end

/* A subclass of the paravirtual device whose -supportsFamily: calls super and adds
 * MacCatalyst1 (4001). */
@interface MTLSimSubDevice : AppleParavirtDevice
@end

/* A device whose -supportsFamily: asks [self supportsFamily:] for another family:
 * Common3 (3003) is answered as Apple4 (1004) is, Mac2 (2002) as Apple8 (1008) is. */
@interface MTLSimNestedDevice : _MTLDevice
@end

/* A device class whose -maxThreadgroupMemoryLength returns a 4-byte unsigned int ('I'),
 * not NSUInteger: a layout the shim must refuse to replace. */
@interface MTLSimBrokenDevice : _MTLDevice
@end

/* Set by the probe when its main starts. */
extern int metal_sim_main_started;
/* Set when _MTLDevice (or a subclass) was messaged (+initialize, +resolveInstanceMethod:)
 * before main started: Metal code running from another library's initializer. */
extern int metal_sim_messaged_before_main;

/* Creates a device of the named class and sets it up as Metal does (the class's first
 * message, then -initGPUFamilySupport). NULL for an unknown class. */
id MTLSimCreateDevice(const char *class_name);

/* MTLCreateSystemDefaultDevice(): the paravirtual device. */
id MTLCreateSystemDefaultDevice(void);

#endif
