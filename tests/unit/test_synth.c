#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/data/synth.h"

static sfl_synth_params_t small(sfl_synth_kind_t kind)
{
    sfl_synth_params_t p;

    sfl_synth_params_default(&p, kind);
    p.nclients = 3;
    p.n_per_client = 20;
    if (kind != SFL_SYNTH_FEDPROX) {
        p.dim = 12;
        p.s = 4;
    }
    p.seed = 42;
    return p;
}

static int same_dataset(const sfl_dataset_t *a, const sfl_dataset_t *b)
{
    const sfl_csr_t *x = a->X, *y = b->X;

    return x->nrows == y->nrows && x->ncols == y->ncols && x->nnz == y->nnz &&
           memcmp(x->rowptr, y->rowptr, (x->nrows + 1) * sizeof(size_t)) == 0 &&
           memcmp(x->colind, y->colind, x->nnz * sizeof(uint32_t)) == 0 &&
           memcmp(x->val, y->val, x->nnz * sizeof(double)) == 0 &&
           memcmp(a->y, b->y, x->nrows * sizeof(double)) == 0 && a->nclasses == b->nclasses;
}

static void test_synth_defaults(void **state)
{
    (void)state;
    sfl_synth_params_t p;

    sfl_synth_params_default(&p, SFL_SYNTH_SIM1);
    assert_int_equal(p.nclients, 100);
    assert_int_equal(p.n_per_client, 100);
    assert_int_equal(p.dim, 1000);
    assert_int_equal(p.s, 100);
    assert_true(p.alpha == 0.1 && p.beta == 0.1 && p.noise == 0.0);
    sfl_synth_params_default(&p, SFL_SYNTH_SPARSE);
    assert_int_equal(p.s, 20);
    sfl_synth_params_default(&p, SFL_SYNTH_FEDPROX);
    assert_int_equal(p.dim, 60);
}

static void test_synth_sizes(void **state)
{
    (void)state;
    const sfl_synth_kind_t kinds[] = {SFL_SYNTH_SIM1, SFL_SYNTH_SIM2, SFL_SYNTH_SPARSE,
                                      SFL_SYNTH_FEDPROX, SFL_SYNTH_GRADMP, SFL_SYNTH_DPBCFW};

    for (size_t k = 0; k < 6; k++) {
        sfl_synth_params_t p = small(kinds[k]);
        sfl_synth_t *s = NULL;

        assert_int_equal(sfl_synth_generate(&p, &s), 0);
        assert_int_equal(s->nclients, 3);
        assert_int_equal(s->dim, p.dim);
        for (uint32_t i = 0; i < s->nclients; i++) {
            const sfl_dataset_t *ds = s->clients[i];
            uint32_t n = ds->X->nrows;

            if (kinds[k] == SFL_SYNTH_FEDPROX)
                assert_true(n >= 50 && n <= 200);
            else
                assert_int_equal(n, 20);
            assert_int_equal(ds->X->ncols, p.dim);
            if (kinds[k] != SFL_SYNTH_DPBCFW)
                assert_int_equal(ds->X->nnz, (size_t)n * p.dim); /* dense in CSR */
            assert_int_equal(sfl_csr_validate(ds->X), 0);
            switch (kinds[k]) {
            case SFL_SYNTH_SIM1:
            case SFL_SYNTH_SPARSE:
            case SFL_SYNTH_GRADMP:
            case SFL_SYNTH_DPBCFW:
                assert_int_equal(ds->nclasses, 0);
                assert_null(ds->labels);
                break;
            case SFL_SYNTH_SIM2:
            case SFL_SYNTH_FEDPROX: {
                uint32_t c = kinds[k] == SFL_SYNTH_SIM2 ? 2 : 10;

                assert_int_equal(ds->nclasses, c);
                for (uint32_t j = 0; j < c; j++)
                    assert_true(ds->labels[j] == j);
                for (uint32_t r = 0; r < n; r++)
                    assert_true(ds->y[r] == floor(ds->y[r]) && ds->y[r] >= 0 && ds->y[r] < c);
                break;
            }
            }
        }
        switch (kinds[k]) {
        case SFL_SYNTH_SIM1:
        case SFL_SYNTH_SIM2:
            assert_null(s->truth);
            assert_int_equal(s->nsupport, 4);
            for (uint32_t j = 0; j < 4; j++)
                assert_int_equal(s->support[j], j);
            break;
        case SFL_SYNTH_SPARSE:
        case SFL_SYNTH_GRADMP:
        case SFL_SYNTH_DPBCFW:
            assert_non_null(s->truth);
            assert_int_equal(s->nsupport, 4);
            break;
        case SFL_SYNTH_FEDPROX:
            assert_null(s->truth);
            assert_null(s->support);
            assert_int_equal(s->nsupport, 0);
            break;
        }
        sfl_synth_free(s);
    }
    sfl_synth_free(NULL);
}

