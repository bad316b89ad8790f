/* bench_mlp: the MNIST MLP's ("mlp:100", 784 -> 100 -> 10) minibatch
 * forward + backward pass on one core, four ways, against the machine's
 * dgemm rate; and the bytes of a FedMac update of that model against the
 * information limit.
 *
 *   bench_mlp [--quick] [--data DIR] [--numpy SCRIPT]
 *
 * Data: R = 5120 rows (--quick: 1280) drawn at random from DIR's MNIST
 * training set (DIR defaults to ../shared/data/mnist, as seen from the
 * source tree); when DIR has no MNIST files, as in a fresh clone, random
 * rows of the same shape and density (784 columns, 19% nonzero, values in
 * (0, 1), 10 classes), and a note says so. One pass walks the R rows in
 * batches of B = 20 and 256; times are medians of 11 passes (--quick: 3),
 * the implementations interleaved.
 *   lib      sfl_loss_grad: the library's path, sparse CSR rows one at a
 *            time, the first layer in blocks of units whose sums stay in
 *            registers (mlp.c), 4 nnz H + 6 C H flops a row;
 *   plain    the same arithmetic with plain per-unit loops (what mlp.c did
 *            before blocking; here only): the same additions in the same
 *            order, so it must give the library's bits exactly;
 *   dgemm    the same gradient with cblas_dgemm on the densified batch
 *            (densifying included; its share is printed), 4 n H + 6 C H
 *            flops a row;
 *   numpy    SCRIPT (bench/mlp_numpy.py) run by /usr/bin/python3: dense
 *            float64, the dgemm path's arithmetic on the same rows and model,
 *            which this program writes to a temporary directory.
 * The gradients of the first batch are checked against lib's: max|a - b| /
 * max|a| over the dim = 79510 entries, printed; the program fails when
 * plain's is not 0 or another's is above 1e-10. peak is one square
 * n = 1024 dgemm (--quick: 512). One thread throughout: OPENBLAS_NUM_THREADS=1
 * for numpy, openblas_set_num_threads(1) here (looked up at run time, since
 * libblas.so.3 may be the reference BLAS, printed as blas=reference).
 * Prints:
 *   bench_mlp data= rows= n= H= C= dim= density= blas= threads=1
 *   bench_mlp_peak n= gflops=
 *   bench_mlp_check batch= plain_vs_lib= dgemm_vs_lib= numpy_vs_lib=
 *   bench_mlp batch= impl= samples_per_s= gflops= of_peak= [densify_share=]
 *   bench_mlp_ratio batch= lib=1.00 plain= dgemm= numpy=   (samples/s over lib's)
 *   bench_mlp_wire enc= nnz_ratio= k= d= codec_bytes= limit_bytes=
 *                  codec_over_limit= index_bits_per_nnz= index_limit_bits_per_nnz=
 * gflops counts the flops each implementation does (sparse: 4 nnz H, dense:
 * 4 n H, both + 6 C H), so lib and plain do about a fifth of dgemm's work
 * per sample on MNIST. limit_bytes = (log2 C(d,k) + value_bits k) / 8 with
 * value_bits 64 (f64), 32 (f32), 8 (q8; plus its 16-byte range), for a
 * uniformly random k-subset of the d parameters with N(0,1) values; index_bits_per_nnz is what the codec
 * spends on the support (its bytes less values and header), against
 * log2 C(d,k) / k. */
#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/model/loss.h"
#include "sfl/core/rng.h"
#include "sfl/wire/spcodec.h"
#include "sfl/core/vec.h"

#define MAX_RUNS 11
#define HIDDEN 100
#define PYTHON "/usr/bin/python3"

static const uint32_t batches[] = {20, 256};
/* nonzeros of a FedMac update over the model's dimension */
static const double ratios[] = {1.0, 0.5, 0.1};
#define NB (sizeof(batches) / sizeof(batches[0]))

enum { LIB, PLAIN, DGEMM, NUMPY, NIMPL };
static const char *const impl_names[NIMPL] = {"lib", "plain", "dgemm", "numpy"};

/* Keeps results alive so the compiler cannot drop the timed work. */
static volatile double sink;
static int runs = MAX_RUNS;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;

    return (a > b) - (a < b);
}

