// header-cxx.cpp: the public headers compile as C++ and link from C++.
#include <clbound/clbound.h>

int main() { return clb_status_str(CLB_OK)[0] == 's' ? 0 : 1; }
