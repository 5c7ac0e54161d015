#!/usr/bin/env bash
# What CI runs: sets everything up (scripts/setup.sh), then the stages below; all of them unless
# some are named.
#
#   scripts/test.sh [ci] [asan] [tsan] [fuzz]
#
#   ci    build with warnings as errors, clang-format check, the whole test suite on lavapipe,
#         then install the library and use it from outside the tree (scripts/install-test.sh)
#   asan  the whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer, and leak
#         checks on the tests that do not load Dawn
#   tsan  the cache's tests (threads, forked writers, Redis) under ThreadSanitizer, built alone
#   fuzz  the manifest parser under libFuzzer for 60 s, the bundle parser for 30 s (scripts/fuzz.sh)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

stages=("$@")
[ "${#stages[@]}" -eq 0 ] && stages=(ci asan tsan fuzz)

# Tests that never load Dawn (model, cache, kernel definitions without a device).
no_gpu_tests='^(Blake3Test|TimingSummaryTest|ManifestJsonTest|TuningManifestTest|CertificationManifestTest|ManifestCacheTest|CacheFaultTest|CacheRootResolutionTest|BundleTest|RemoteStoreTest|RemoteAddressTest|LocalLeasesTest|KernelCatalogTest|KernelCatalogGoldenTest|ReportPageTest)\.|manifest_parser|bundle_parser'

for stage in "${stages[@]}"; do
  echo "[test] stage $stage"
  stage_start=$SECONDS
  case "$stage" in
    ci)
      bash scripts/setup.sh ci
      echo "[test] clang-format check"
      git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run --Werror
      # Two tests at a time, as in the asan stage below: most of a test's time is one thread, and
      # every test has its own directories, caches and ports (tests/CMakeLists.txt says which run
      # alone and which starts first).
      ctest --preset ci --timeout 600 --parallel 2
      WGSL_FORGE_INSTALL_TEST_BUILD="$repo_root/build/ci" bash scripts/install-test.sh
      ;;
    asan)
      bash scripts/setup.sh asan
      # LeakSanitizer stops the world to scan for leaks at exit and crashes ("Tracer caught
      # signal 11") among Dawn's and lavapipe's threads; leaks are checked where Dawn is absent.
      # Sixteen instrumented tuner processes at once exhaust a 24 GiB machine (the kernel kills
      # them, exit 137); the ci stage runs that test, and capi_python, whose interpreter is not
      # built with ASan and so cannot load the instrumented libwgsl_forge.so. AutoTuneAllTwice tunes
      # the whole catalog twice (3 minutes instrumented, the longest test by far): the ci stage
      # runs it; here the tuning, cache and start-up code it drives runs in the smaller tests.
      # FleetTest (three instrumented tuner processes per case against Redis), AdapterWorkersTest
      # (worker processes tuning on lavapipe) and the catalog's sample of every schedule space
      # (compiling on lavapipe) also run in the ci stage only: the remote store's, the local
      # leases' and certification's code runs here in RemoteStoreTest, LocalLeasesTest and the
      # per-kernel catalog tests. RetuneTest's two longest (re-tunes at
      # full size, 4 minutes instrumented) also run in the ci stage only: so does the comparison of
      # a re-tune's winner with the stored one; its tuning and cache code runs here in TuneTest,
      # RetuneTest.ADamagedEntry and ForgeCliTest.AKilledRetuneLeavesTheStoredEntryByteForByte.
      # The catalog's runs without Dawn's bounds checks differ from the runs with them only in a
      # toggle of Dawn's (uninstrumented), and the u64 sort's sample of schedules (181 s
      # instrumented against 46 s in the ci stage; its cases go up to 4 M pairs) runs its host code
      # here in RadixSortPathsTest: both run in the ci stage only.
      # Two tests at a time: most of a test's time is one thread (Tint, lavapipe's LLVM compiling
      # a pipeline, an instrumented oracle), and every test has its own directories, caches and
      # ports (TunerFaultTest runs alone: tests/CMakeLists.txt). The tests that never load Dawn
      # run once, with leak checks, after the others.
      ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --preset asan --timeout 1200 --parallel 2 \
        -E "SixteenConcurrentTuners|AutoTuneAllTwice|capi_python|FleetTest|AdapterWorkersTest|StartingPointsAndASample|RetuneTest.ARetuneKeeps|RetuneTest.LosingTheRace|WithoutBoundsChecks|DefaultAndThreeOtherSchedulesMatchTheOracle/radix_sort_pairs_u64|$no_gpu_tests"
      ASAN_OPTIONS=detect_leaks=1 ctest --preset asan --timeout 600 -R "$no_gpu_tests"
      ;;
    tsan)
      bash scripts/setup.sh tsan
      ctest --preset tsan --timeout 600
      ;;
    fuzz)
      bash scripts/fuzz.sh 60
      ;;
    *)
      echo "[test] unknown stage '$stage' (known: ci asan tsan fuzz)" >&2
      exit 2
      ;;
  esac
  echo "[test] stage $stage took $((SECONDS - stage_start)) s (all stages so far: $SECONDS s)"
done
