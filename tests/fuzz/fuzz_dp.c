/* libFuzzer entry point for the privacy accountant's decoder
 * (sfl_dp_acct_decode), the bytes the coordinator keeps in SQLite.
 *
 * Beyond "no crash": a failure leaves the accountant untouched; what decodes
 * re-encodes to exactly the input (one encoding per state); its epsilons,
 * whatever the recorded scales, are never NaN nor negative; and recording
 * one more iteration of an entry it holds only adds to them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/dp/dp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_spent(const sfl_dp_spent_t *s)
{
    if (!(s->eps_paper >= 0) || !(s->eps_rdp >= 0) || !(s->eps_rdp_tight >= 0)) {
        fprintf(stderr, "fuzz_dp: epsilon %g %g %g\n", s->eps_paper, s->eps_rdp,
                s->eps_rdp_tight);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfl_dp_acct_t a, untouched;
    sfl_dp_spent_t s, more;
    uint8_t again[SFL_DP_ACCT_BYTES];

    memset(&a, 0xa5, sizeof(a));
    untouched = a;
    if (sfl_dp_acct_decode(&a, data, size) != 0) {
        if (memcmp(&a, &untouched, sizeof(a)) != 0)
            abort();
        return 0;
    }
    sfl_dp_acct_encode(&a, again);
    if (size != sizeof(again) || memcmp(again, data, size) != 0)
        abort();
    if (sfl_dp_acct_epsilon(&a, 1e-5, &s) != 0)
        abort();
    check_spent(&s);
    if (a.n > 0 && a.e[0].iters < UINT32_MAX) {
        sfl_dp_entry_t e = a.e[0];
        int rc;

        switch (e.kind) {
        case SFL_DP_MECH_GAUSSIAN:
            rc = sfl_dp_acct_add_gaussian(&a, e.scale, e.sens, e.count);
            break;
        case SFL_DP_MECH_RNM:
            rc = sfl_dp_acct_add_rnm(&a, e.scale, e.sens, e.count);
            break;
        case SFL_DP_MECH_EM:
            rc = sfl_dp_acct_add_em(&a, e.scale, e.sens, e.count);
            break;
        default:
            rc = sfl_dp_acct_add_laplace(&a, e.scale, e.sens, e.count);
            break;
        }
        if (rc != 0 || sfl_dp_acct_epsilon(&a, 1e-5, &more) != 0)
            abort();
        check_spent(&more);
        if (more.eps_paper < s.eps_paper || more.eps_rdp < s.eps_rdp)
            abort();
    }
    return 0;
}
