#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include "sfl/grpc.h"
static void h_echo(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) { (void)ud; (void)sfl_grpc_reply(c, r, n); }
static void h_stream(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) { (void)ud; for (int i = 0; i < 3; i++) (void)sfl_grpc_send(c, r, n); (void)sfl_grpc_finish(c, 5, "nf%"); }
static const sfl_grpc_method_t m[] = {{"/a/E", SFL_GRPC_KIND_UNARY, h_echo}, {"/a/S", SFL_GRPC_KIND_SERVER_STREAM, h_stream}};
static void cu(sfl_grpc_call_t *c, int st, const char *mm, const uint8_t *r, size_t n, void *ud) {(void)c;(void)st;(void)mm;(void)r;(void)n;(void)ud;}
static void cm(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) {(void)c;(void)r;(void)n;(void)ud;}
static void cd(sfl_grpc_call_t *c, int st, const char *mm, void *ud) {(void)c;(void)st;(void)mm;(void)ud;}
int main(void) {
  sfl_grpc_session_t *c, *s; const uint8_t *b; size_t n;
  FILE *f = fopen("/tmp/gt/ccorpus/seed0", "wb");
  if (sfl_grpc_client_new(NULL, "http", "x", &c) || sfl_grpc_server_new(NULL, m, 2, NULL, &s)) return 1;
  if (sfl_grpc_call_unary(c, "/a/E", (const uint8_t*)"hi", 2, 300, cu, NULL, NULL)) return 1;
  if (sfl_grpc_call_stream(c, "/a/S", (const uint8_t*)"hi", 2, 0, cm, cd, NULL, NULL)) return 1;
  if (sfl_grpc_call_unary(c, "/a/E", (const uint8_t*)"hi", 2, 0, cu, NULL, NULL)) return 1;
  for (int i = 0; i < 20; i++) {
    while (sfl_grpc_session_pending(c, &b, &n) == 0 && n > 0) { (void)sfl_grpc_session_feed(s, b, n); sfl_grpc_session_consumed(c, n); }
    while (sfl_grpc_session_pending(s, &b, &n) == 0 && n > 0) { fwrite(b, 1, n, f); (void)sfl_grpc_session_feed(c, b, n); sfl_grpc_session_consumed(s, n); }
  }
  fclose(f); sfl_grpc_session_free(c); sfl_grpc_session_free(s); return 0;
}
