/* libFuzzer: arbitrary server bytes fed to a gRPC client session with calls open. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "sfl/net/grpc.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static uint64_t t;
static uint64_t clk(void *ud) { (void)ud; return t; }
static int dones;
static sfl_grpc_call_t *sc;
static void cu(sfl_grpc_call_t *c, int st, const char *m, const uint8_t *r, size_t n, void *ud) {(void)c;(void)st;(void)ud; if (strlen(m) > 100000 || (n && !r)) abort(); dones++;}
static void cm(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) {(void)r;(void)ud; if (n == 7) { sfl_grpc_cancel(c); sc = NULL; dones++; }}
static void cd(sfl_grpc_call_t *c, int st, const char *m, void *ud) {(void)c;(void)st;(void)m;(void)ud; dones++; if (c == sc) sc = NULL;}
static void drain(sfl_grpc_session_t *s) {
  const uint8_t *b; size_t n;
  for (int i = 0; i < 64; i++) { if (sfl_grpc_session_pending(s, &b, &n) != 0 || n == 0) break; sfl_grpc_session_consumed(s, n); }
}
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  sfl_grpc_config_t cfg = {.now_ms = clk, .max_message = 4096};
  sfl_grpc_session_t *s; uint64_t next; int started = 0;
  t = 1000; dones = 0; sc = NULL;
  if (sfl_grpc_client_new(&cfg, "http", "x", &s) != 0) abort();
  if (sfl_grpc_call_unary(s, "/a/E", (const uint8_t*)"hi", 2, 300, cu, NULL, NULL) == 0) started++;
  if (sfl_grpc_call_stream(s, "/a/S", (const uint8_t*)"hi", 2, 0, cm, cd, NULL, &sc) == 0) started++;
  if (sfl_grpc_call_unary(s, "/a/E", (const uint8_t*)"hi", 2, 0, cu, NULL, NULL) == 0) started++;
  drain(s);
  size_t off = 0;
  while (off < size) {
    size_t n = 1 + (data[off] % 64) * 5; if (n > size - off) n = size - off;
    (void)sfl_grpc_session_feed(s, data + off, n);
    off += n;
    drain(s);
    if (sc && (data[off - 1] & 15) == 3) { sfl_grpc_cancel(sc); sc = NULL; dones++; }
    t += 40; (void)sfl_grpc_session_tick(s, &next);
  }
  drain(s);
  sfl_grpc_session_free(s);
  if (dones != started) { fprintf(stderr, "dones %d started %d\n", dones, started); abort(); }
  return 0;
}
