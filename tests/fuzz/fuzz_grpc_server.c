/* libFuzzer: arbitrary bytes fed to a gRPC server session after a valid client preface. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "sfl/net/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static uint64_t t;
static uint64_t clk(void *ud) { (void)ud; return t; }
static sfl_grpc_call_t *held[64];
static int nheld;
static void h_echo(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) { (void)ud; (void)sfl_grpc_reply(c, r, n); }
static void h_hold(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) { (void)ud; (void)r; (void)n; if (nheld < 64) held[nheld++] = c; else (void)sfl_grpc_finish(c, 3, "x%y"); }
static void h_stream(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud) { (void)ud; for (int i = 0; i < 3; i++) (void)sfl_grpc_send(c, r, n); (void)sfl_grpc_finish(c, 0, NULL); }
static const sfl_grpc_method_t m[] = {
  {"/a/E", SFL_GRPC_KIND_UNARY, h_echo, 0, NULL, 0}, {"/a/H", SFL_GRPC_KIND_SERVER_STREAM, h_hold, 0, NULL, 0}, {"/a/S", SFL_GRPC_KIND_SERVER_STREAM, h_stream, 0, NULL, 0}};
static void drain(sfl_grpc_session_t *s) {
  const uint8_t *b; size_t n;
  for (int i = 0; i < 64; i++) { if (sfl_grpc_session_pending(s, &b, &n) != 0 || n == 0) break; sfl_grpc_session_consumed(s, n); }
}
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  sfl_grpc_config_t cfg = {.now_ms = clk, .max_message = 4096, .max_streams = 8};
  sfl_grpc_budget_t *b = NULL;
  sfl_grpc_session_t *s;
  uint64_t next;
  t = 1000; nheld = 0;
  /* budgets below max_message: requests that can never be admitted (refused at their prefix) */
  if (size > 0 && data[0] & 2) cfg.max_buffered = 2500;
  if (size > 0 && data[0] & 4) { if (sfl_grpc_budget_new(3000, &b) != 0) abort(); cfg.budget = b; }
  if (sfl_grpc_server_new(&cfg, m, 3, NULL, &s) != 0) abort();
  if (size > 0 && data[0] & 1) { if (sfl_grpc_session_feed(s, (const uint8_t *)pre, 24) != 0) abort(); }
  size_t off = size > 0 ? 1 : 0;
  while (off < size) {
    size_t n = 1 + (data[off - 1] % 64) * 7; if (n > size - off) n = size - off;
    (void)sfl_grpc_session_feed(s, data + off, n);
    off += n;
    drain(s);
    if (nheld > 0 && (data[off - 1] & 3) == 0) { (void)sfl_grpc_send(held[nheld - 1], data, 3); }
    if (nheld > 0 && (data[off - 1] & 7) == 1) { (void)sfl_grpc_finish(held[--nheld], 0, NULL); }
    t += 50; (void)sfl_grpc_session_tick(s, &next);
  }
  drain(s);
  sfl_grpc_session_free(s);
  while (nheld > 0) (void)sfl_grpc_finish(held[--nheld], 0, NULL);
  sfl_grpc_budget_free(b);
  return 0;
}
