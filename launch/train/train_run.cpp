// TrainRun: data checks, run directory, resume, model, data parallelism, optimizer, header.
#include "launch/train/train_run.h"

#include <fmt/ranges.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "core/kernels/gemm.h"
#include "data/epochs.h"
#include "data/file_util.h"
#include "data/hf_bpe.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "launch/config/config.h"
#include "launch/io/checkpoint_tensors.h"
#include "launch/io/model_io.h"
#include "launch/train/exec_setup.h"
#include "launch/train/model_passes.h"
#include "optim/adamw.h"
#include "parallel/scalar_reduce.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

// The data-parallel side over the DP group: gradient buckets that all-reduce (sum, since every
// rank scales its loss by 1 / global tokens), or reduce-scatter for ZeRO-1. GPT-2's tied
// embedding across pipeline stages is final only after the step's sum over its two stages (a
// late contribution). adamw8bit: buckets aligned to its blocks of 2048 (optim/zero_adamw.h).
std::unique_ptr<DataParallel> make_data_parallel(ExecContext& ctx, const RankModel& model,
                                                 Communicator& dp, const RunConfig& cfg) {
  DataParallelOptions o;
  o.buckets.bucket_bytes = static_cast<int64_t>(cfg.parallel.bucket_mb * 1048576.0);
  o.buckets.first_bucket_bytes = static_cast<int64_t>(cfg.parallel.first_bucket_mb * 1048576.0);
  o.buckets.comm_dtype = cfg.parallel.allreduce_dtype_value();
  o.buckets.op = ReduceOp::Sum;
  o.shard_optimizer = cfg.optim.zero == 1;
  if (cfg.optim.name == "adamw8bit") {  // ZeRO-1 shards hold whole 8-bit blocks
    o.buckets.align = kAdam8bitBlock;
    o.buckets.align_min_numel = kAdam8bitMinNumel;
  }
  return std::make_unique<DataParallel>(ctx, model.parameters(), model.late_parameters(), dp, o);
}

// data.global_batch and data.epochs applied to the layout: grad_accum derived from the global
// batch over `dp` data-parallel ranks, and train.steps 0 (not set, with data.epochs) replaced
// by the steps of data.epochs passes over the training data.
RunConfig resolve_data_layout(RunConfig cfg, int dp) {
  DataConfig& d = cfg.data;
  if (d.global_batch > 0) {
    const int64_t per_micro = static_cast<int64_t>(d.micro_batch) * dp;
    BRAID_USER_CHECK(d.global_batch % per_micro == 0,
                     "data.global_batch {} is not a multiple of data.micro_batch {} x {} "
                     "data-parallel ranks = {}; use a multiple of {} (such as {}) or another "
                     "micro_batch",
                     d.global_batch, d.micro_batch, dp, per_micro, per_micro,
                     std::max<int64_t>(per_micro, d.global_batch / per_micro * per_micro));
    const int accum = static_cast<int>(d.global_batch / per_micro);
    BRAID_USER_CHECK(d.grad_accum == 1 || d.grad_accum == accum,
                     "data.grad_accum is {} but data.global_batch {} over {} data-parallel ranks "
                     "of data.micro_batch {} needs {}; leave grad_accum unset (it is derived)",
                     d.grad_accum, d.global_batch, dp, d.micro_batch, accum);
    d.grad_accum = accum;
  }
  if (cfg.train.steps == 0) {
    BRAID_CHECK(d.epochs > 0, "train.steps 0 without data.epochs");
    const TokenShard shard((fs::path(d.dir) / "train.bin").string());
    const std::optional<TokenShard> flags = open_sample_flags(shard);
    EpochStream stream(index_epoch_units(shard, flags ? &*flags : nullptr, d), d);
    const int64_t per_step = static_cast<int64_t>(d.micro_batch) * d.grad_accum * dp;
    const int64_t steps = (stream.total_sequences() + per_step - 1) / per_step;
    BRAID_USER_CHECK(steps <= std::numeric_limits<int>::max(),
                     "data.epochs {} takes {} steps; set train.steps", d.epochs, steps);
    cfg.train.steps = static_cast<int>(steps);
  }
  return cfg;
}

}  // namespace

