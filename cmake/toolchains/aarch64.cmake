# Cross build for 64-bit Arm (Debian arm64), tests under qemu-user on `-cpu max` with SVE at a
# 256-bit vector length (sve256=on: every shorter length off), so the SVE kernels run at a length
# wider than NEON's 128 bits.
#   tools/cross-check aarch64        (or by hand: docs/cross.md)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(KILN_CROSS_TRIPLET aarch64-linux-gnu)
set(KILN_CROSS_QEMU qemu-aarch64)
set(KILN_CROSS_QEMU_ARGS -cpu max,sve=on,sve256=on)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
