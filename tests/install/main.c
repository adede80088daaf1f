/* tests/install/main.c: a C11 program using an installed weft through its C
 * API. scripts/test builds it with `pkg-config --cflags --libs weft-c` (no
 * C++ flags, no C++ compiler driver) and expects "OK". */
#include <weft/weft.h>

#include <stdio.h>

static void body(void* arg) { *(int*)arg += 41; }

int main(void) {
    weft_runtime rt;
    weft_result r = weft_runtime_create(NULL, &rt);
    if (r != WEFT_OK) {
        printf("FAIL: weft_runtime_create: %s\n", weft_result_str(r));
        return 1;
    }
    int value = 1;
    r = weft_runtime_block_on(rt, body, &value, NULL);
    if (r != WEFT_OK || value != 42) {
        printf("FAIL: weft_runtime_block_on: %s, value %d\n", weft_result_str(r), value);
        return 1;
    }
    r = weft_runtime_destroy(rt);
    if (r != WEFT_OK) {
        printf("FAIL: weft_runtime_destroy: %s\n", weft_result_str(r));
        return 1;
    }
    printf("OK\n");
    return 0;
}