TrainRun::TrainRun(const RunConfig& cfg_in, const std::string& config_path_in,
                   const DistRun& dist_in)
    : cfg(resolve_data_layout(resolve_init_from(cfg_in), dist_in.dims.dp_size())),
      config_path(config_path_in),
      dist(dist_in),
      dims(dist_in.dims),
      run_dir(fs::path(cfg.run.dir) / cfg.run.name),
      data_dir(cfg.data.dir),
      train_path((data_dir / "train.bin").string()),
      val_path((data_dir / "val.bin").string()),
      tok_path(tokenizer_file_in(data_dir.string())),
      ckpt(run_dir.string(), cfg.checkpoint.keep_last) {
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
  // The layout: rank 0 (`lead`) alone prints, writes metrics and records, and commits
  // checkpoints; DP rank 0 of every (tp, pp) shard writes that shard's checkpoint files.
  const bool lead = dims.lead();
  const int dp = dims.dp_size();
  check_rank_layout(cfg, dims.tp_size(), dims.pp_size(), dp);
  check_data();  // a bad shard fails before anything is written
  fs::create_directories(run_dir);
  if (lead) run_lock.emplace(run_dir.string());
  log.open_rank_log(run_dir, dims.world_size() > 1 ? dims.rank() : -1);
  // QLoRA: the base stays by reference; the manifests record its files' checksums.
  quantised_base = quantised_base_record(cfg.lora);
  std::optional<LoadedCheckpoint> ck = load_resume_checkpoint();

  // One rank's execution context: allocator, profiler and GEMM plan (launch/train/exec_setup.h).
  // The device: train.device (auto picks a GPU where the build and the machine allow).
  // Several ranks: run_train placed each on the GPU of its local rank (named in its layout
  // line) before it built the groups.
  if (dist.device) {
    device_choice = *dist.device;
    ctx = dist.ctx;
  } else {
    device_choice = choose_train_device(cfg);
  }
  if (!ctx)
    ctx =
        make_context(device_choice.device, cfg.data.seed, cfg.train.tf32, cfg.train.deterministic);
  // Weights in every layout come from whole tensors: run.init_from's before the split, a
  // resumed checkpoint's cut to each rank's part.
  model = std::make_unique<RankModel>(*ctx, cfg,
                                      RankModelComms{&dims.tp(), &dims.pp(), dims.embedding()},
                                      cfg.run.init_from, ck ? &ck->model : nullptr, lead);
  // Buckets bind the gradients first, so the f32 masters of the optimizer share the bucket
  // views; AdamW or ZeRO-1's sharded AdamW, in MixedPrecision for bf16/fp16 (16-bit weights
  // from here).
  data_parallel = make_data_parallel(*ctx, *model, dims.dp(), cfg);
  opt = make_optimizer(*ctx, cfg, model->parameters(), *data_parallel, {&dims.tp(), &dims.pp()});
  overflow_test.emplace(cfg.train, dist_in.faults);
  layout = ParallelLayout{dims.world_size(),      dp, dims.tp_size(), dims.pp_size(),
                          opt->sharded() ? 1 : 0, {}};
  log.rank_line(fmt::format("rank {} of {} ({}), coordinates dp {} tp {} pp {}, ZeRO {}, {} "
                            "parameters held",
                            dims.rank(), layout.ranks, dims.str(), dims.coord().dp,
                            model->tp_rank(), model->stage(), layout.zero, model->local_numel()) +
                (device_choice.device.is_cpu() ? std::string() : ", on " + device_choice.reason));
  stop.emplace();
  if (ck) {
    resume(*ck);
    ck.reset();  // unmaps the files
  } else if (!cfg.run.init_from.empty() && lead) {
    std::printf("initialised from %s\n", cfg.run.init_from.c_str());
  }
  // ---- the run record: config (kept across resumes), version and machine ----
  const MachineInfo machine = machine_info(ctx->gemm());
  {
    // Every rank's host and device, for run.json (collective over the world).
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    for (const std::string& s :
         gather_strings(dims.world(), std::string(host) + '\n' + device_choice.reason)) {
      const size_t cut = s.find('\n');
      layout.rank_devices.emplace_back(s.substr(0, cut), s.substr(cut + 1));
    }
  }
  if (lead) {
    const std::string config_warning = record_run_config(cfg, run_dir, start_step);
    if (!config_warning.empty()) std::printf("%s\n", config_warning.c_str());
    append_run_record(run_dir, machine, start_step, layout);
    if (!tok_path.empty())
      fs::copy_file(tok_path, run_dir / kTokenizerFile, fs::copy_options::overwrite_existing);
  }
  tokens_per_step =
      static_cast<double>(cfg.data.micro_batch) * cfg.data.seq_len * cfg.data.grad_accum * dp;
  flops_per_step = cfg.model.flops_per_token(cfg.data.seq_len) * tokens_per_step;
  grad_scale = static_cast<float>(1.0 / tokens_per_step);
  // The MFU peak (a 2 s probe unless cached) only where MFU is reported: one rank's peak,
  // times the ranks (each computes with its own threads).
  const PeakChoice peak_choice = lead ? choose_mfu_peak(*ctx, cfg.train.peak_tflops, machine,
                                                        kPeakProbeSeconds, cfg.train.precision)
                                      : PeakChoice{1.0, "not measured on this rank"};
  peak = peak_choice;
  peak_flops_per_s = peak_choice.flops_per_s * layout.ranks;
  print_header(peak_choice);
  if (lead) log.open_metrics(run_dir, cfg.train.steps, start_step);
  log.record(start_step > 0 ? "resume" : "start", {{"step", start_step},
                                                   {"braid_version", braid_version()},
                                                   {"git_commit", braid_git_commit()},
                                                   {"peak_flops_per_s", peak_flops_per_s},
                                                   {"peak_source", peak_choice.source}});
  if (start_step >= cfg.train.steps)
    log.say(fmt::format("nothing to train: the checkpoint is at step {} and train.steps is {}",
                        start_step, cfg.train.steps));
  // DP rank r's micro-batch m is the step's global micro-batch m * dp + r (data/loader.h);
  // every rank of a DP replica (its tp x pp ranks) reads the same ones.
  loader = std::make_unique<Loader>(train_path, cfg.data, 0, 1, start_step, dims.coord().dp, dp);
  micro.resize(static_cast<size_t>(cfg.data.grad_accum));
  if (loader->epoch_mode()) report_epochs();
}

