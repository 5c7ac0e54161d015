#pragma once
// The forge: certification (a kernel against its oracle on this adapter), tuning (the fastest
// certified schedule), auto-tune-all (every builtin not yet tuned for this topology), and the
// entry point a database calls at start-up to get its tuned kernels.

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/gpu.hpp"
#include "wgsl_forge/kernel_runner.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge::forge {

inline constexpr std::uint64_t kQuickCaseElements = 10000;

// Where the wall time of a tune or a certification went, in seconds, by what the calling thread
// was doing (or waiting for), so that the phases add up to the total: work done on other threads
// meanwhile (a case's inputs drawn and its outputs checked while the GPU runs the next case, the
// next tune's timing inputs drawn ahead) counts only for as long as the tune waits for it.
struct TimeBreakdown {
  double inputs = 0;    // waiting for inputs to be drawn: the timing problem's, and cases'
  double oracle = 0;    // waiting for the CPU oracles' checks of the certification runs' outputs
  double compile = 0;   // WGSL generated, pipelines created
  double gpu_runs = 0;  // certification runs: buffers, guards, uploads, dispatches, read-backs
  double upload = 0;    // the timing problem's inputs uploaded to the GPU
  double bind = 0;      // each timed candidate's buffers made and the uploaded inputs copied in
  double warmup = 0;    // the GPU kept busy until its clocks are up (gpu::TimingOptions)
  double timing = 0;    // timing samples
  // The search's bookkeeping: the schedule space and plan made, the journal's measurements read
  // and stored, the winner's earlier certification looked up, the manifest built.
  double bookkeeping = 0;
  double total = 0;  // from the start of the tune to its manifest

  // The total less every phase: time no phase names (0 when every second is attributed).
  double unattributed() const;
  TimeBreakdown& operator+=(const TimeBreakdown& other);
};

struct CertifyOptions {
  // WGSL to certify instead of the generated source; it must follow the generated kernel's
  // interface (bindings, entry points, dispatch plan).
  std::optional<std::string> source;
  // Seeds of the cases are drawn from this one (recorded in the manifest); 0 draws a fresh one.
  std::uint64_t seed = 0;
  // Only the cases of at most kQuickCaseElements elements (the structural edges: empty, one,
  // around a workgroup and a tile, small primes); used to screen tuning candidates, whose winner
  // then passes the full set.
  bool quick = false;
  // How many times the whole set of cases runs, each time with fresh seeds drawn from `seed`;
  // the manifest holds every round's cases.
  std::uint32_t rounds = 1;
  // Runs of each case on its inputs. From the second on, every output must be the first run's
  // byte for byte where the kernel is deterministic (KernelDefinition::deterministic), else the
  // case fails: a kernel that is right only some of the time is caught.
  std::uint32_t runs_per_case = 1;
  // Where to add the time spent on inputs, oracles, compilation and GPU runs; may be null.
  TimeBreakdown* breakdown = nullptr;
};

// How a tuned winner is certified before it is published: the full certification in three
// rounds of fresh seeds, every case run twice.
inline constexpr std::uint32_t kWinnerRounds = 3;
inline constexpr std::uint32_t kWinnerRunsPerCase = 2;

// Whether `certification` is what a tuned winner's certification is: certified, every case run
// at least kWinnerRunsPerCase times and in at least kWinnerRounds rounds (seeds). A tune whose
// winner has such evidence on this topology for the same code (the winner of another size
// bucket) publishes with it rather than certifying again.
bool certified_as_winner(const CertificationManifest& certification);

// Runs every certification case of `kernel` with `schedule` (or the given source) and returns
// the manifest; the verdict is in manifest.verdict. Errors are for what prevented running at
// all: a bad schedule (kInvalidInput), WGSL that does not compile (kCompilation), a validation
// or device failure.
Result<CertificationManifest> certify(gpu::Device& device, const kernels::KernelDefinition& kernel,
                                      const Schedule& schedule, const CertifyOptions& options);

// certify() for a kernel whose pipelines are compiled already (a tune certifies the pipelines
// it then times). `options.source` is not used: `prepared` holds the WGSL that runs.
Result<CertificationManifest> certify_prepared(gpu::Device& device,
                                               const kernels::KernelDefinition& kernel,
                                               PreparedKernel& prepared, const Schedule& schedule,
                                               const CertifyOptions& options);

// The first failing case of a rejected manifest, in words ("case 'n=257 uniform' (seed 42):
// element 256 is 3.5, expected 4").
std::string first_failure(const CertificationManifest& manifest);