/* NAN if any run is (numpy stopped answering). */
static double median(double *t, int n)
{
    for (int i = 0; i < n; i++)
        if (isnan(t[i]))
            return NAN;
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return t[n / 2];
}

/* log2 C(d, k) */
static double log2_binom(double d, double k)
{
    return (lgamma(d + 1) - lgamma(k + 1) - lgamma(d - k + 1)) / log(2.0);
}

/* max|a - b| / max|a| */
static double rel_diff(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;

    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(a[i]));
    }
    return den > 0.0 ? num / den : num;
}

/* The BLAS actually loaded (libblas.so.3 is an alternative: OpenBLAS or the
 * reference one), set to one thread. The OpenBLAS calls are looked up, not
 * linked, so the bench also runs on the reference BLAS. */
static const char *blas_one_thread(void)
{
    void *self = dlopen(NULL, RTLD_NOW);
    void (*set_threads)(int) = NULL;
    char *(*corename)(void) = NULL;
    static char name[128];

    snprintf(name, sizeof(name), "reference");
    if (self == NULL)
        return name;
    *(void **)&set_threads = dlsym(self, "openblas_set_num_threads");
    *(void **)&corename = dlsym(self, "openblas_get_corename");
    if (set_threads != NULL) {
        set_threads(1);
        snprintf(name, sizeof(name), "OpenBLAS/%s", corename ? corename() : "?");
    }
    dlclose(self); /* the program's own handle: nothing is unloaded */
    return name;
}

/* Workspace of the dgemm path for batches up to bmax rows. */
typedef struct work {
    double *xb; /* bmax x n, the densified batch */
    double *z1; /* bmax x H, pre-activations */
    double *a;  /* bmax x H, activations */
    double *s;  /* bmax x C, scores, then dl/dscores */
    double *dz; /* bmax x H, dl/dz1 */
} work_t;

/* xb (b x n) = rows [r0, r0 + b) of X, dense. */
static void densify(const sfl_csr_t *X, uint32_t r0, uint32_t b, double *xb)
{
    size_t n = X->ncols;

    memset(xb, 0, (size_t)b * n * sizeof(*xb));
    for (uint32_t t = 0; t < b; t++)
        for (size_t k = X->rowptr[r0 + t]; k < X->rowptr[r0 + t + 1]; k++)
            xb[t * n + X->colind[k]] = X->val[k];
}

/* mlp:H's gradient (no ridge) over rows [r0, r0 + b) of ds, as dgemms on
 * the densified batch Xb:
 *   Z1 = Xb W1 + 1 b1', A = max(Z1, 0), S = A W2' + 1 b2',
 *   dS = (softmax(S) - Y) / b, gW2 = dS' A, gb2 = 1' dS,
 *   dZ = (dS W2) .* [Z1 > 0], gW1 = Xb' dZ, gb1 = 1' dZ
 * with W1 n x H and W2 C x H row-major, as mlp.c lays them out. */
static void dense_grad(const sfl_dataset_t *ds, uint32_t r0, uint32_t b, uint32_t h,
                       const double *x, double *grad, const work_t *w)
{
    const sfl_csr_t *X = ds->X;
    int n = (int)X->ncols, c = (int)ds->nclasses, bi = (int)b, hi = (int)h;
    const double *w1 = x, *b1 = w1 + (size_t)n * h, *w2 = b1 + h, *b2 = w2 + (size_t)c * h;
    double *gw1 = grad, *gb1 = gw1 + (size_t)n * h, *gw2 = gb1 + h, *gb2 = gw2 + (size_t)c * h;
    double inv = 1.0 / b;

    densify(X, r0, b, w->xb);
    for (uint32_t t = 0; t < b; t++)
        memcpy(w->z1 + (size_t)t * h, b1, h * sizeof(double));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi, hi, n, 1.0, w->xb, n, w1, hi,
                1.0, w->z1, hi);
    for (size_t i = 0; i < (size_t)b * h; i++)
        w->a[i] = w->z1[i] > 0.0 ? w->z1[i] : 0.0;
    for (uint32_t t = 0; t < b; t++)
        memcpy(w->s + (size_t)t * c, b2, (size_t)c * sizeof(double));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi, c, hi, 1.0, w->a, hi, w2, hi, 1.0,
                w->s, c);
    memset(gb2, 0, (size_t)c * sizeof(double));
    for (uint32_t t = 0; t < b; t++) {
        double *s = w->s + (size_t)t * c, mx = -INFINITY, sum = 0.0;
        uint32_t y = (uint32_t)ds->y[r0 + t];

        for (int r = 0; r < c; r++)
            mx = s[r] > mx ? s[r] : mx;
        for (int r = 0; r < c; r++) {
            s[r] = exp(s[r] - mx);
            sum += s[r];
        }
        for (int r = 0; r < c; r++) {
            s[r] = (s[r] / sum - ((uint32_t)r == y ? 1.0 : 0.0)) * inv;
            gb2[r] += s[r];
        }
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, hi, bi, 1.0, w->s, c, w->a, hi, 0.0,
                gw2, hi);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi, hi, c, 1.0, w->s, c, w2, hi, 0.0,
                w->dz, hi);
    memset(gb1, 0, h * sizeof(double));
    for (uint32_t t = 0; t < b; t++) {
        double *dz = w->dz + (size_t)t * h;
        const double *z1 = w->z1 + (size_t)t * h;

        for (uint32_t u = 0; u < h; u++) {
            if (!(z1[u] > 0.0))
                dz[u] = 0.0;
            gb1[u] += dz[u];
        }
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hi, bi, 1.0, w->xb, n, w->dz, hi,
                0.0, gw1, hi);
}