void TrainRun::check_data() {
  {
    const TokenShard train_shard(train_path);  // validates header, size and every id
    check_shard_vocab(train_shard, cfg.model.vocab_size);
    BRAID_USER_CHECK(train_shard.size() > cfg.data.seq_len,
                     "{} holds {} tokens, fewer than one sequence of data.seq_len + 1 = {}",
                     train_path, train_shard.size(), cfg.data.seq_len + 1);
  }
  val.emplace(val_path, cfg.data);
  check_shard_vocab(val->shard(), cfg.model.vocab_size);
  check_tokenizer();
}

void TrainRun::check_tokenizer() const {
  if (tok_path.empty()) return;
  // The model's tokenizer: run.init_from's or lora.init_from's (an HF folder's tokenizer.json,
  // or the copy a braid run kept of the data's tokenizer it was trained on).
  std::string model_tok, from;
  if (!cfg.run.init_from.empty()) {
    model_tok = model_tokenizer_file(cfg.run.init_from),
    from = "run.init_from " + cfg.run.init_from;
  } else if (!cfg.lora.init_from.empty()) {
    model_tok = model_tokenizer_file(cfg.lora.init_from);
    from = "lora.init_from " + cfg.lora.init_from;
  }
  if (model_tok.empty()) return;
  const std::string want = load_tokenizer_path(model_tok)->fingerprint();
  const std::string have = load_tokenizer_path(tok_path)->fingerprint();
  BRAID_USER_CHECK(want == have,
                   "data.dir {} was prepared with tokenizer {} ({}), but the model of {} uses "
                   "tokenizer {} ({}); the ids would mean other text. Prepare the data with the "
                   "model's tokenizer: braid prepare --tokenizer {} ...",
                   data_dir.string(), have, tok_path, from, want, model_tok, model_tok);
}

