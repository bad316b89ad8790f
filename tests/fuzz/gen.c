/* writes client byte streams as seeds */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include "sfl/grpc.h"
static void cu(sfl_grpc_call_t *c, int st, const char *m, const uint8_t *r, size_t n, void *ud) {(void)c;(void)st;(void)m;(void)r;(void)n;(void)ud;}
static void cm(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) {(void)c;(void)r;(void)n;(void)ud;}
static void cd(sfl_grpc_call_t *c, int st, const char *m, void *ud) {(void)c;(void)st;(void)m;(void)ud;}
int main(void) {
  const char *paths[] = {"/a/E", "/a/H", "/a/S", "/zz"};
  for (int k = 0; k < 4; k++) {
    sfl_grpc_session_t *c; const uint8_t *b; size_t n; char fn[64];
    if (sfl_grpc_client_new(NULL, "http", "x", &c)) return 1;
    if (k == 1 || k == 2) { if (sfl_grpc_call_stream(c, paths[k], (const uint8_t*)"hello", 5, 1500, cm, cd, NULL, NULL)) return 1; }
    else if (sfl_grpc_call_unary(c, paths[k], (const uint8_t*)"hello", 5, k ? 0 : 100, cu, NULL, NULL)) return 1;
    if (sfl_grpc_call_unary(c, paths[0], (const uint8_t*)"abc", 3, 0, cu, NULL, NULL)) return 1;
    snprintf(fn, sizeof fn, "/tmp/gt/scorpus/seed%d", k);
    FILE *f = fopen(fn, "wb"); fputc(0x40, f); /* even: preface comes from data */
    while (sfl_grpc_session_pending(c, &b, &n) == 0 && n > 0) { fwrite(b, 1, n, f); sfl_grpc_session_consumed(c, n); }
    fclose(f); sfl_grpc_session_free(c);
  }
  return 0;
}