/* z[0..h) = b1 + sum_k val_k W1[col_k, :] for row i of X, one unit's
 * running sum after another's in memory order: the plain loop mlp.c had
 * before its first layer was blocked. Same additions in the same order, so
 * the same bits. */
static void fwd_plain(const sfl_csr_t *X, uint32_t i, const double *w1, const double *b1,
                      uint32_t h, double *z)
{
    memcpy(z, b1, h * sizeof(double));
    for (size_t k = X->rowptr[i]; k < X->rowptr[i + 1]; k++) {
        const double *w = w1 + (size_t)X->colind[k] * h;
        double v = X->val[k];

        for (uint32_t u = 0; u < h; u++)
            z[u] += v * w[u];
    }
}

/* gW1[col_k, :] += val_k dz for row i of X, plainly. */
static void bwd_plain(const sfl_csr_t *X, uint32_t i, const double *dz, uint32_t h,
                      double *gw1)
{
    for (size_t k = X->rowptr[i]; k < X->rowptr[i + 1]; k++) {
        double *g = gw1 + (size_t)X->colind[k] * h;
        double v = X->val[k];

        for (uint32_t u = 0; u < h; u++)
            g[u] += v * dz[u];
    }
}

/* mlp:H's gradient (no ridge) over rows[0..nb) as mlp.c computes it, row by
 * row on the sparse rows, with the first layer's plain loops (fwd_plain,
 * bwd_plain); the rest is mlp.c's code. Same bits. */
static void plain_grad(const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nb, uint32_t h,
                       const double *x, double *grad)
{
    const sfl_csr_t *X = ds->X;
    uint32_t c = ds->nclasses;
    size_t n = X->ncols, dim = (size_t)h * (n + 1) + (size_t)c * (h + 1);
    const double *b1 = x + n * h, *w2 = b1 + h, *b2 = w2 + (size_t)c * h;
    double *gb1 = grad + n * h, *gw2 = gb1 + h, *gb2 = gw2 + (size_t)c * h;
    double a[SFL_LOSS_MAX_HIDDEN], delta[SFL_LOSS_MAX_HIDDEN], s[SFL_LOSS_MAX_CLASSES];
    double inv = 1.0 / nb;

    memset(grad, 0, dim * sizeof(double));
    for (uint32_t t = 0; t < nb; t++) {
        uint32_t i = rows[t], yi = (uint32_t)ds->y[i];
        double mx = -INFINITY, sum = 0.0;

        fwd_plain(X, i, x, b1, h, a);
        for (uint32_t u = 0; u < h; u++)
            a[u] = a[u] > 0.0 ? a[u] : 0.0;
        for (uint32_t r = 0; r < c; r++) {
            double z = b2[r];

            for (uint32_t u = 0; u < h; u++)
                z += w2[(size_t)r * h + u] * a[u];
            s[r] = z;
        }
        for (uint32_t r = 0; r < c; r++)
            mx = s[r] > mx ? s[r] : mx;
        for (uint32_t r = 0; r < c; r++) {
            s[r] = exp(s[r] - mx);
            sum += s[r];
        }
        for (uint32_t r = 0; r < c; r++)
            s[r] = (s[r] / sum - (r == yi ? 1.0 : 0.0)) * inv;
        memset(delta, 0, h * sizeof(double));
        for (uint32_t r = 0; r < c; r++) {
            for (uint32_t u = 0; u < h; u++) {
                gw2[(size_t)r * h + u] += s[r] * a[u];
                delta[u] += s[r] * w2[(size_t)r * h + u];
            }
            gb2[r] += s[r];
        }
        for (uint32_t u = 0; u < h; u++) {
            if (!(a[u] > 0.0))
                delta[u] = 0.0;
            gb1[u] += delta[u];
        }
        bwd_plain(X, i, delta, h, grad);
    }
}

