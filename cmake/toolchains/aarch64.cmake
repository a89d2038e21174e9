# Cross build for 64-bit Arm (Debian arm64), tests under qemu-user on `-cpu max` (every feature
# QEMU emulates: NEON, SVE, SVE2, ...) with 256-bit SVE vectors (sve256=on: the longest length
# enabled, so the process starts at 256), twice NEON's width, as on Neoverse V1 (Graviton3).
#   tools/cross-check aarch64        (or by hand: docs/cross.md)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(KILN_CROSS_TRIPLET aarch64-linux-gnu)
set(KILN_CROSS_QEMU qemu-aarch64)
set(KILN_CROSS_QEMU_ARGS -cpu max,sve256=on)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