static void test_synth_deterministic(void **state)
{
    (void)state;
    const sfl_synth_kind_t kinds[] = {SFL_SYNTH_SIM1, SFL_SYNTH_SIM2, SFL_SYNTH_SPARSE,
                                      SFL_SYNTH_FEDPROX, SFL_SYNTH_DPBCFW};

    for (size_t k = 0; k < 5; k++) {
        sfl_synth_params_t p = small(kinds[k]);
        sfl_synth_t *a = NULL, *b = NULL, *c = NULL;

        assert_int_equal(sfl_synth_generate(&p, &a), 0);
        assert_int_equal(sfl_synth_generate(&p, &b), 0);
        /* Client i depends on (seed, i) only, not on nclients. */
        p.nclients = 5;
        assert_int_equal(sfl_synth_generate(&p, &c), 0);
        for (uint32_t i = 0; i < 3; i++) {
            assert_true(same_dataset(a->clients[i], b->clients[i]));
            assert_true(same_dataset(a->clients[i], c->clients[i]));
        }
        assert_false(same_dataset(a->clients[0], a->clients[1]));
        if (a->truth)
            assert_memory_equal(a->truth, c->truth, p.dim * sizeof(double));
        sfl_synth_free(c);
        sfl_synth_free(b);
        /* Another seed, other data. */
        p.nclients = 3;
        p.seed = 43;
        assert_int_equal(sfl_synth_generate(&p, &b), 0);
        assert_false(same_dataset(a->clients[0], b->clients[0]));
        sfl_synth_free(b);
        sfl_synth_free(a);
    }
}

/* Within one client feature j (1-based) has variance j^-1.2 around v_i[j];
 * across clients its mean v_i[j] ~ N(B_i, 1), B_i ~ N(0, beta), adds 1 + beta. */