struct TuneProgress {
  std::string kernel_id;
  std::size_t candidate = 0;   // candidates tried so far, this one included
  std::size_t candidates = 0;  // candidates the search will try in all, as far as is known
  // "certifying" and "timing" (a candidate starts that step), "timed" and "failed" (its
  // outcome), "finalists" (the re-timing rounds start), "certifying winner" (the winner's full
  // certification starts), "published" (the tune is done), "warning" (see message); and before
  // the search, "resumed" (a candidate timed by an earlier search, with its timing) and "failed
  // before" (a candidate that failed in an earlier search, with its failure: not tried again).
  std::string stage;
  // The candidate's schedule, for "timed" and "failed".
  std::optional<Schedule> schedule;
  // Its first timing, for "timed" (the finalists' are refined later).
  std::optional<TimingSummary> timing;
  // Why it failed, for "failed".
  std::optional<CandidateFailure> failure;
  // Where the tune's time went, for "published".
  std::optional<TimeBreakdown> breakdown;
  // For "warning": something the tune could not do that costs only time (a measurement that
  // could not be stored or read).
  std::string message;
};

// The time left in a run of tunes (auto-tune-all), estimated from the progress reports seen so
// far: each tune's stages (preparing its inputs, screening its candidates, the finals, the
// winner's certification) are timed as they happen, and what is left of the current tune and of
// the tunes to come is priced at the averages of the tunes done, so that the estimate covers the
// whole run. None before the first tune is done: there is nothing to go by.
class RunEstimate {
 public:
  // `tunes`: how many tunes the run will do (cached entries cost nothing and are not counted).
  RunEstimate(std::size_t tunes, std::chrono::steady_clock::time_point start);
  void observe(const TuneProgress& progress, std::chrono::steady_clock::time_point now);
  std::optional<double> seconds_left(std::chrono::steady_clock::time_point now) const;

 private:
  enum class Phase { kPreparing, kCandidates, kFinals, kWinner };
  void enter(Phase phase, std::chrono::steady_clock::time_point now);

  // Seconds spent in each phase by the tunes done, and their candidates.
  struct Spent {
    double preparing = 0;
    double candidates = 0;
    double finals = 0;
    double winner = 0;
    std::size_t candidate_count = 0;
  };
  std::size_t tunes_;
  std::size_t completed_ = 0;
  Phase phase_ = Phase::kPreparing;
  std::chrono::steady_clock::time_point stage_started_;
  Spent done_;
  std::size_t tried_ = 0;
  std::size_t planned_ = 0;
};

// A tune's timing inputs (the problem it times every candidate at, up to gigabytes), drawn on a
// thread of their own before the tune needs them: auto_tune_all draws the next entry's while the
// GPU times and certifies this one's candidates, so that drawing them costs no wall time of its
// own. tune() takes them when they are of its kernel and problem (TuneOptions::timing_inputs),
// else it draws its own.
class TimingInputs {
 public:
  // Starts drawing what tune() would draw for `kernel` at `problem` from `seed` (the value
  // profile of the kernel's first certification case), once `after` (when given) is drawn: each
  // drawing takes every core, and the earlier one is needed first.
  static std::shared_ptr<TimingInputs> draw_ahead(const kernels::KernelDefinition& kernel,
                                                  const kernels::Problem& problem,
                                                  std::uint64_t seed,
                                                  const TimingInputs* after = nullptr);
  // Draws them on this thread.
  static kernels::CaseInputs draw(const kernels::KernelDefinition& kernel,
                                  const kernels::Problem& problem, std::uint64_t seed);
  // Whether these are `kernel`'s inputs at `problem` and not yet taken.
  bool fits(const kernels::KernelDefinition& kernel, const kernels::Problem& problem) const;
  // Waits until they are drawn and hands them over (once; an exception of the drawing is
  // rethrown here, as it would have been by drawing them on this thread).
  kernels::CaseInputs take();

 private:
  std::string kernel_id_;
  std::string problem_;
  std::future<kernels::CaseInputs> drawn_;
  std::shared_future<void> finished_;  // ready once drawn_ is (also after it is taken)
};

