# aarch64-linux-gnu.cmake: cross-compile weft for AArch64 Linux with Debian's
# cross toolchain (packages g++-aarch64-linux-gnu, qemu-user), and run the
# tests under qemu-user.
#
#   cmake -B build-a64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
#
# ctest runs each test through CMAKE_CROSSCOMPILING_EMULATOR.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(WEFT_A64_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER   ${WEFT_A64_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${WEFT_A64_TRIPLE}-g++)
set(CMAKE_ASM_COMPILER ${WEFT_A64_TRIPLE}-gcc)

# Headers, libraries and packages come from the target sysroot only; build
# tools (programs) from the host only.
set(CMAKE_FIND_ROOT_PATH /usr/${WEFT_A64_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config looks in the target's directories only (liburing for arm64 is
# not installed by scripts/deps.sh, so the io_uring backend is left out).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${WEFT_A64_TRIPLE}/pkgconfig:/usr/${WEFT_A64_TRIPLE}/lib/pkgconfig:/usr/share/pkgconfig")

set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/${WEFT_A64_TRIPLE})

# BTI landing pads in compiled code, so that weft's objects carry the BTI
# property like its assembly does. Return addresses are not signed (no
# pac-ret, hence not -mbranch-protection=standard): the context switch moves
# return addresses between stacks and signs nothing. Debian 12's crt objects
# carry no BTI note, so linked executables end up unmarked (the linker ANDs
# the notes); linking itself is unaffected.
set(CMAKE_C_FLAGS_INIT   "-mbranch-protection=bti")
set(CMAKE_CXX_FLAGS_INIT "-mbranch-protection=bti")
set(CMAKE_ASM_FLAGS_INIT "-mbranch-protection=bti")