static void test_synth_sim1_feature_variance(void **state)
{
    (void)state;
    sfl_synth_params_t p = small(SFL_SYNTH_SIM1);
    sfl_synth_t *s = NULL;

    p.nclients = 1;
    p.n_per_client = 20000;
    p.dim = 6;
    p.s = 2;
    assert_int_equal(sfl_synth_generate(&p, &s), 0);
    const sfl_csr_t *X = s->clients[0]->X;
    for (uint32_t j = 0; j < p.dim; j++) {
        double m = 0, v = 0, want = pow(j + 1.0, -1.2);

        for (uint32_t r = 0; r < X->nrows; r++)
            m += X->val[(size_t)r * p.dim + j];
        m /= X->nrows;
        for (uint32_t r = 0; r < X->nrows; r++) {
            double e = X->val[(size_t)r * p.dim + j] - m;
            v += e * e;
        }
        v /= X->nrows - 1;
        /* sd of a variance estimate is want * sqrt(2/n) = 1% here */
        if (fabs(v / want - 1.0) > 0.05)
            fail_msg("feature %u: variance %g, want %g", j + 1, v, want);
    }
    sfl_synth_free(s);

    p.nclients = 3000;
    p.n_per_client = 4;
    p.dim = 3;
    p.beta = 2.0; /* a variance: an sd of 2 would give 4 */
    assert_int_equal(sfl_synth_generate(&p, &s), 0);
    for (uint32_t j = 0; j < p.dim; j++) {
        double m = 0, v = 0, want = pow(j + 1.0, -1.2) + 1.0 + p.beta;
        size_t cnt = 0;

        for (uint32_t i = 0; i < p.nclients; i++)
            for (uint32_t r = 0; r < 4; r++, cnt++)
                m += s->clients[i]->X->val[(size_t)r * p.dim + j];
        m /= cnt;
        for (uint32_t i = 0; i < p.nclients; i++)
            for (uint32_t r = 0; r < 4; r++) {
                double e = s->clients[i]->X->val[(size_t)r * p.dim + j] - m;
                v += e * e;
            }
        v /= cnt - 1;
        if (fabs(v / want - 1.0) > 0.1)
            fail_msg("pooled feature %u: variance %g, want %g", j + 1, v, want);
    }
    sfl_synth_free(s);
}

static void test_synth_sim2_top_decile(void **state)
{
    (void)state;
    const uint32_t sizes[] = {1, 9, 10, 25, 100};

    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        sfl_synth_params_t p = small(SFL_SYNTH_SIM2);
        sfl_synth_t *s = NULL;

        p.n_per_client = sizes[t];
        p.nclients = 7;
        p.alpha = p.beta = 1.0;
        assert_int_equal(sfl_synth_generate(&p, &s), 0);
        for (uint32_t i = 0; i < p.nclients; i++) {
            uint32_t pos = 0;

            for (uint32_t r = 0; r < sizes[t]; r++)
                pos += s->clients[i]->y[r] == 1.0;
            assert_int_equal(pos, (sizes[t] + 9) / 10);
        }
        sfl_synth_free(s);
    }
}

static void test_synth_sparse_truth(void **state)
{
    (void)state;
    sfl_synth_params_t p = small(SFL_SYNTH_SPARSE);
    sfl_synth_t *s = NULL, *noisy = NULL;

    p.dim = 200;
    p.s = 10;
    assert_int_equal(sfl_synth_generate(&p, &s), 0);
    uint32_t nz = 0;
    for (uint32_t j = 0; j < p.dim; j++)
        nz += s->truth[j] != 0.0;
    assert_int_equal(nz, 10);
    for (uint32_t j = 0; j < s->nsupport; j++) {
        assert_true(s->truth[s->support[j]] != 0.0);
        if (j > 0)
            assert_true(s->support[j] > s->support[j - 1]);
    }
    /* noise 0: y = Z x* exactly. */
    for (uint32_t i = 0; i < p.nclients; i++) {
        const sfl_dataset_t *ds = s->clients[i];

        for (uint32_t r = 0; r < ds->X->nrows; r++)
            assert_true(ds->y[r] == sfl_csr_row_dot(ds->X, r, s->truth));
    }
    /* With noise the same Z and x*; residuals have sd = noise. */
    p.noise = 0.5;
    p.n_per_client = 2000;
    p.nclients = 1;
    assert_int_equal(sfl_synth_generate(&p, &noisy), 0);
    assert_memory_equal(noisy->truth, s->truth, p.dim * sizeof(double));
    assert_memory_equal(noisy->clients[0]->X->val, s->clients[0]->X->val,
                        20 * p.dim * sizeof(double));
    double ss = 0;
    const sfl_dataset_t *ds = noisy->clients[0];
    for (uint32_t r = 0; r < ds->X->nrows; r++) {
        double e = ds->y[r] - sfl_csr_row_dot(ds->X, r, noisy->truth);
        ss += e * e;
    }
    ss /= ds->X->nrows;
    assert_true(fabs(ss / 0.25 - 1.0) < 0.1);
    sfl_synth_free(noisy);
    sfl_synth_free(s);
}