struct TuneOptions {
  // The most candidates one kernel may time (the default schedule is always one of them).
  std::uint32_t budget = 12;
  // The problem to time at; default: the bucket's problem, else kernel.tuning_problem(adapter is
  // a CPU).
  std::optional<kernels::Problem> problem;
  // The size bucket tuned for: its problem is timed (unless `problem` is given), and a bucket
  // other than the kernel's main one is recorded in the manifest (TuningContext::bucket), which
  // decides the entry's key. Default: the main bucket.
  std::optional<kernels::SizeBucket> bucket;
  std::uint64_t seed = 0;  // 0: fresh
  gpu::TimingOptions timing;
  std::function<void(const TuneProgress&)> progress;
  // The watchdog while a candidate is screened (quick certification and its first timing): a
  // wait for the GPU longer than this fails the candidate as a timeout. Default: the device's own
  // wait timeout, which the winner's full certification always uses.
  std::optional<std::chrono::milliseconds> candidate_timeout;
  // How long to wait for a candidate whose wait timed out to leave the GPU before giving up on
  // the device (a hung kernel is ended only by the driver, which then loses the device).
  std::chrono::milliseconds drain_timeout{std::chrono::minutes(5)};
  // Where each candidate's outcome is stored as soon as it is known (a MeasurementRecord), and
  // where a search finds what earlier ones measured on this topology and kernel revision: a
  // timing at the same problem resumes its candidate (not measured again), and a schedule that
  // failed there, at any problem, is never tried again nor published. Null: neither.
  const ManifestCache* journal = nullptr;
  // Whether timings in the journal resume their candidates. A re-tune (AutoTuneOptions::retune)
  // measures afresh; failures count either way.
  bool resume = true;
  // The stored winner of a re-tune. It is a candidate beyond the budget and always a finalist,
  // re-timed in the same interleaved rounds as the others, and it wins its ties, even against
  // the default: the search's winner is then either this schedule or one whose median is
  // faster than its own by more than the noise (see within_noise in tune.cpp), never slower. A
  // stored winner that fails in this search (it no longer certifies or runs here) competes no
  // more, and its failure is recorded like any candidate's.
  std::optional<Schedule> incumbent;
  // The timing problem's inputs, drawn ahead (see TimingInputs); null or not fitting: the tune
  // draws its own. A tune draws the same seeds from `seed` either way, so the candidates'
  // certification seeds do not depend on whether the inputs were drawn ahead.
  std::shared_ptr<TimingInputs> timing_inputs;
};

struct TuneOutcome {
  TuningManifest manifest;
  CertificationManifest certification;  // the winner's full certification
  kernels::Problem problem;
  TimeBreakdown breakdown;
  std::vector<std::string> warnings;  // TuneProgress's "warning" messages
};

// Searches the legal schedule space: exhaustive when it fits the budget, otherwise the default,
// a seeded random sample and then the neighbours of the best (one knob one step away). Every
// candidate is certified before it is timed; compile, validation, oracle failures and waits that
// time out (the device's wait_timeout is the watchdog) are recorded and the search goes on. The
// best few are timed again, interleaved, and the lowest median wins; a finalist within noise of
// the winner is a tie, and the default wins its ties. A lost device ends the search with an
// error, and nothing measured on it is returned.
Result<TuneOutcome> tune(gpu::Device& device, const kernels::KernelDefinition& kernel,
                         const TuneOptions& options);

// Whether `problem` can run at all on this device, checked before anything is allocated: the
// kernel's own limits (KernelDefinition::check_problem), the adapter's maxBufferSize and
// maxStorageBufferBindingSize for every buffer of the first schedule's plan, and the host memory
// available for the copies that tuning and benchmarks make (and, on a CPU adapter, for the
// buffers themselves). A kInvalidInput error names the limit. tune() and bench_kernel() check.
Status check_problem_fits(const gpu::Device& device, const kernels::KernelDefinition& kernel,
                          const kernels::Problem& problem);

// Throughput of a kernel at a problem for a time, in the unit its users compare: TFLOP/s for
// GEMM, G keys/s or G pairs/s for the sorts (WorkAmount::items), GB/s for the rest; 0 for no time.
std::pair<double, std::string> throughput(const kernels::KernelDefinition& kernel,
                                          const kernels::Problem& problem, double median_ns);