std::optional<LoadedCheckpoint> TrainRun::load_resume_checkpoint() {
  // What to resume from (its weights are loaded while the model is built).
  if (cfg.checkpoint.resume == "auto") {
    resume_from = ckpt.latest();
  } else if (cfg.checkpoint.resume == "none") {
    BRAID_USER_CHECK(!ckpt.latest().has_value(),
                     "{} already holds checkpoints and checkpoint.resume is none; use "
                     "checkpoint.resume=auto to continue it, or another run.name",
                     run_dir.string());
  } else {
    resume_from = cfg.checkpoint.resume;
  }
  std::optional<LoadedCheckpoint> ck;
  if (!resume_from) return ck;
  ck.emplace(CheckpointManager::load(*resume_from));
  if (ck->state.contains("quantised_base"))  // the adapters were trained on that base
    check_quantised_base(ck->state.at("quantised_base"), *resume_from);
  if (ck->state.contains("model")) {
    const std::string diff = model_difference(ck->state.at("model"), cfg.model);
    BRAID_USER_CHECK(diff.empty(),
                     "cannot resume from {}: {}; the checkpoint was written for a "
                     "different model config",
                     *resume_from, diff);
  }
  return ck;
}

void TrainRun::resume(LoadedCheckpoint& ck) {
  // Step s reads the run's sequences [s * G, (s + 1) * G): another global batch G would read
  // other data (and change the optimizer's batch).
  if (ck.state.contains("data") && ck.state.at("data").contains("global_batch")) {
    const int64_t was = ck.state.at("data").at("global_batch").get<int64_t>();
    const int64_t now =
        static_cast<int64_t>(cfg.data.micro_batch) * cfg.data.grad_accum * dims.dp_size();
    BRAID_USER_CHECK(was == now,
                     "cannot resume from {}: it was trained with {} sequences per step, and this "
                     "layout gives {} (data.micro_batch {} x data.grad_accum {} x {} "
                     "data-parallel ranks); set data.global_batch: {} to keep the batch on any "
                     "rank count",
                     *resume_from, was, now, cfg.data.micro_batch, cfg.data.grad_accum,
                     dims.dp_size(), was);
  }
  if (ck.state.contains("loss_scaler")) opt->restore_loss_scaler(ck.state.at("loss_scaler"));
  if (!ck.optimizer.names().empty()) {
    // 8-bit moments are quantised in blocks of each tensor-parallel rank's own part: they
    // continue only under the tensor-parallel size that wrote them (any dp, ZeRO or not).
    const int ck_tp = ck.state.contains("layout") ? ck.state.at("layout").value("tp", 1) : 1;
    const auto names = ck.optimizer.names();
    const bool eight_bit = std::any_of(names.begin(), names.end(),
                                       [](const std::string& n) { return n.ends_with("_codes"); });
    BRAID_USER_CHECK(!eight_bit || ck_tp == dims.tp_size(),
                     "cannot resume from {}: its 8-bit optimizer moments (optim.name adamw8bit) "
                     "were quantised per part of parallel.tp = {}, and this run has parallel.tp "
                     "= {}; resume with parallel.tp={}",
                     *resume_from, ck_tp, dims.tp_size(), ck_tp);
    auto get = [&](const std::string& n) {
      // adamw8bit: u8 codes shaped like the parameter, and one f32 absmax per block of this
      // rank's part of it (a split parameter's parts' end to end).
      if (n.ends_with("_absmax")) {
        const Parameter* p = model->owner(n);
        BRAID_CHECK(p, "{} belongs to no parameter of this rank", n);
        return absmax_local_part(n, ck.optimizer.get(n), *p, model->tp_rank(),
                                 adamw8bit_blocks(p->value.numel()));
      }
      check_tensor_matches(ck.optimizer, n, model->whole_shape(n),
                           n.ends_with("_codes") ? DType::U8 : DType::F32);
      return model->local_part(n, ck.optimizer.get(n));
    };
    opt->load_state(get, ck.state.value("optimizer_steps", ck.step));
    start_step = ck.step;
  }
  const std::string msg = fmt::format("resumed from {} (step {})", *resume_from, ck.step);
  if (dims.lead()) std::printf("%s\n", msg.c_str());
  log.rank_line(msg);
}

