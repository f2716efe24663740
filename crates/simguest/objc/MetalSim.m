#include "MetalSim.h"

#include <objc/runtime.h>

@implementation _MTLDevice
#ifndef METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT
- (void)initGPUFamilySupport
{
}
#endif
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  (void)family;
  return NO;
}
- (unsigned long)maxThreadgroupMemoryLength
{
  return 0;
}
- (const char *)name
{
  return "_MTLDevice";
}
@end

@implementation MTLParavirtualDevice
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  /* Apple1-Apple5 and Common1-Common3 only. */
  return (family >= 1001 && family <= 1005) || (family >= 3001 && family <= 3003);
}
- (unsigned long)maxThreadgroupMemoryLength
{
  return 32768;
}
- (unsigned long long)recommendedMaxWorkingSetSize
{
  /* 11453.25 MB in a 16 GiB guest. */
  return 12009603072ULL;
}
- (const char *)name
{
  return "Apple Paravirtual device";
}
@end

@implementation MTLSimSecondDevice
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  return (family >= 1001 && family <= 1004) || (family >= 3001 && family <= 3002);
}
- (unsigned long)maxThreadgroupMemoryLength
{
  return 16384;
}
- (unsigned long long)recommendedMaxWorkingSetSize
{
  return 8589934592ULL;
}
- (const char *)name
{
  return "Simulated second device";
}
@end

@implementation MTLSimSubDevice
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  /* Mac2 on top of whatever the paravirtual device says. */
  return [super supportsFamily:family] || family == 2002;
}
- (const char *)name
{
  return "Simulated sub device";
}
@end

@implementation MTLSimBrokenDevice
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
  return family == 1001;
}
- (unsigned long)maxThreadgroupMemoryLength
{
  return 4096;
}
- (const char *)name
{
  return "Simulated broken device";
}
@end

id
MTLSimCreateDevice(const char *class_name)
{
  Class cls = objc_lookUpClass(class_name);
  if (cls == Nil)
    return nil;
  id device = class_createInstance(cls, 0);
#ifndef METAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT
  [device initGPUFamilySupport];
#endif
  return device;
}

id
MTLCreateSystemDefaultDevice(void)
{
  return MTLSimCreateDevice("MTLParavirtualDevice");
}
