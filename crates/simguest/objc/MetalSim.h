/* A simulated Metal library for testing capshim on Linux with GCC's GNU
 * Objective-C runtime. It mirrors only what the shim touches: the private
 * base class _MTLDevice with -initGPUFamilySupport, and concrete device
 * classes answering the capability queries. */
#ifndef METAL_SIM_H
#define METAL_SIM_H

#include <objc/Object.h>

/* MTLGPUFamily is an NSInteger. */
typedef long MTLGPUFamily;

@interface _MTLDevice : Object
/* Absent when built with METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT: a Metal whose private
 * hook point is gone, as a future macOS might ship. */
#ifndef METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT
- (void)initGPUFamilySupport;
#endif
- (BOOL)supportsFamily:(MTLGPUFamily)family;
- (unsigned long)maxThreadgroupMemoryLength;
- (const char *)name;
@end

/* The stock "Apple Paravirtual device" of a macOS 26 guest (DESIGN.md 1). */
@interface MTLParavirtualDevice : _MTLDevice
- (unsigned long long)recommendedMaxWorkingSetSize;
@end

/* A second, unrelated device class with different stock answers. */
@interface MTLSimSecondDevice : _MTLDevice
- (unsigned long long)recommendedMaxWorkingSetSize;
@end

/* A subclass of the paravirtual device whose -supportsFamily: calls super. */
@interface MTLSimSubDevice : MTLParavirtualDevice
@end

/* A device class without -recommendedMaxWorkingSetSize. */
@interface MTLSimBrokenDevice : _MTLDevice
@end

/* Creates a device of the named class and sets it up as Metal does
 * (calling -initGPUFamilySupport). NULL for an unknown class. */
id MTLSimCreateDevice(const char *class_name);

/* MTLCreateSystemDefaultDevice(): the paravirtual device. */
id MTLCreateSystemDefaultDevice(void);

#endif
