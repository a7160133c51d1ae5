/* header-c.c: the public headers compile on their own as strict C11. */
#include <clbound/clbound.h>

int main(void) { return clb_status_str(CLB_OK)[0] == 's' ? 0 : 1; }
