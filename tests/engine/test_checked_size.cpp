// engine/checked_size.h and its use in Tensor construction: products and sums that leave int64
// throw kiln::Error naming what was sized; a shape that wraps 2^64 cannot make a small tensor.
//   ctest --test-dir build -R engine.test_checked_size
#include "engine/checked_size.h"
#include "engine/tensor.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

TEST_CASE("checked_mul and checked_add: exact below the limit, an error naming what at it") {
  CHECK(checked_mul(uint64_t(1) << 31, uint64_t(1) << 31, "x") == uint64_t(1) << 62);
  CHECK(checked_add(kMaxSize - 1, 1, "x") == kMaxSize);
  CHECK(checked_mul(0, UINT64_MAX, "x") == 0);
  CHECK_THROWS_KILN(checked_mul(uint64_t(1) << 32, uint64_t(1) << 32, "f.bin: rows at offset 4"),
                    "f.bin: rows at offset 4: size 4294967296 * 4294967296 overflows (the limit is 2^63 - 1)");
  // 2^63 does not wrap uint64 but is past int64.
  CHECK_THROWS_KILN(checked_mul(uint64_t(1) << 62, 2, "bytes"), "bytes: size 4611686018427387904 * 2 overflows");
  CHECK_THROWS_KILN(checked_add(kMaxSize, 1, "extent"), "extent: size 9223372036854775807 + 1 overflows");
}

TEST_CASE("checked_numel and checked_nbytes: negative dims and wrapping products") {
  CHECK(checked_numel({}, "s") == 1);
  CHECK(checked_numel({2, 0, int64_t(1) << 62}, "s") == 0);
  CHECK(checked_nbytes({3, 5}, 8, "s") == 120);
  CHECK_THROWS_KILN(checked_numel({2, -3}, "spec"), "spec: negative size -3 at dim 1 in shape [2, -3]");
  // 2^32 * 2^32 = 2^64 wraps to 0 in plain arithmetic.
  CHECK_THROWS_KILN(checked_numel({int64_t(1) << 32, int64_t(1) << 32}, "dims"),
                    "dims: shape [4294967296, 4294967296] has more than 2^63 - 1 elements");
  CHECK_THROWS_KILN(checked_nbytes({int64_t(1) << 61, 8}, 1, "d"), "d: shape [2305843009213693952, 8] has more");
  CHECK_THROWS_KILN(checked_nbytes({int64_t(1) << 61}, 8, "d"), "d: size 2305843009213693952 * 8 overflows");
}

TEST_CASE("Tensor construction checks the element count and the bytes") {
  CHECK_THROWS_KILN(empty({int64_t(1) << 32, int64_t(1) << 32}, float32),
                    "empty: shape [4294967296, 4294967296] has more than 2^63 - 1 elements");
  CHECK_THROWS_KILN(empty({int64_t(1) << 62}, float32), "empty_strided: bytes: size 4611686018427387904 * 4 overflows");
  CHECK_THROWS_KILN(empty({2, -1}, float32), "negative size");
  CHECK_THROWS_KILN(shape_numel({int64_t(1) << 40, int64_t(1) << 40}), "shape: shape [1099511627776, 1099511627776]");
  CHECK(empty({0, int64_t(1) << 62}, float32).numel() == 0);
  CHECK(empty({3, 4}, float32).numel() == 12);
}

}  // namespace
}  // namespace kiln
