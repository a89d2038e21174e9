# Cross build for 64-bit little-endian POWER (Debian ppc64el), tests under qemu-user as a POWER8,
# Debian's ppc64el baseline, so no POWER9/10 instruction can pass unnoticed.
#   tools/cross-check ppc64le        (or by hand: docs/cross.md)
set(CMAKE_SYSTEM_PROCESSOR ppc64le)
set(KILN_CROSS_TRIPLET powerpc64le-linux-gnu)
set(KILN_CROSS_QEMU qemu-ppc64le)
set(KILN_CROSS_QEMU_ARGS -cpu power8)
set(KILN_CROSS_QEMU_MIN_VERSION 8.1)
set(KILN_CROSS_QEMU_WHY "older ones reject on POWER8 the ISA 3.0 forms of mffs (mffscrni, mffsl) that POWER8 \
hardware runs as plain mffs and Debian's glibc uses in libm (sin, rint: SIGILL)")
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
