#!/bin/sh
# Installs clbound from BUILD into a scratch prefix, then builds and runs the eager
# example against the installed package twice: through find_package(clbound) and
# through pkg-config. Usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
src=$1
build=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(find "$work/prefix" -name 'libclbound.so' -printf '%h\n' | head -n 1)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "== find_package(clbound)"
cmake -S "$src/tests/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" -DEXAMPLE="$src/examples/eager.c" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/consumer"

echo "== pkg-config clbound"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 -Wall -Wextra -o "$work/pc-consumer" "$src/examples/eager.c" $(pkg-config --cflags --libs clbound)
"$work/pc-consumer"
