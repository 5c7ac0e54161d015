/* The C API from C (compiled as C11, not C++), on the real adapter: the host conveniences on
 * seeded random data against a CPU evaluation, and the errors for NULL pointers and n = 0.
 *
 *   capi_test CACHE_DIR [SEED]      exit 0 when every check passes */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wgsl_forge/wgsl_forge.h"

static int failures = 0;

#define CHECK(condition, ...)                                          \
  do {                                                                 \
    if (!(condition)) {                                                \
      fprintf(stderr, "capi_test:%d: %s: ", __LINE__, #condition);     \
      fprintf(stderr, __VA_ARGS__);                                    \
      fputc('\n', stderr);                                             \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

static uint64_t state;
static uint32_t next_random(void) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(state >> 33);
}

static int compare_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return (x > y) - (x < y);
}

/* Segment sums and the u64 pairs sort from host memory: random segments (some empty, some
 * long) against sums in double precision, the u64 keys against a stable insertion of each key
 * (equal keys keep input order), and the errors for bad offsets. */
static void check_segments_and_u64_pairs(wf_context* context) {
  size_t segments = 200 + next_random() % 200;
  uint32_t* offsets = malloc((segments + 1) * sizeof *offsets);
  offsets[0] = 0;
  for (size_t s = 0; s < segments; ++s) {
    uint32_t length = next_random() % 30 == 0 ? next_random() % 9000 : next_random() % 40;
    offsets[s + 1] = offsets[s] + length;
  }
  size_t n = offsets[segments];
  float* x = malloc((n + 1) * sizeof *x);
  for (size_t i = 0; i < n; ++i) x[i] = (float)(next_random() % 2001) / 10.0f - 100.0f;
  float* sums = malloc(segments * sizeof *sums);
  int status = wf_segmented_reduce_sum_f32_host(context, x, n, offsets, segments, sums);
  CHECK(status == WF_OK, "%s", wf_context_error(context));
  for (size_t s = 0; status == WF_OK && s < segments; ++s) {
    double exact = 0, magnitude = 0;
    for (uint32_t i = offsets[s]; i < offsets[s + 1]; ++i) {
      exact += x[i];
      magnitude += x[i] < 0 ? -x[i] : x[i];
    }
    double bound = (double)(offsets[s + 1] - offsets[s]) * magnitude / 16777216.0;
    double error = sums[s] - exact;
    CHECK(error <= bound && -error <= bound, "segment %zu: %f, expected %f", s, (double)sums[s],
          exact);
  }
  if (segments > 2) {
    offsets[2] = offsets[1] + (uint32_t)n + 1; /* past the values */
    CHECK(wf_segmented_reduce_sum_f32_host(context, x, n, offsets, segments, sums) ==
                  WF_ERROR_INVALID_INPUT &&
              strstr(wf_context_error(context), "Segment offset 2 (") != NULL,
          "offset past n accepted: %s", wf_context_error(context));
  }
  CHECK(wf_segmented_reduce_sum_f32_host(context, x, n, NULL, segments, sums) ==
            WF_ERROR_INVALID_INPUT,
        "NULL offsets accepted");

  size_t pairs = 2000 + next_random() % 2000;
  uint64_t* keys = malloc(pairs * sizeof *keys);
  uint32_t* values = malloc(pairs * sizeof *values);
  uint64_t* expected = malloc(pairs * sizeof *expected);
  uint32_t* expected_values = malloc(pairs * sizeof *expected_values);
  for (size_t i = 0; i < pairs; ++i) {
    keys[i] = (uint64_t)(next_random() % 16) << 32 | (next_random() % 3);
    if (next_random() % 2) keys[i] |= (uint64_t)next_random() << 40;
    values[i] = (uint32_t)i;
    size_t j = i; /* stable insertion: after every equal key */
    while (j > 0 && expected[j - 1] > keys[i]) {
      expected[j] = expected[j - 1];
      expected_values[j] = expected_values[j - 1];
      --j;
    }
    expected[j] = keys[i];
    expected_values[j] = (uint32_t)i;
  }
  status = wf_sort_pairs_u64_host(context, keys, values, pairs);
  CHECK(status == WF_OK, "%s", wf_context_error(context));
  for (size_t i = 0; status == WF_OK && i < pairs; ++i) {
    if (keys[i] != expected[i] || values[i] != expected_values[i]) {
      CHECK(0, "pair %zu: key %llu value %u, expected %llu %u", i, (unsigned long long)keys[i],
            values[i], (unsigned long long)expected[i], expected_values[i]);
      break;
    }
  }
  CHECK(wf_sort_pairs_u64_host(context, NULL, values, pairs) == WF_ERROR_INVALID_INPUT,
        "NULL keys accepted");
  free(offsets);
  free(x);
  free(sums);
  free(keys);
  free(values);
  free(expected);
  free(expected_values);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: capi_test CACHE_DIR [SEED]\n");
    return 2;
  }
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL);
  state = seed;
  printf("capi_test: seed %llu, version %s\n", (unsigned long long)seed, wf_version());

  wf_context* context = NULL;
  int status = wf_context_create(argv[1], &context);
  if (status != WF_OK) {
    fprintf(stderr, "capi_test: %s\n", context ? wf_context_error(context) : "no context");
    wf_context_destroy(context);
    return 3;
  }
  printf("capi_test: adapter %s, topology %s\n", wf_context_adapter_name(context),
         wf_context_topology_hash(context));
  CHECK(strlen(wf_context_topology_hash(context)) == 64, "%s", wf_context_topology_hash(context));

  size_t n = 3000 + next_random() % 2000;
  uint32_t* keys = malloc(n * sizeof *keys);
  uint32_t* expected = malloc(n * sizeof *expected);
  for (size_t i = 0; i < n; ++i) keys[i] = expected[i] = next_random();
  status = wf_sort_u32_host(context, keys, n);
  CHECK(status == WF_OK, "%s", wf_context_error(context));
  qsort(expected, n, sizeof *expected, compare_u32);
  CHECK(memcmp(keys, expected, n * sizeof *keys) == 0, "sorted keys differ (seed %llu)",
        (unsigned long long)seed);

  float* x = malloc(n * sizeof *x);
  float* kept = malloc(n * sizeof *kept);
  double exact = 0, magnitude = 0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = (float)((int)(next_random() % 20001) - 10000) / 100.0f;
    exact += x[i];
    magnitude += x[i] < 0 ? -x[i] : x[i];
  }
  float sum = -1.0f;
  status = wf_reduce_sum_f32_host(context, x, n, &sum);
  CHECK(status == WF_OK, "%s", wf_context_error(context));
  double error = sum - exact;
  CHECK((error < 0 ? -error : error) <= (double)n * magnitude / 16777216.0 + 1e-6,
        "sum %g, exact %g", (double)sum, exact);

  const float threshold = 12.5f;
  size_t count = 0, expected_count = 0;
  status = wf_compact_f32_host(context, x, n, threshold, kept, &count);
  CHECK(status == WF_OK, "%s", wf_context_error(context));
  for (size_t i = 0; i < n; ++i) {
    if (x[i] > threshold) {
      CHECK(expected_count < count && kept[expected_count] == x[i], "kept element %zu",
            expected_count);
      ++expected_count;
    }
  }
  CHECK(count == expected_count, "kept %zu, expected %zu", count, expected_count);

  uint32_t counts[17] = {0};
  uint32_t expected_counts[17] = {0};
  for (size_t i = 0; i < n; ++i) ++expected_counts[keys[i] % 17];
  status = wf_histogram_u32_host(context, keys, n, 17, counts);
  CHECK(status == WF_OK, "%s", wf_context_error(context));
  CHECK(memcmp(counts, expected_counts, sizeof counts) == 0, "histogram differs");

  /* NULL with n > 0 is an error with a message; n = 0 succeeds. */
  CHECK(wf_sort_u32_host(context, NULL, 5) == WF_ERROR_INVALID_INPUT, "NULL keys accepted");
  CHECK(strstr(wf_context_error(context), "keys is NULL") != NULL, "%s",
        wf_context_error(context));
  CHECK(wf_sort_u32_host(context, NULL, 0) == WF_OK, "%s", wf_context_error(context));
  CHECK(wf_reduce_sum_f32_host(context, NULL, 0, &sum) == WF_OK && sum == 0.0f, "empty sum");
  CHECK(wf_compact_f32_host(context, x, n, threshold, NULL, &count) == WF_ERROR_INVALID_INPUT,
        "NULL out accepted");
  CHECK(wf_histogram_u32_host(context, keys, n, 0, counts) == WF_ERROR_INVALID_INPUT,
        "0 bins accepted");
  CHECK(strstr(wf_context_error(context), "outside 1..4096") != NULL, "%s",
        wf_context_error(context));
  const char* origin = NULL;
  CHECK(wf_kernel_origin(context, "no_such_kernel", &origin) == WF_ERROR_INVALID_INPUT,
        "unknown kernel accepted");
  CHECK(wf_kernel_origin(context, "radix_sort_u32", &origin) == WF_OK && origin != NULL,
        "%s", wf_context_error(context));
  CHECK(wf_context_create(argv[1], NULL) == WF_ERROR_INVALID_INPUT, "NULL out accepted");

  /* Tuning from C, then a new context (a database's next start-up) runs the tuned schedule. */
  int tuned_now = -1;
  CHECK(wf_tune_kernel(context, "no_such_kernel", 2, &tuned_now) == WF_ERROR_INVALID_INPUT,
        "unknown kernel tuned");
  status = wf_tune_kernel(context, "affine_f32", 2, &tuned_now);
  CHECK(status == WF_OK && tuned_now >= 0, "%s", wf_context_error(context));
  wf_context* restarted = NULL;
  CHECK(wf_context_create(argv[1], &restarted) == WF_OK, "%s", wf_context_error(restarted));
  /* One line per size bucket, each tuned now. */
  CHECK(wf_kernel_origin(restarted, "affine_f32", &origin) == WF_OK &&
            strstr(origin, ": tuned for bucket ") != NULL &&
            strstr(origin, "default schedule") == NULL,
        "origin after tuning: %s", origin ? origin : wf_context_error(restarted));
  wf_context_destroy(restarted);

  check_segments_and_u64_pairs(context);
  free(keys);
  free(expected);
  free(x);
  free(kept);
  wf_context_destroy(context);
  printf("capi_test: %s\n", failures == 0 ? "all checks passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