/* Seed 004 Sec. V-A/V-C: client i (1-based) draws N(mu_i, 1/i^1.1) entries,
 * mu_i ~ N(0, alpha); the truth is s-sparse on the unit sphere; y = Z x#. */
static void test_synth_gradmp(void **state)
{
    (void)state;
    sfl_synth_params_t p;
    sfl_synth_t *s = NULL, *one = NULL, *noisy = NULL;

    sfl_synth_params_default(&p, SFL_SYNTH_GRADMP);
    assert_int_equal(p.nclients, 30);
    assert_int_equal(p.n_per_client, 100);
    assert_int_equal(p.dim, 1000);
    assert_int_equal(p.s, 10);
    assert_true(p.alpha == 1.0 && p.noise == 0.0);

    p.nclients = 6;
    p.n_per_client = 50;
    p.dim = 200;
    p.seed = 5;
    assert_int_equal(sfl_synth_generate(&p, &s), 0);
    double nrm = 0;
    uint32_t nz = 0;
    for (uint32_t j = 0; j < p.dim; j++) {
        nrm += s->truth[j] * s->truth[j];
        nz += s->truth[j] != 0.0;
    }
    assert_int_equal(nz, 10);
    assert_true(fabs(nrm - 1.0) < 1e-14);
    for (uint32_t j = 0; j < s->nsupport; j++)
        assert_true(s->truth[s->support[j]] != 0.0);
    double means[6] = {0};
    for (uint32_t i = 0; i < p.nclients; i++) {
        const sfl_dataset_t *ds = s->clients[i];
        size_t len = ds->X->nnz;
        double m = 0, v = 0;

        for (uint32_t r = 0; r < ds->X->nrows; r++)
            assert_true(ds->y[r] == sfl_csr_row_dot(ds->X, r, s->truth));
        for (size_t k = 0; k < len; k++)
            m += ds->X->val[k];
        m /= len;
        for (size_t k = 0; k < len; k++)
            v += (ds->X->val[k] - m) * (ds->X->val[k] - m);
        v /= len;
        /* 10000 entries: the variance is within a few percent of 1/i^1.1. */
        assert_true(fabs(v * pow(i + 1.0, 1.1) - 1.0) < 0.06);
        means[i] = m;
    }
    /* The client means differ (alpha = 1): not all within 0.1 of each other. */
    double lo = means[0], hi = means[0];
    for (uint32_t i = 1; i < p.nclients; i++) {
        lo = means[i] < lo ? means[i] : lo;
        hi = means[i] > hi ? means[i] : hi;
    }
    assert_true(hi - lo > 0.1);
    /* Sec. V-B's slower decay: client 4's variance is 1/4^0.2. */
    sfl_synth_t *slow = NULL;
    p.decay = 0.2;
    assert_int_equal(sfl_synth_generate(&p, &slow), 0);
    {
        const sfl_csr_t *X = slow->clients[3]->X;
        double m = 0, v = 0;

        for (size_t k = 0; k < X->nnz; k++)
            m += X->val[k];
        m /= X->nnz;
        for (size_t k = 0; k < X->nnz; k++)
            v += (X->val[k] - m) * (X->val[k] - m);
        v /= X->nnz;
        assert_true(fabs(v * pow(4.0, 0.2) - 1.0) < 0.06);
    }
    sfl_synth_free(slow);
    p.decay = 1.1;
    /* alpha = 0: all means near 0. */
    p.alpha = 0;
    p.nclients = 2;
    assert_int_equal(sfl_synth_generate(&p, &one), 0);
    for (uint32_t i = 0; i < 2; i++) {
        double m = 0;
        for (size_t k = 0; k < one->clients[i]->X->nnz; k++)
            m += one->clients[i]->X->val[k];
        assert_true(fabs(m / one->clients[i]->X->nnz) < 0.05);
    }
    /* Noise keeps Z and x# and adds N(0, noise^2). */
    p.alpha = 1.0;
    p.nclients = 1;
    p.n_per_client = 2000;
    p.noise = 0.1;
    assert_int_equal(sfl_synth_generate(&p, &noisy), 0);
    assert_memory_equal(noisy->truth, s->truth, p.dim * sizeof(double));
    assert_memory_equal(noisy->clients[0]->X->val, s->clients[0]->X->val,
                        50 * p.dim * sizeof(double));
    double ss = 0;
    const sfl_dataset_t *ds = noisy->clients[0];
    for (uint32_t r = 0; r < ds->X->nrows; r++) {
        double e = ds->y[r] - sfl_csr_row_dot(ds->X, r, noisy->truth);
        ss += e * e;
    }
    assert_true(fabs(ss / ds->X->nrows / 0.01 - 1.0) < 0.1);
    sfl_synth_free(noisy);
    sfl_synth_free(one);
    sfl_synth_free(s);
}

