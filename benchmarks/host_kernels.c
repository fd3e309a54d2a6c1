/* The host's kernels for the work the mapper leaves to the CPU (nvdla_sim/system/host.py HostOp), as a
 * driver-side C implementation would run them: FP32, one thread, no vector intrinsics (the compiler may
 * vectorise what it can). benchmarks/bench_host.py compiles and times them; each prints nanoseconds per
 * element of the HostWork it prices:
 *   softmax      a row of scores: max, exp of each minus it, sum, divide (per score)
 *   layernorm    a row of hidden values: mean, variance, normalise, scale and shift (per value)
 *   activation   GELU's tanh form (per value)
 *   elementwise  a product of two tensors (per value)
 *   rotary       rotary position embedding: pairs rotated by a cos/sin table (per value)
 *   handoff      not a kernel: a thread blocked on a pipe, woken by another and answering through a second
 *                pipe; prints microseconds per one-way wake-up (the median of ROW round trips, halved)
 * Usage: host_kernels KIND ROW ELEMENTS REPEATS  ->  prints "KIND ns_per_element"
 */
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void softmax(float *x, long n, long row) {
    for (long r = 0; r < n; r += row) {
        float m = x[r];
        for (long i = 1; i < row; i++) m = x[r + i] > m ? x[r + i] : m;
        float s = 0.0f;
        for (long i = 0; i < row; i++) { x[r + i] = expf(x[r + i] - m); s += x[r + i]; }
        float inv = 1.0f / s;
        for (long i = 0; i < row; i++) x[r + i] *= inv;
    }
}

static void layernorm(float *x, long n, long row, const float *g, const float *b) {
    for (long r = 0; r < n; r += row) {
        float mean = 0.0f, var = 0.0f;
        for (long i = 0; i < row; i++) mean += x[r + i];
        mean /= row;
        for (long i = 0; i < row; i++) { float d = x[r + i] - mean; var += d * d; }
        float inv = 1.0f / sqrtf(var / row + 1e-5f);
        for (long i = 0; i < row; i++) x[r + i] = (x[r + i] - mean) * inv * g[i] + b[i];
    }
}

static void gelu(float *x, long n) {
    for (long i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

static void multiply(float *x, const float *y, long n) {
    for (long i = 0; i < n; i++) x[i] *= y[i];
}

static void rotary(float *x, long n, long row, const float *c, const float *s) {
    for (long r = 0; r < n; r += row)
        for (long i = 0; i < row; i += 2) {
            float a = x[r + i], b = x[r + i + 1];
            x[r + i] = a * c[i / 2] - b * s[i / 2];
            x[r + i + 1] = a * s[i / 2] + b * c[i / 2];
        }
}

static int ping[2], pong[2];

static void *echo(void *arg) {
    char c;
    (void)arg;
    while (read(ping[0], &c, 1) == 1 && c == 'x')
        if (write(pong[1], "y", 1) != 1) break;
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int handoff(long trips) {
    pthread_t t;
    char c;
    double *d = malloc(trips * sizeof(double));
    if (!d || pipe(ping) || pipe(pong) || pthread_create(&t, NULL, echo, NULL)) return 1;
    for (long i = 0; i < trips; i++) {
        double t0 = now_s();
        if (write(ping[1], "x", 1) != 1 || read(pong[0], &c, 1) != 1) return 1;
        d[i] = now_s() - t0;
    }
    if (write(ping[1], "q", 1) != 1) return 1;
    pthread_join(t, NULL);
    qsort(d, trips, sizeof(double), cmp_double);
    printf("handoff %.3f\n", d[trips / 2] / 2 * 1e6);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "handoff")) return handoff(atol(argv[2]));
    if (argc != 5) {
        fprintf(stderr, "usage: %s KIND ROW ELEMENTS REPEATS\n", argv[0]);
        return 2;
    }
    const char *kind = argv[1];
    long row = atol(argv[2]), n = atol(argv[3]), reps = atol(argv[4]);
    if (row < 2 || n < row || n % row || reps < 1) {
        fprintf(stderr, "ROW >= 2, ELEMENTS a multiple of ROW, REPEATS >= 1\n");
        return 2;
    }
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *g = malloc(row * sizeof(float)), *b = malloc(row * sizeof(float));
    float *x0 = malloc(n * sizeof(float));
    if (!x || !y || !g || !b || !x0) return 1;
    unsigned s = 12345;
    for (long i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        x0[i] = ((s >> 9) & 0xFFFF) / 8192.0f - 4.0f;
        y[i] = 1.0f + ((s >> 3) & 0xFF) / 1024.0f;
    }
    for (long i = 0; i < row; i++) { g[i] = 1.0f + i * 1e-3f; b[i] = i * 1e-3f; }
    double total = 0.0;
    float sink = 0.0f;
    for (long k = 0; k < reps; k++) {
        memcpy(x, x0, n * sizeof(float)); /* each pass on fresh inputs; the copy is not timed */
        double t0 = now_s();
        if (!strcmp(kind, "softmax")) softmax(x, n, row);
        else if (!strcmp(kind, "layernorm")) layernorm(x, n, row, g, b);
        else if (!strcmp(kind, "activation")) gelu(x, n);
        else if (!strcmp(kind, "elementwise")) multiply(x, y, n);
        else if (!strcmp(kind, "rotary")) rotary(x, n, row, g, b);
        else {
            fprintf(stderr, "unknown kind %s: softmax, layernorm, activation, elementwise, rotary\n", kind);
            return 2;
        }
        total += now_s() - t0;
        sink += x[k % n];
    }
    printf("%s %.4f %g\n", kind, total / reps / n * 1e9, (double)sink);
    return 0;
}