void TrainRun::print_header(const PeakChoice& peak) const {
  if (!dims.lead()) return;
  const int dp = dims.dp_size(), tp = dims.tp_size(), pp = dims.pp_size();
  const int accum = cfg.data.grad_accum;
  std::printf("braid train: %s, %s %.2fM params, device %s, %d threads, gemm %s, run dir %s\n",
              config_path.c_str(), cfg.model.family.c_str(), cfg.model.num_params() / 1e6,
              device_choice.reason.c_str(), omp_get_max_threads(),
              ctx->device().is_cpu() ? gemm_backend_name(ctx->gemm()).c_str() : "cuBLASLt",
              run_dir.string().c_str());
  if (dims.world_size() > 1) {
    std::string line = fmt::format("parallel: {} over {} ranks", dims.mesh().str(), layout.ranks);
    if (cfg.parallel.sequence_parallel && tp > 1) line += ", sequence parallel";
    if (pp > 1)
      line += fmt::format(", schedule {} ({} micro-batches{})", cfg.parallel.schedule, accum,
                          cfg.parallel.virtual_stages > 1
                              ? fmt::format(", {} chunks per stage", cfg.parallel.virtual_stages)
                              : std::string());
    if (pp > 1)
      line += fmt::format(", blocks per {}stage [{}]",
                          cfg.parallel.virtual_stages > 1 ? "virtual " : "",
                          fmt::join(model->block_split(), ", "));
    if (dp > 1)
      line += fmt::format(", {} gradient buckets ({}), ZeRO {}",
                          data_parallel->buckets().buckets().size(), cfg.parallel.allreduce_dtype,
                          layout.zero);
    std::printf("%s\n", line.c_str());
  }
  std::printf("tokens/step %.0f (%smicro-batch %d x %d x accum %d); MFU peak %s%s (%s)\n",
              tokens_per_step, dp > 1 ? fmt::format("dp {} x ", dp).c_str() : "",
              cfg.data.micro_batch, cfg.data.seq_len, accum,
              format_si(peak.flops_per_s, "FLOP/s").c_str(),
              layout.ranks > 1 ? fmt::format(" x {} ranks", layout.ranks).c_str() : "",
              peak.source.c_str());
  if (const std::string d = opt->describe(*ctx); !d.empty()) std::printf("%s\n", d.c_str());
  std::fflush(stdout);
}

void TrainRun::report_epochs() {
  loader->with_epochs([&](EpochStream& e) {
    const EpochUnits& u = e.units();
    const int64_t n = static_cast<int64_t>(u.units.size()), seqs = e.sequences_in_epoch(0);
    std::string line =
        fmt::format("data: {} {} per epoch in {} sequences of {} tokens{}", n,
                    u.samples ? "samples" : "windows", seqs, cfg.data.seq_len,
                    e.packed() ? fmt::format(" (packed, {:.1f} samples per sequence)",
                                             static_cast<double>(n) / static_cast<double>(seqs))
                               : std::string());
    if (cfg.data.epochs > 0)
      line += fmt::format("; {} epochs = {} steps of {} sequences", cfg.data.epochs,
                          cfg.train.steps, loader->global_batch());
    if (u.samples)
      line += fmt::format("; longer than seq_len + 1 = {} tokens: {} truncated, {} dropped",
                          cfg.data.seq_len + 1, u.truncated, u.dropped);
    log.say(line);
    log.record("data", {{"units", n},
                        {"samples", u.samples},
                        {"packed", e.packed()},
                        {"sequences_per_epoch", seqs},
                        {"epochs", cfg.data.epochs},
                        {"global_batch", loader->global_batch()},
                        {"truncated", u.truncated},
                        {"dropped", u.dropped},
                        {"too_short", u.too_short},
                        {"longest_sample", u.longest}});
    return 0;
  });
}

LossSum TrainRun::global_loss(LossSum mine) const {
  const bool counts = model->stage() == model->stages() - 1 && model->tp_rank() == 0;
  const std::vector<double> g = all_sum_doubles(
      dims.world(), {counts ? mine.sum : 0.0, counts ? static_cast<double>(mine.count) : 0.0});
  return {g[0], static_cast<int64_t>(g[1])};
}

float TrainRun::step_grad_scale(const std::vector<Batch>& micro) const {
  if (!loader->masked()) return grad_scale;
  // Every rank of a DP group holds the same batches: count them once, where the loss is.
  const bool counts = model->stage() == model->stages() - 1 && model->tp_rank() == 0;
  double mine = 0;
  if (counts)
    for (const Batch& b : micro) {
      const int32_t* t = b.targets.i32();
      for (int64_t i = 0; i < b.targets.numel(); ++i) mine += t[i] != -1 ? 1.0 : 0.0;
    }
  const double trained = all_sum_doubles(dims.world(), {mine})[0];
  return static_cast<float>(1.0 / std::max(trained, 1.0));
}

}  // namespace braid
