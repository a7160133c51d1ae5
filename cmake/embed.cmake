# Turns one kernel source into a C byte array. Run as:
#   cmake -DIN=kernels/x.cl -DOUT=x.cl.c -DSYM=clb_cl_x -P embed.cmake
# The array ends with a NUL byte; SYM_len does not count it.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR nbytes "${nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}.tmp"
"/* Generated from kernels/${name} by cmake/embed.cmake; do not edit. */\n"
"#include <stddef.h>\n"
"static const char ${SYM}[] = {\n${bytes}0x00};\n"
"enum { ${SYM}_len = ${nbytes} };\n")
file(RENAME "${OUT}.tmp" "${OUT}")