static void test_synth_fedprox_sizes(void **state)
{
    (void)state;
    sfl_synth_params_t p;
    sfl_synth_t *s = NULL;
    uint32_t capped = 0, distinct_sizes = 0, prev = 0;

    sfl_synth_params_default(&p, SFL_SYNTH_FEDPROX);
    p.nclients = 40;
    p.n_per_client = 30; /* cap 300 */
    p.alpha = p.beta = 1.0;
    assert_int_equal(sfl_synth_generate(&p, &s), 0);
    for (uint32_t i = 0; i < p.nclients; i++) {
        uint32_t n = s->clients[i]->X->nrows;

        assert_true(n >= 50 && n <= 300);
        capped += n == 300;
        distinct_sizes += n != prev;
        prev = n;
        assert_int_equal(s->clients[i]->X->ncols, 60);
    }
    /* lognormal(4, 2): P(> 250) is about 0.2, so both regimes show up. */
    assert_true(capped > 0 && capped < p.nclients);
    assert_true(distinct_sizes > 10);
    sfl_synth_free(s);
}

static void test_synth_bad_params(void **state)
{
    (void)state;
    sfl_synth_params_t p;
    sfl_synth_t *s = (sfl_synth_t *)&p; /* must be reset to NULL */

    for (int k = 0; k < 15; k++) {
        p = small(SFL_SYNTH_SIM1);
        switch (k) {
        case 0: p.nclients = 0; break;
        case 1: p.n_per_client = 0; break;
        case 2: p.dim = 0; break;
        case 3: p.s = 0; break;
        case 4: p.s = p.dim + 1; break;
        case 5: p.alpha = -1; break;
        case 6: p.beta = NAN; break;
        case 7: p.noise = -0.5; break;
        case 8: p.alpha = INFINITY; break;
        case 9: p.kind = (sfl_synth_kind_t)0; break;
        case 10: p.kind = (sfl_synth_kind_t)99; break;
        case 11: p.kind = SFL_SYNTH_SPARSE; p.s = 13; break;
        case 12: p.kind = SFL_SYNTH_GRADMP; p.decay = -1; break;
        case 13: p.kind = SFL_SYNTH_DPBCFW; p.density = 0; break;
        case 14: p.kind = SFL_SYNTH_DPBCFW; p.density = 1.5; break;
        }
        sfl__clear_error();
        assert_int_equal(sfl_synth_generate(&p, &s), SFL_EINVAL);
        assert_null(s);
        assert_true(strlen(sfl_last_error()) > 0);
    }
    p = small(SFL_SYNTH_SIM1);
    assert_int_equal(sfl_synth_generate(NULL, &s), SFL_EINVAL);
    assert_int_equal(sfl_synth_generate(&p, NULL), SFL_EINVAL);
    /* FEDPROX ignores s. */
    p = small(SFL_SYNTH_FEDPROX);
    p.s = 1000;
    assert_int_equal(sfl_synth_generate(&p, &s), 0);
    sfl_synth_free(s);
}