/* Seconds per pass over all rows in batches of b: the library, or dgemm. */
static double pass_lib(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                       uint32_t b, const double *x, double *grad)
{
    double t0 = now_s();

    for (uint32_t r0 = 0; r0 + b <= ds->X->nrows; r0 += b) {
        sfl_loss_grad(l, ds, rows + r0, b, x, 0.0, grad);
        sink = grad[r0];
    }
    return now_s() - t0;
}

static double pass_dgemm(const sfl_dataset_t *ds, uint32_t b, const double *x, double *grad,
                         const work_t *w)
{
    double t0 = now_s();

    for (uint32_t r0 = 0; r0 + b <= ds->X->nrows; r0 += b) {
        dense_grad(ds, r0, b, HIDDEN, x, grad, w);
        sink = grad[r0];
    }
    return now_s() - t0;
}

static double pass_plain(const sfl_dataset_t *ds, const uint32_t *rows, uint32_t b,
                           const double *x, double *grad)
{
    double t0 = now_s();

    for (uint32_t r0 = 0; r0 + b <= ds->X->nrows; r0 += b) {
        plain_grad(ds, rows + r0, b, HIDDEN, x, grad);
        sink = grad[r0];
    }
    return now_s() - t0;
}

static double pass_densify(const sfl_dataset_t *ds, uint32_t b, const work_t *w)
{
    double t0 = now_s();

    for (uint32_t r0 = 0; r0 + b <= ds->X->nrows; r0 += b) {
        densify(ds->X, r0, b, w->xb);
        sink = w->xb[r0];
    }
    return now_s() - t0;
}