struct AutoTuneRow {
  std::string kernel_id;
  std::string bucket;  // the size bucket's label (kernels::SizeBucket)
  enum class Status {
    kTuned,           // searched and stored (replacing what was there, when `decision` says so)
    kCached,          // the cache already had it
    kKept,            // re-tuned, and the stored winner won again: the entry is left byte for byte
    kTunedElsewhere,  // another process stored a valid entry while this one searched
    kFailed,
  } status = Status::kFailed;
  std::optional<TuningManifest> manifest;  // what the cache holds for it afterwards
  std::string message;                     // why it failed
  // What a re-tune did with the entry that was there, in words; empty when there was none.
  std::string decision;
  std::size_t certified_cases = 0;
  // Where the time of the search went, when one ran, and what it warned of.
  std::optional<TimeBreakdown> breakdown;
  std::vector<std::string> warnings;
};
const char* auto_tune_status_name(AutoTuneRow::Status status);

struct AutoTuneOptions {
  TuneOptions tune;
  // Tune again where the cache has a result. The stored winner competes as a finalist
  // (TuneOptions::incumbent) and the entry is replaced, atomically, only by a certified
  // schedule that is faster beyond noise; a failed or interrupted re-tune leaves it untouched.
  bool retune = false;
  // With retune: replace the entry with the new search's winner whatever it is, and whatever
  // another process stored meanwhile (the stored winner does not compete).
  bool force = false;
  // The size buckets to tune, by label (kernels::SizeBucket::label, or "main" for each kernel's
  // main bucket); empty: every bucket. A kernel with none of these labels is left out.
  std::vector<std::string> sizes;
  // Told before each (kernel, bucket) is looked at: its index among all of them, their count.
  std::function<void(std::size_t index, std::size_t count, const std::string& kernel_id)> on_kernel;
  // How long a process's claim on a (kernel, bucket) lasts unless renewed (it is renewed every
  // third of it while the process tunes): one that dies mid-tune holds up the entry at most this
  // long. Claims are leases (leases.hpp) on the remote store (ManifestCache::remote) while it
  // answers, else lease files in the cache directory, so processes sharing either split the work.
  std::chrono::milliseconds lease_duration{30000};
};

// The size buckets of `kernel` on this device (KernelDefinition::size_buckets, scaled for a CPU
// adapter), and those of them that `sizes` selects (AutoTuneOptions::sizes).
std::vector<kernels::SizeBucket> size_buckets(const gpu::Device& device,
                                              const kernels::KernelDefinition& kernel);
kernels::SizeBucket main_bucket(const gpu::Device& device, const kernels::KernelDefinition& kernel);
std::vector<kernels::SizeBucket> selected_buckets(const gpu::Device& device,
                                                  const kernels::KernelDefinition& kernel,
                                                  const std::vector<std::string>& sizes);

// Stores certification evidence. Certification entries are immutable and keyed by what was
// certified (kernel, revision, source, schedule, adapter, topology), not by the seeds: when an
// earlier run of the same kernel already left valid evidence, that entry is kept and its path
// returned (the new run re-checked it with fresh inputs).
Result<std::filesystem::path> store_certification_evidence(const ManifestCache& cache,
                                                           const CertificationManifest& manifest);

// Tunes one kernel unless the cache has a usable entry for it on this topology (or
// options.retune), and stores its tuning and certification manifests; a damaged entry is
// replaced, one that cannot be read for another reason is reported and left. Never fails: the row
// says what happened. Nothing in the cache changes before the search has a certified winner. Losing
// the race to another process that stored a valid current entry meanwhile is success
// (kTunedElsewhere).
// `bucket` says which entry (ManifestCache::bucket_key) and, unless options.tune.problem is
// given, which problem.
AutoTuneRow tune_and_store(gpu::Device& device, const ManifestCache& cache,
                           const kernels::KernelDefinition& kernel,
                           const kernels::SizeBucket& bucket, const AutoTuneOptions& options);
// The same for the kernel's main bucket.
AutoTuneRow tune_and_store(gpu::Device& device, const ManifestCache& cache,
                           const kernels::KernelDefinition& kernel, const AutoTuneOptions& options);

// True when tune_and_store would tune `kernel`, and so write to the cache: options.retune, no
// entry, a damaged one (corrupt, not a regular file), or an entry this build does not use
// (find_unusable_tuning: another kernel revision, an illegal winner, a source hash that is not
// the regenerated WGSL's). False for a usable entry and for one that cannot be read for another
// reason (permissions, I/O; tune_and_store reports it without replacing it), so that a caller
// can prove the cache writable only when it will be written.
bool would_tune(const gpu::Device& device, const ManifestCache& cache,
                const kernels::KernelDefinition& kernel, const kernels::SizeBucket& bucket,
                const AutoTuneOptions& options);