/* DP-BCFW's data (seed 003 Sec. V): sparse rows of the requested density
 * with N(0, 1) nonzeros, y = Z x* + noise, and the rows of a smaller n are
 * a prefix of a larger one's (Fig. 4 draws subsets of one data set). */
static void test_synth_dpbcfw(void **state)
{
    (void)state;
    sfl_synth_params_t p;
    sfl_synth_t *s = NULL, *big = NULL;
    double sum = 0.0, sq = 0.0, res = 0.0;

    sfl_synth_params_default(&p, SFL_SYNTH_DPBCFW);
    assert_int_equal(p.s, 10);
    assert_true(p.density == 0.1 && fabs(p.noise - sqrt(0.001)) < 1e-15);
    p.nclients = 1;
    p.n_per_client = 400;
    p.dim = 500;
    p.density = 0.05;
    p.seed = 5;
    assert_int_equal(sfl_synth_generate(&p, &s), 0);
    const sfl_dataset_t *ds = s->clients[0];
    const sfl_csr_t *X = ds->X;
    /* 10,000 expected nonzeros: the density within 5 standard deviations */
    assert_true(fabs((double)X->nnz - 10000.0) < 5 * sqrt(10000.0 * 0.95));
    assert_int_equal(sfl_csr_validate(X), 0);
    for (size_t e = 0; e < X->nnz; e++) {
        sum += X->val[e];
        sq += X->val[e] * X->val[e];
    }
    assert_true(fabs(sum / X->nnz) < 0.05 && fabs(sq / X->nnz - 1.0) < 0.05);
    for (uint32_t i = 0; i < X->nrows; i++) {
        double e = ds->y[i] - sfl_csr_row_dot(X, i, s->truth);

        res += e * e;
    }
    assert_true(fabs(res / X->nrows - 0.001) < 0.0003); /* noise variance 0.001 */
    p.n_per_client = 1000;
    assert_int_equal(sfl_synth_generate(&p, &big), 0);
    const sfl_csr_t *B = big->clients[0]->X;
    assert_memory_equal(B->rowptr, X->rowptr, (X->nrows + 1) * sizeof(size_t));
    assert_memory_equal(B->colind, X->colind, X->nnz * sizeof(uint32_t));
    assert_memory_equal(B->val, X->val, X->nnz * sizeof(double));
    assert_memory_equal(big->clients[0]->y, ds->y, X->nrows * sizeof(double));
    sfl_synth_free(big);
    sfl_synth_free(s);
}

static void test_synth_failalloc(void **state)
{
    (void)state;
    const sfl_synth_kind_t kinds[] = {SFL_SYNTH_SIM1, SFL_SYNTH_SIM2, SFL_SYNTH_SPARSE,
                                      SFL_SYNTH_FEDPROX, SFL_SYNTH_GRADMP, SFL_SYNTH_DPBCFW};

    for (size_t k = 0; k < 6; k++) {
        sfl_synth_params_t p = small(kinds[k]);
        sfl_synth_t *s = NULL;

        p.nclients = 2;
        p.n_per_client = 3;
        FAILALLOC_EACH(sfl_synth_generate(&p, &s), {
            sfl_synth_free(s);
            s = NULL;
        });
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synth_defaults),
        cmocka_unit_test(test_synth_sizes),
        cmocka_unit_test(test_synth_deterministic),
        cmocka_unit_test(test_synth_dpbcfw),
        cmocka_unit_test(test_synth_sim1_feature_variance),
        cmocka_unit_test(test_synth_sim2_top_decile),
        cmocka_unit_test(test_synth_sparse_truth),
        cmocka_unit_test(test_synth_gradmp),
        cmocka_unit_test(test_synth_fedprox_sizes),
        cmocka_unit_test(test_synth_bad_params),
        cmocka_unit_test(test_synth_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
