/* database_startup.cpp's twin in C, through the C API: open the default adapter and the cache,
 * load the tuned kernels, and run a small query on generated columns with the host-memory
 * calls, checking every result against the CPU.
 *
 *   database_startup_c [--cache DIR] [--rows N]        exit 0 when every result is right */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wgsl_forge/wgsl_forge.h"

static int compare_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return (x > y) - (x < y);
}

static int fail(wf_context* context, const char* what) {
  fprintf(stderr, "database_startup_c: %s: %s\n", what, wf_context_error(context));
  wf_context_destroy(context);
  return 3;
}

int main(int argc, char** argv) {
  const char* cache_dir = NULL;
  size_t rows = 1000003;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--cache") == 0) cache_dir = argv[i + 1];
    if (strcmp(argv[i], "--rows") == 0) rows = (size_t)strtoull(argv[i + 1], NULL, 10);
  }

  wf_context* context = NULL;
  if (wf_context_create(cache_dir, &context) != WF_OK) return fail(context, "opening");
  if (wf_load_all(context) != WF_OK) return fail(context, "loading the kernels");
  const char* origin = NULL;
  if (wf_kernel_origin(context, "radix_sort_u32", &origin) != WF_OK) return fail(context, "origin");
  printf("%s: radix_sort_u32 %s\n", wf_context_adapter_name(context), origin);

  float* price = malloc(rows * sizeof *price);
  float* expensive = malloc(rows * sizeof *expensive);
  uint32_t* customer = malloc(rows * sizeof *customer);
  uint32_t* expected = malloc(rows * sizeof *expected);
  uint64_t state = 20261201;
  for (size_t i = 0; i < rows; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    price[i] = (float)((state >> 33) % 10000) / 100.0f;
    customer[i] = expected[i] = (uint32_t)((state >> 17) % 100000);
  }

  size_t kept = 0;
  float sum = 0;
  uint32_t counts[64];
  if (wf_compact_f32_host(context, price, rows, 50.0f, expensive, &kept) != WF_OK ||
      wf_reduce_sum_f32_host(context, expensive, kept, &sum) != WF_OK ||
      wf_histogram_u32_host(context, customer, rows, 64, counts) != WF_OK ||
      wf_sort_u32_host(context, customer, rows) != WF_OK) {
    return fail(context, "the query");
  }

  size_t expected_kept = 0;
  double exact = 0;
  uint32_t expected_counts[64] = {0};
  for (size_t i = 0; i < rows; ++i) {
    if (price[i] > 50.0f) {
      if (expensive[expected_kept] != price[i]) return fail(context, "the filter differs");
      exact += price[i];
      ++expected_kept;
    }
    ++expected_counts[expected[i] % 64];
  }
  qsort(expected, rows, sizeof *expected, compare_u32);
  const double error = sum > exact ? sum - exact : exact - sum;
  int ok = kept == expected_kept && error <= 1e-5 * exact + 1e-3 &&
           memcmp(counts, expected_counts, sizeof counts) == 0 &&
           memcmp(customer, expected, rows * sizeof *customer) == 0;
  printf("query over %zu rows: %zu with price > 50, sum %.2f: %s\n", rows, kept, (double)sum,
         ok ? "all results correct" : "WRONG");
  free(price);
  free(expensive);
  free(customer);
  free(expected);
  wf_context_destroy(context);
  return ok ? 0 : 1;
}
