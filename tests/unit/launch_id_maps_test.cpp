// Whether an id range lies inside a user namespace's id map (IdSlot::claim refuses a range a
// user-namespaced pod does not map, instead of failing at the clone with EINVAL).
#include <gtest/gtest.h>

#include "launch/id_slots_child.hpp"

using sandboxrun::launch::ids_mapped;

namespace {

TEST(IdMaps, TheInitialNamespaceMapsEverything) {
  EXPECT_TRUE(ids_mapped("         0          0 4294967295\n", 100000000, 100002048));
}

TEST(IdMaps, APodMapsItsOwn65536IdsOnly) {
  const char* pod = "         0     200000      65536\n";
  EXPECT_TRUE(ids_mapped(pod, 61440, 63488));
  EXPECT_TRUE(ids_mapped(pod, 0, 65536));
  EXPECT_FALSE(ids_mapped(pod, 100000000, 100002048)) << "the default range, outside a pod's ids";
  EXPECT_FALSE(ids_mapped(pod, 65000, 66000)) << "half inside";
}

TEST(IdMaps, ARangeMayStraddleAdjacentExtents) {
  const char* split = "0 100000 1000\n1000 500000 1000\n3000 900000 10\n";
  EXPECT_TRUE(ids_mapped(split, 500, 1500));
  EXPECT_FALSE(ids_mapped(split, 1500, 2500)) << "2000..2999 is a hole";
  EXPECT_FALSE(ids_mapped("", 0, 1));
  EXPECT_FALSE(ids_mapped("garbage\n", 0, 1));
}

}  // namespace