bool would_tune(const gpu::Device& device, const ManifestCache& cache,
                const kernels::KernelDefinition& kernel, const AutoTuneOptions& options);

// Why this build does not use a tuning entry that parses (so every invariant of
// TuningManifest::create holds in it): the kind cache verify reports (kStale, kIllegalSchedule
// or kSourceMismatch) and the reason, one sentence naming the kernel.
struct UnusableTuning {
  EntryHealth health = EntryHealth::kStale;
  std::string reason;
};

// nullopt when `manifest` may be used for `kernel`: it was tuned for the kernel's current
// revision, its winner is a legal schedule of that revision (check_knobs; with `device`, also
// check_schedule against its limits) and its source hash is that of the WGSL the generator writes
// for the winner now. The checks the parser cannot make, because they need the kernel.
std::optional<UnusableTuning> find_unusable_tuning(const kernels::KernelDefinition& kernel,
                                                   const TuningManifest& manifest,
                                                   const kernels::DeviceCapabilities* device);

// ManifestCache::verify, then every valid tuning entry checked by find_unusable_tuning (without a
// device: cache verify opens none), so that an entry the library would not use is reported by
// name and kind, and the report is not clean.
Result<VerifyReport> verify_cache(const ManifestCache& cache);

// Tunes each size bucket of each of `kernels` (those options.sizes selects) not yet tuned for
// this adapter's topology, in order (a kernel's buckets smallest first), and stores the tuning
// and certification manifests; asks the cache first. One row per (kernel, bucket). A failure of
// one (even a corrupt cache entry) is reported in its row and the others go on; once the device
// is lost, every one left gets a row that says so.
// With a remote store that is online, nodes of one topology split the work: each (kernel,
// bucket) to tune is claimed with a lease (RemoteStore::claim, AutoTuneOptions::lease_duration)
// before it is tuned and released after; one that another node holds is passed over and looked
// at again (every quarter of the lease, at most every second) until that node's entry is there,
// which this node then uses (kTunedElsewhere), or its lease is gone (released without an entry,
// or expired with a dead node), which this node then claims and tunes. Rows stay in order.
std::vector<AutoTuneRow> auto_tune_all(gpu::Device& device, const ManifestCache& cache,
                                       std::span<const kernels::KernelDefinition* const> kernels,
                                       const AutoTuneOptions& options);
// The same for every builtin kernel (kernels::builtin_kernels()).
std::vector<AutoTuneRow> auto_tune_all(gpu::Device& device, const ManifestCache& cache,
                                       const AutoTuneOptions& options);

// The adapter's copy ceiling for `bytes` moved (half read, half written): the fastest of a few
// vectorised copy kernels.
struct CopyCeiling {
  double median_ns = 0;
  std::uint64_t bytes = 0;
  std::string description;
};
Result<CopyCeiling> measure_copy_ceiling(gpu::Device& device, std::uint64_t bytes,
                                         const gpu::TimingOptions& timing);

// One pass of a plan. The passes run in order on the same buffers, so every prefix of a plan is
// a valid run: a pass's time is the median of the plan cut after it minus that of the plan cut
// before it (clamped at 0; noise can make it slightly negative for very short passes).
struct PassTime {
  std::string entry_point;
  std::uint64_t workgroups = 0;
  double median_ns = 0;
  double cumulative_median_ns = 0;  // the plan up to and including this pass
};

// One kernel's tuned schedule (from the cache, when the size bucket nearest to `problem` is
// tuned for this topology) and default schedule,
// timed at `problem` on the same inputs; with `pass_times`, also each pass of the first of them
// (the tuned one when there is one).
struct BenchRow {
  std::string kernel_id;
  kernels::Problem problem;
  std::string bucket;  // the size bucket nearest to the problem, whose tuning is timed
  std::optional<Schedule> tuned_schedule;  // the cache's winner, or the schedule given instead
  std::optional<TimingSummary> tuned;
  bool given = false;         // tuned_schedule was given by the caller, not taken from the cache
  bool given_source = false;  // and timed with the caller's WGSL written to its plan
  Schedule default_schedule;
  TimingSummary default_timing;
  std::vector<PassTime> passes;
};
Result<BenchRow> bench_kernel(gpu::Device& device, const ManifestCache& cache,
                              const kernels::KernelDefinition& kernel,
                              const kernels::Problem& problem, const gpu::TimingOptions& timing,
                              bool pass_times = false,
                              const std::optional<Schedule>& given = std::nullopt,
                              const std::optional<std::string>& given_source = std::nullopt);

