// CIFAR-10 and CIFAR-100 binary batches, through read_cifar_batch's path (gzip decompressed
// within io::gzip_bound first, as read_file_bytes does).
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/data/cifar.h"
#include "io/formats/file_bytes.h"

KILN_FUZZ_TARGET(cifar) {
  try {
    std::vector<uint8_t> b = kiln::io::is_gzip(data, size) ? kiln::io::gunzip(data, size, kiln::io::gzip_bound(size), "fuzz.bin")
                                                           : std::vector<uint8_t>(data, data + size);
    for (kiln::CifarKind kind : {kiln::CifarKind::cifar10, kiln::CifarKind::cifar100}) {
      try {
        kiln::parse_cifar_batch(b.data(), b.size(), "fuzz.bin", kind);
      } catch (const kiln::Error&) {
      }
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