/* GFLOP/s of one square n x n dgemm, median of the runs. */
static double peak_gflops(int n)
{
    size_t nn = (size_t)n * n;
    double *a = malloc(nn * sizeof(*a)), *b = malloc(nn * sizeof(*b));
    double *c = malloc(nn * sizeof(*c)), t[MAX_RUNS];
    sfl_rng_t r;

    if (a == NULL || b == NULL || c == NULL) {
        free(a);
        free(b);
        free(c);
        return NAN;
    }
    sfl_rng_seed(&r, 5, 0, 0, SFL_STREAM_DATA);
    for (size_t i = 0; i < nn; i++) {
        a[i] = sfl_rng_uniform(&r) - 0.5;
        b[i] = sfl_rng_uniform(&r) - 0.5;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
    for (int k = 0; k < runs; k++) {
        double t0 = now_s();

        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c,
                    n);
        t[k] = now_s() - t0;
        sink = c[k];
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * n * nn / median(t, runs) / 1e9;
}

/* R rows of MNIST's training set at random, or a random stand-in of the
 * same shape when dir has no MNIST; *what names which. */
static int load_rows(const char *dir, uint32_t nrows, sfl_dataset_t **out, const char **what)
{
    char img[1024], lab[1024], spec[2100];
    sfl_dataset_t *all = NULL;
    uint32_t *perm = NULL;
    sfl_rng_t r;
    int rc;

    snprintf(img, sizeof(img), "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lab, sizeof(lab), "%s/train-labels-idx1-ubyte.gz", dir);
    sfl_rng_seed(&r, 11, 0, 0, SFL_STREAM_DATA);
    if (access(img, R_OK) == 0 && access(lab, R_OK) == 0) {
        snprintf(spec, sizeof(spec), "idx:%s,%s", img, lab);
        if ((rc = sfl_dataset_read(spec, 0, NULL, &all)) < 0 ||
            (rc = sfl_dataset_encode_labels(all, 256)) < 0)
            goto out;
        if (all->X->nrows < nrows) {
            rc = SFL_EINVAL;
            goto out;
        }
        if ((perm = malloc((size_t)all->X->nrows * sizeof(*perm))) == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        for (uint32_t i = 0; i < all->X->nrows; i++)
            perm[i] = i;
        sfl_rng_shuffle(&r, perm, all->X->nrows);
        rc = sfl_dataset_subset(all, perm, nrows, out);
        *what = "mnist";
        goto out;
    }

    /* The stand-in: each of 784 pixels nonzero with probability 0.19. */
    uint32_t n = 784;
    sfl_csr_t *X = NULL;
    double *y = sfl__mallocarray(nrows, sizeof(*y));
    size_t nnz = 0;

    if (y == NULL || (rc = sfl_csr_new(nrows, n, (size_t)nrows * n, &X)) < 0) {
        sfl__free(y);
        rc = y == NULL ? SFL_ENOMEM : rc;
        goto out;
    }
    for (uint32_t i = 0; i < nrows; i++) {
        for (uint32_t j = 0; j < n; j++)
            if (sfl_rng_uniform(&r) < 0.19) {
                X->colind[nnz] = j;
                X->val[nnz++] = sfl_rng_uniform(&r);
            }
        X->rowptr[i + 1] = nnz;
        y[i] = (double)(i % 10);
    }
    X->nnz = nnz;
    if ((rc = sfl_dataset_new(X, y, &all)) < 0)
        goto out;
    if ((rc = sfl_dataset_encode_labels(all, 256)) < 0)
        goto out;
    *out = all;
    all = NULL;
    *what = "synthetic";
out:
    free(perm);
    sfl_dataset_free(all);
    return rc;
}

static int write_file(const char *dir, const char *name, const double *v, size_t n)
{
    char path[1100];
    FILE *f;
    int rc = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "wb")) == NULL)
        return -errno;
    if (fwrite(v, sizeof(*v), n, f) != n)
        rc = -EIO;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* Reads name's n doubles; -1 if it is missing or short. */
static int read_file(const char *dir, const char *name, double *v, size_t n)
{
    char path[1100];
    FILE *f;
    int rc = -1;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "rb")) == NULL)
        return -1;
    if (fread(v, sizeof(*v), n, f) == n)
        rc = 0;
    fclose(f);
    return rc;
}

/* The numpy reference as a coprocess, so that its passes interleave with
 * ours: a noisy neighbour then slows all four alike. */
typedef struct numpy {
    char dir[32];  /* its data, "" when there is none */
    pid_t pid;     /* 0 when not running */
    FILE *to;      /* its stdin: one batch size a line, one pass each */
    FILE *from;    /* its stdout */
} numpy_t;

static const char *const numpy_files[] = {"X.f64", "y.f64", "model.f64"};

static void numpy_stop(numpy_t *np);

/* Writes ds's rows and model x to a temporary directory and starts script
 * on them. Prints why and leaves np not running when it cannot. */