struct KernelLibraryOptions {
  // Runs the quick certification cases (CertifyOptions::quick, fresh seeds) of every tuned
  // winner before using it, and falls back to the default schedule if it fails them: the cache
  // records that the winner was certified, and this checks it again on this adapter and driver,
  // for a cache that others can write (cache.hpp, trust model) or a driver that changed. Off by
  // default: on lavapipe it made loading the catalog 3.7 times slower, 30-550 ms per kernel
  // (docs/performance.md, "Re-certifying tuned winners at load").
  bool recertify_winners = false;
};

// What a database calls at start-up: the tuned kernels of this adapter, ready to run.
class KernelLibrary {
 public:
  KernelLibrary(gpu::Device& device, ManifestCache cache, KernelLibraryOptions options = {})
      : device_(&device), cache_(std::move(cache)), options_(options) {}

  struct ReadyKernel {
    const kernels::KernelDefinition* definition = nullptr;
    PreparedKernel prepared;
    bool tuned = false;  // false: the default schedule, because no usable tuning is cached
    std::string origin;  // "tuned: ..." or why the default is used, naming the entry
  };

  // A kernel ready at every size: the schedule of each of its size buckets
  // (forge::size_buckets), where buckets that chose the same schedule share one ReadyKernel.
  struct BucketedKernel {
    const kernels::KernelDefinition* definition = nullptr;
    std::vector<kernels::SizeBucket> buckets;
    std::vector<std::shared_ptr<ReadyKernel>> ready;  // one per bucket, in the same order
    // Where each bucket's schedule came from (a shared ReadyKernel's origin is its first
    // bucket's).
    std::vector<std::string> bucket_origins;

    // The kernel of the bucket nearest to `problem` (kernels::nearest_buckets).
    ReadyKernel& for_problem(const kernels::Problem& problem) const;
    // "<label>: <origin>" of every bucket, one per line.
    std::string origins() const;
  };

  // The pipelines of `kernel_id` with its schedule tuned for this topology at its main size
  // bucket, or the default schedule (tuned = false, origin says why) when it has not been tuned
  // here yet, or its entry cannot be read or used (find_unusable_tuning), or fails its
  // re-certification.
  Result<ReadyKernel> load(std::string_view kernel_id);
  // The same for the bucket nearest to `problem`. When that bucket has no usable tuning, the
  // nearest bucket that has one gives the schedule (origin names both); with none, the default.
  Result<ReadyKernel> load(std::string_view kernel_id, const kernels::Problem& problem);
  // Every bucket of each of `kernel_ids`, all their pipelines compiled at once; the first kernel
  // that fails gives the error.
  Result<std::vector<BucketedKernel>> load_bucketed(std::span<const std::string_view> kernel_ids);
  // The kernels of `kernel_ids` as load gives them, with all their pipelines compiled at once
  // (PreparedKernel::prepare_all); the first kernel that fails gives the error.
  Result<std::vector<ReadyKernel>> load(std::span<const std::string_view> kernel_ids);
  // One kernel as load(kernel_id) gives it, for a definition outside the catalog too (a
  // program's own kernel, a test's), tuned in the cache under its id.
  Result<ReadyKernel> load(const kernels::KernelDefinition& kernel);

 private:
  // A kernel's schedule chosen and its WGSL generated: a ReadyKernel but for the pipelines.
  struct ChosenKernel {
    const kernels::KernelDefinition* definition = nullptr;
    GeneratedKernel generated;
    bool tuned = false;
    std::string origin;
  };
  // The schedule for buckets[wanted]: that bucket's tuning, else the nearest tuned bucket's.
  Result<ChosenKernel> choose(const kernels::KernelDefinition& kernel,
                              const std::vector<kernels::SizeBucket>& buckets, std::size_t wanted);
  // The bucket nearest to `problem`, or the main bucket.
  Result<ChosenKernel> choose_for(const kernels::KernelDefinition& kernel,
                                  const std::optional<kernels::Problem>& problem);
  Result<ReadyKernel> load_one(const kernels::KernelDefinition& kernel,
                               const std::optional<kernels::Problem>& problem);
  // The chosen kernels' pipelines, all compiled at once.
  Result<std::vector<ReadyKernel>> prepare(std::vector<ChosenKernel> chosen);

  gpu::Device* device_;
  ManifestCache cache_;
  KernelLibraryOptions options_;
};

}  // namespace wgsl_forge::forge