static void numpy_start(numpy_t *np, const char *script, const sfl_dataset_t *ds, uint32_t h,
                        const double *x, size_t dim)
{
    const sfl_csr_t *X = ds->X;
    char arg[4][16];
    double *dense = NULL;
    int in[2] = {-1, -1}, out[2] = {-1, -1};

    memset(np, 0, sizeof(*np));
    if (access(PYTHON, X_OK) != 0) {
        printf("bench_mlp numpy skipped: %s not found\n", PYTHON);
        return;
    }
    if (access(script, R_OK) != 0) {
        printf("bench_mlp numpy skipped: %s not found (run from the source tree, or "
               "--numpy SCRIPT)\n", script);
        return;
    }
    strcpy(np->dir, "/tmp/bench_mlp.XXXXXX");
    if (mkdtemp(np->dir) == NULL) {
        printf("bench_mlp numpy skipped: mkdtemp: %s\n", strerror(errno));
        np->dir[0] = '\0';
        return;
    }
    if ((dense = malloc((size_t)X->nrows * X->ncols * sizeof(*dense))) == NULL) {
        printf("bench_mlp numpy skipped: out of memory\n");
        return;
    }
    densify(X, 0, X->nrows, dense);
    int wr = write_file(np->dir, "X.f64", dense, (size_t)X->nrows * X->ncols);
    free(dense);
    if (wr < 0 || write_file(np->dir, "y.f64", ds->y, X->nrows) < 0 ||
        write_file(np->dir, "model.f64", x, dim) < 0) {
        printf("bench_mlp numpy skipped: cannot write %s\n", np->dir);
        return;
    }
    snprintf(arg[0], sizeof(arg[0]), "%u", X->ncols);
    snprintf(arg[1], sizeof(arg[1]), "%u", h);
    snprintf(arg[2], sizeof(arg[2]), "%u", ds->nclasses);
    snprintf(arg[3], sizeof(arg[3]), "%u", X->nrows);
    /* A child that dies must give us EOF and EPIPE, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    fflush(stdout);
    if (pipe(in) < 0 || pipe(out) < 0 || (np->pid = fork()) < 0) {
        np->pid = 0;
        goto fail;
    }
    if (np->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        setenv("OMP_NUM_THREADS", "1", 1);
        execl(PYTHON, PYTHON, script, np->dir, arg[0], arg[1], arg[2], arg[3], (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in[0] = out[1] = -1;
    if ((np->to = fdopen(in[1], "w")) == NULL)
        goto fail;
    in[1] = -1;
    if ((np->from = fdopen(out[0], "r")) == NULL)
        goto fail;
    return;
fail:
    printf("bench_mlp numpy skipped: %s\n", strerror(errno));
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
    }
    numpy_stop(np);
}

/* Seconds of one numpy pass in batches of b (the first for a b also writes
 * DIR/grad_b.f64); NAN when numpy is not running. Relays its other lines
 * (its BLAS, or why it skipped). */
static double numpy_pass(numpy_t *np, uint32_t b)
{
    char line[512];

    if (np->to == NULL)
        return NAN;
    if (fprintf(np->to, "%u\n", b) < 0 || fflush(np->to) != 0)
        return NAN;
    while (fgets(line, sizeof(line), np->from) != NULL) {
        unsigned got;
        double sec;

        if (sscanf(line, "numpy batch=%u seconds=%lf", &got, &sec) == 2 && got == b)
            return sec;
        printf("bench_mlp %s", line);
    }
    return NAN;
}

/* Ends the coprocess and removes its directory. */
static void numpy_stop(numpy_t *np)
{
    char line[512], path[1100];

    if (np->to != NULL)
        fclose(np->to); /* EOF: it exits */
    if (np->from != NULL) {
        while (fgets(line, sizeof(line), np->from) != NULL)
            printf("bench_mlp %s", line);
        fclose(np->from);
    }
    if (np->pid > 0) {
        int st = 0;

        waitpid(np->pid, &st, 0);
        /* 77: numpy is missing, and the script said so */
        if (WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 77)
            printf("bench_mlp numpy: the script exited with status %d\n", WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
            printf("bench_mlp numpy: the script died of signal %d\n", WTERMSIG(st));
    }
    for (size_t i = 0; np->dir[0] && i < sizeof(numpy_files) / sizeof(numpy_files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", np->dir, numpy_files[i]);
        unlink(path);
    }
    for (size_t i = 0; np->dir[0] && i < NB; i++) {
        snprintf(path, sizeof(path), "%s/grad_%u.f64", np->dir, batches[i]);
        unlink(path);
    }
    if (np->dir[0])
        rmdir(np->dir);
    memset(np, 0, sizeof(*np));
}

/* Bytes of v as an LEB128 varint (sfl/wire/spcodec.h). */
static size_t varint_len(uint32_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* One line per encoding: a uniformly random k-subset of [0, d) with N(0,1)
 * values, encoded, against the information limit. */
static int wire(uint32_t d, double ratio, sfl_rng_t *r)
{
    static const char *const names[] = {"f64", "f32", "q8"};
    static const double bits[] = {64, 32, 8};
    uint32_t k = (uint32_t)(ratio * d + 0.5);
    sfl_spvec_t *v = NULL;
    uint8_t *buf = NULL;
    int rc;

    if ((rc = sfl_spvec_new(d, k, &v)) < 0)
        goto out;
    if ((rc = sfl_rng_sample(r, d, k, v->idx)) < 0)
        goto out;
    for (uint32_t j = 0; j < k; j++)
        v->val[j] = sfl_rng_gauss(r, 0.0, 1.0);
    v->nnz = k;
    for (int e = SFL_ENC_F64; e <= SFL_ENC_Q8; e++) {
        size_t size = sfl_spcodec_size(v, (sfl_enc_t)e), len = 0;
        double lb = log2_binom(d, k);
        double limit = (lb + bits[e] * k) / 8 + (e == SFL_ENC_Q8 ? 16 : 0);
        uint8_t *nb = realloc(buf, size);

        if (nb == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        buf = nb;
        if ((rc = sfl_spcodec_encode(v, (sfl_enc_t)e, buf, size, &len)) < 0)
            goto out;
        /* header: varint dim, varint nnz, the encoding byte; q8's lo, hi */
        size_t header = varint_len(d) + varint_len(k) + 1 + (e == SFL_ENC_Q8 ? 16 : 0);
        double idx_bits = 8.0 * ((double)len - header - bits[e] / 8 * k) / k;

        printf("bench_mlp_wire enc=%s nnz_ratio=%.1f k=%u d=%u codec_bytes=%zu limit_bytes=%.0f "
               "codec_over_limit=%.4f index_bits_per_nnz=%.3f index_limit_bits_per_nnz=%.3f\n",
               names[e], ratio, k, d, len, limit, (double)len / limit, idx_bits, lb / k);
    }
out:
    free(buf);
    sfl_spvec_free(v);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = "../shared/data/mnist", *script = "bench/mlp_numpy.py", *what = "";
    uint32_t nrows = 5120;
    int peak_n = 1024;
    const sfl_loss_t *l = sfl_loss_find("mlp:100");
    sfl_dataset_t *ds = NULL;
    double *x = NULL, *ga = NULL, *gb = NULL;
    uint32_t *rows = NULL;
    work_t w = {0};
    double sps[NIMPL][NB];
    numpy_t np = {0};
    sfl_rng_t r;
    int rc = 1, err;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0) {
            nrows = 1280;
            runs = 3;
            peak_n = 512;
        } else if (strcmp(argv[a], "--data") == 0 && a + 1 < argc) {
            dir = argv[++a];
        } else if (strcmp(argv[a], "--numpy") == 0 && a + 1 < argc) {
            script = argv[++a];
        } else {
            fprintf(stderr, "usage: %s [--quick] [--data DIR] [--numpy SCRIPT]\n", argv[0]);
            return 2;
        }
    }
    const char *blas = blas_one_thread();

    if ((err = load_rows(dir, nrows, &ds, &what)) < 0) {
        fprintf(stderr, "bench_mlp: data from %s: %s: %s\n", dir, sfl_strerror(err),
                sfl_last_error());
        goto out;
    }
    const sfl_csr_t *X = ds->X;
    uint32_t n = X->ncols, c = ds->nclasses, h = HIDDEN, bmax = batches[NB - 1];
    size_t dim = sfl_loss_dim(l, n, c);

    x = malloc(dim * sizeof(*x));
    ga = malloc(dim * sizeof(*ga));
    gb = malloc(dim * sizeof(*gb));
    rows = malloc((size_t)nrows * sizeof(*rows));
    w.xb = malloc((size_t)bmax * n * sizeof(double));
    w.z1 = malloc((size_t)bmax * h * sizeof(double));
    w.a = malloc((size_t)bmax * h * sizeof(double));
    w.s = malloc((size_t)bmax * c * sizeof(double));
    w.dz = malloc((size_t)bmax * h * sizeof(double));
    if (x == NULL || ga == NULL || gb == NULL || rows == NULL || w.xb == NULL ||
        w.z1 == NULL || w.a == NULL || w.s == NULL || w.dz == NULL) {
        fprintf(stderr, "bench_mlp: out of memory\n");
        goto out;
    }
    for (uint32_t i = 0; i < nrows; i++)
        rows[i] = i;
    sfl_loss_init_model(l, n, c, 1, x);
    if (strcmp(what, "synthetic") == 0)
        printf("bench_mlp note: no MNIST in %s: random rows of its shape and density instead\n",
               dir);
    printf("bench_mlp data=%s rows=%u n=%u H=%u C=%u dim=%zu density=%.3f blas=%s threads=1\n",
           what, nrows, n, h, c, dim, (double)X->nnz / ((double)nrows * n), blas);
    fflush(stdout);

    double peak = peak_gflops(peak_n);
    printf("bench_mlp_peak n=%d gflops=%.2f\n", peak_n, peak);
    fflush(stdout);

    /* flops a sample: 4 nnz H + 6 C H sparse (nnz the mean per row), or
     * 4 n H + 6 C H dense */
    double fl_sparse = 4.0 * (double)X->nnz / nrows * h + 6.0 * c * h;
    double fl_dense = 4.0 * n * h + 6.0 * c * h;

    numpy_start(&np, script, ds, h, x, dim);
    for (size_t i = 0; i < NB; i++) {
        uint32_t b = batches[i];
        double per_pass = (double)(nrows / b * b), tm[NIMPL][MAX_RUNS], td[MAX_RUNS];
        char name[32];

        /* The checks, on the first batch; they double as the warm-up. */
        sfl_loss_grad(l, ds, rows, b, x, 0.0, ga);
        plain_grad(ds, rows, b, h, x, gb);
        double d_plain = rel_diff(ga, gb, dim);
        dense_grad(ds, 0, b, h, x, gb, &w);
        double d_dgemm = rel_diff(ga, gb, dim);
        double d_numpy = NAN;
        snprintf(name, sizeof(name), "grad_%u.f64", b);
        if (!isnan(numpy_pass(&np, b)) && read_file(np.dir, name, gb, dim) == 0)
            d_numpy = rel_diff(ga, gb, dim);

        printf("bench_mlp_check batch=%u plain_vs_lib=%.2e dgemm_vs_lib=%.2e "
               "numpy_vs_lib=%.2e\n", b, d_plain, d_dgemm, d_numpy);
        if (d_plain != 0.0 || !(d_dgemm < 1e-10) || d_numpy > 1e-10) {
            fprintf(stderr, "bench_mlp: the gradients disagree\n");
            goto out;
        }
        /* Interleaved, so a noisy neighbour slows every implementation. */
        for (int k = 0; k < runs; k++) {
            tm[LIB][k] = pass_lib(l, ds, rows, b, x, ga);
            tm[PLAIN][k] = pass_plain(ds, rows, b, x, gb);
            tm[DGEMM][k] = pass_dgemm(ds, b, x, gb, &w);
            td[k] = pass_densify(ds, b, &w);
            tm[NUMPY][k] = isnan(d_numpy) ? NAN : numpy_pass(&np, b);
        }
        for (int m = LIB; m < NIMPL; m++)
            sps[m][i] = per_pass / median(tm[m], runs);
        for (int m = LIB; m < NIMPL; m++) {
            double gflops = sps[m][i] * (m <= PLAIN ? fl_sparse : fl_dense) / 1e9;

            if (isnan(sps[m][i]))
                continue;
            printf("bench_mlp batch=%u impl=%s samples_per_s=%.0f gflops=%.2f of_peak=%.3f", b,
                   impl_names[m], sps[m][i], gflops, gflops / peak);
            if (m == DGEMM)
                printf(" densify_share=%.3f", median(td, runs) * sps[DGEMM][i] / per_pass);
            printf("\n");
        }
        fflush(stdout);
    }
    for (size_t i = 0; i < NB; i++)
        printf("bench_mlp_ratio batch=%u lib=1.00 plain=%.2f dgemm=%.2f numpy=%.2f\n",
               batches[i], sps[PLAIN][i] / sps[LIB][i], sps[DGEMM][i] / sps[LIB][i],
               sps[NUMPY][i] / sps[LIB][i]);

    sfl_rng_seed(&r, 3, 0, 0, SFL_STREAM_DATA);
    for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++)
        if ((err = wire((uint32_t)dim, ratios[i], &r)) < 0) {
            fprintf(stderr, "bench_mlp: wire: %s: %s\n", sfl_strerror(err), sfl_last_error());
            goto out;
        }
    rc = 0;
out:
    numpy_stop(&np);
    free(w.dz);
    free(w.s);
    free(w.a);
    free(w.z1);
    free(w.xb);
    free(rows);
    free(gb);
    free(ga);
    free(x);
    sfl_dataset_free(ds);
    return rc;
}
