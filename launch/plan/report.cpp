// Text and JSON renderings of plan results.
#include "launch/plan/report.h"

#include <fmt/format.h>

namespace braid::plan {

namespace {

std::string layout_str(const PlanResult& r) {
  const Layout& l = r.layout;
  std::string s = fmt::format("dp={} tp={} pp={}", l.dp, l.tp, l.pp);
  if (l.cp > 1) s += fmt::format(" cp={}", l.cp);
  if (l.vp > 1) s += fmt::format(" vp={}", l.vp);
  return s + fmt::format(" {} mb={} ckpt={} zero={}", l.schedule, r.train.micro_batch,
                         enum_name(r.train.checkpointing), r.train.zero);
}

std::string duration(double s) {
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 3 * 86400) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} days", s / 86400);
}

}  // namespace

nlohmann::json plan_json(const PlanResult& r) {
  const MemoryBreakdown& m = r.memory;
  const TimeBreakdown& t = r.time;
  const CpuStepTime& k = r.cpu_kernels;
  nlohmann::json j = {
      {"layout",
       {{"dp", r.layout.dp},
        {"tp", r.layout.tp},
        {"pp", r.layout.pp},
        {"cp", r.layout.cp},
        {"vp", r.layout.vp},
        {"schedule", r.layout.schedule},
        {"micro_batch", r.train.micro_batch},
        {"micro_batches", r.micro_batches},
        {"checkpointing", enum_name(r.train.checkpointing)},
        {"zero", r.train.zero},
        {"seq", r.seq},
        {"global_batch", r.train.global_batch},
        {"grad_precision", enum_name(r.train.grad_precision)},
        {"overlap",
         {{"dp", r.train.dp_overlap},
          {"tp", r.train.tp_overlap},
          {"param_gather", r.train.param_gather_overlap}}},
        {"zero3_prefetch", r.train.zero3_prefetch}}},
      {"params", r.params},
      {"trainable_params", r.trainable},
      {"memory_bytes",
       {{"weights", m.weights},
        {"grads", m.grads},
        {"optimizer", m.optimizer},
        {"model_states", m.model_states()},
        {"zero3_gathered", m.gathered},
        {"activations", m.activations},
        {"comm", m.comm},
        {"overhead", m.overhead},
        {"total", m.total()},
        {"capacity", r.capacity_bytes},
        {"stage", m.stage}}},
      {"fits", r.fits},
      {"fit_hints", r.fit_hints},
      {"largest_micro_batch", r.largest_micro_batch},
      {"flops_per_step", {{"model", r.model_flops_step}, {"hardware", r.hw_flops_step}}},
      {"step_seconds",
       {{"compute", t.compute},
        {"tp_comm", t.tp_comm},
        {"cp_comm", t.cp_comm},
        {"bubble", t.bubble},
        {"p2p", t.p2p},
        {"dp_exposed", t.dp_exposed},
        {"param_gather", t.param_gather},
        {"optimizer", t.optimizer},
        {"total", t.step()}}},
      {"tokens_per_s", r.tokens_per_s},
      {"tflops_per_gpu", r.tflops_per_gpu},
      {"hw_tflops_per_gpu", r.hw_tflops_per_gpu},
      {"mfu", r.mfu},
      {"hfu", r.hfu},
      {"train_seconds", r.train_seconds},
      {"train_cost", r.train_cost},
      {"price",
       {{"per_gpu_hour", r.price_per_gpu_hour},
        {"currency", r.currency},
        {"source", r.price_source}}}};
  if (r.train.stated_mfu > 0)
    j["stated_mfu"] = {{"mfu", r.train.stated_mfu},
                       {"step_seconds", r.stated_step_s},
                       {"train_seconds", r.stated_train_seconds},
                       {"train_cost", r.stated_train_cost}};
  if (r.kernel_model)
    j["cpu_kernel_seconds"] = {{"gemm", k.gemm},
                               {"attention", k.attention},
                               {"lm_head", k.lm_head},
                               {"elementwise", k.elementwise},
                               {"activation", k.activation},
                               {"kernel_calls", k.calls},
                               {"optimizer", k.optimizer},
                               {"total", k.total()}};
  return j;
}

nlohmann::json search_json(const SearchResult& s) {
  nlohmann::json best = nlohmann::json::array();
  for (const RankedPlan& p : s.best) {
    nlohmann::json j = plan_json(p.plan);
    j["reason"] = p.reason;
    best.push_back(j);
  }
  return {{"tried", s.tried},
          {"rejected_memory", s.rejected_memory},
          {"rejected_invalid", s.rejected_invalid},
          {"best", best}};
}

nlohmann::json inference_json(const InferenceResult& r) {
  return {{"weight_dtype", r.weight_dtype},
          {"tp", r.tp},
          {"weight_bytes", r.weight_bytes},
          {"kv_cache_bytes", r.kv_bytes},
          {"overhead_bytes", r.overhead_bytes},
          {"capacity_bytes", r.capacity_bytes},
          {"fits", r.fits},
          {"decode_step_s", r.decode_step_s},
          {"tokens_per_s", r.tokens_per_s},
          {"tokens_per_s_per_seq", r.tokens_per_s_per_seq},
          {"memory_bound", r.memory_bound},
          {"smallest_fitting_tp", r.smallest_fitting_tp},
          {"context", r.context},
          {"model_context", r.model_context},
          {"context_exceeds_model", r.context_exceeds_model}};
}

std::string plan_text(const ModelConfig& m, const Cluster& c, const PlanResult& r) {
  std::string o;
  o += fmt::format("model     {} L={} h={} heads={}/{} ffn={} vocab={}  params {:.3f} B", m.family,
                   m.n_layer, m.n_embd, m.n_head, m.kv_heads(), m.ffn(), m.vocab_size,
                   r.params / 1e9);
  if (r.trainable != r.params) o += fmt::format(" (trainable {:.2f} M)", r.trainable / 1e6);
  o += fmt::format(
      "\ncluster   {} x {} {} ({:.0f} GiB, {:.0f} TFLOP/s {}), intra {:.0f} GB/s, "
      "inter {:.1f} GB/s\n",
      c.nodes, c.gpus_per_node, c.gpu.name, c.gpu.memory_gib,
      r.train.precision == Precision::FP32 ? c.gpu.tflops_fp32 : c.gpu.tflops_bf16,
      enum_name(r.train.precision), c.intra_bw_gbs, c.inter_bw_gbs);
  o += fmt::format("layout    {}  ({} micro-batches per step)\n", layout_str(r), r.micro_batches);
  o += fmt::format(
      "step      global batch {} sequences x seq {} = {} tokens; {} compute, {} gradients\n",
      r.train.global_batch, r.seq, r.train.global_batch * r.seq, enum_name(r.train.precision),
      enum_name(r.train.precision == Precision::FP32 ? Precision::FP32 : r.train.grad_precision));
  o += fmt::format("overlap   dp gradients {}, tp comm {}, ZeRO param gathers {}\n\n",
                   r.train.dp_overlap ? "on" : "off", r.train.tp_overlap ? "on" : "off",
                   r.train.param_gather_overlap ? "on" : "off");
  const MemoryBreakdown& mm = r.memory;
  o += fmt::format("memory per GPU (stage {})          GiB\n", mm.stage);
  auto row = [&](const std::string& k, double v) {
    o += fmt::format("  {:<32}{:>8.2f}\n", k, v / kGiB);
  };
  row(r.train.zero >= 3 ? "weights (own shard)" : "weights", mm.weights);
  row("gradients", mm.grads);
  row("optimizer state + master", mm.optimizer);
  if (r.train.zero >= 3) {
    row("  = model states", mm.model_states());
    row(fmt::format("gathered, {}+1 units (working)", r.train.zero3_prefetch), mm.gathered);
  }
  row("activations", mm.activations);
  row("communication buffers", mm.comm);
  row("framework overhead", mm.overhead);
  row("total", mm.total());
  row("capacity", r.capacity_bytes);
  if (r.fits) {
    o += fmt::format("  fits, {:.2f} GiB to spare\n", (r.capacity_bytes - mm.total()) / kGiB);
    if (r.largest_micro_batch > 0)
      o += fmt::format("    a micro-batch of up to {} would also fit (--micro-batch {})\n",
                       r.largest_micro_batch, r.largest_micro_batch);
  } else {
    o += fmt::format("  DOES NOT FIT: {:.2f} GiB over\n", (mm.total() - r.capacity_bytes) / kGiB);
    for (const std::string& h : r.fit_hints) o += "    would fit with " + h + "\n";
    if (r.fit_hints.empty())
      o += "    no change of recomputation, micro-batch, ZeRO, LoRA base or sequence length fits;\n"
           "    add GPUs (--nodes, --gpus-per-node) or try --layout auto\n";
  }
  const TimeBreakdown& t = r.time;
  o += fmt::format("\nFLOPs per step  model {:.3e}  hardware (with recompute) {:.3e}\n",
                   r.model_flops_step, r.hw_flops_step);
  o += "step time                                  s      %\n";
  auto trow = [&](const char* k, double v) {
    o += fmt::format("  {:<36}{:>10.4f} {:>6.1f}\n", k, v, 100 * v / t.step());
  };
  trow("compute", t.compute);
  trow("tensor-parallel comm", t.tp_comm);
  trow("pipeline bubble", t.bubble);
  trow("context-parallel comm (exposed)", t.cp_comm);
  trow("pipeline p2p", t.p2p);
  trow("exposed data-parallel comm", t.dp_exposed);
  trow("exposed ZeRO param all-gathers", t.param_gather);
  trow("optimizer step", t.optimizer);
  trow("total", t.step());
  if (r.kernel_model) {
    o += "  compute by kernel (calibrated rates of this machine):\n";
    trow("  GEMMs", r.cpu_kernels.gemm);
    trow("  attention", r.cpu_kernels.attention);
    trow("  LM head + cross-entropy", r.cpu_kernels.lm_head);
    trow("  element-wise (norms, adds, copies)", r.cpu_kernels.elementwise);
    trow("  activations (GELU / SwiGLU)", r.cpu_kernels.activation);
    trow("  kernel-call overhead", r.cpu_kernels.calls);
  }
  o += fmt::format(
      "\ntokens/s {:.0f}   TFLOP/s per GPU {:.4g} (hardware {:.4g})   MFU {:.1f}%  "
      "HFU {:.1f}%\n",
      r.tokens_per_s, r.tflops_per_gpu, r.hw_tflops_per_gpu, 100 * r.mfu, 100 * r.hfu);
  if (r.train_seconds > 0) {
    o += fmt::format("training {:.3g} tokens: {}", r.train.train_tokens, duration(r.train_seconds));
    o += fmt::format(", {:.0f} GPU-hours", r.train_seconds / 3600 * r.layout.gpus());
    if (r.train_cost > 0) o += fmt::format(", cost {:.0f} {}", r.train_cost, r.currency);
    o += "\n";
  }
  if (r.train.stated_mfu > 0) {
    o += fmt::format(
        "at a stated MFU of {:.1f}% (6·N FLOPs per token; the planner's efficiency model not "
        "used): "
        "{:.4g} s per step",
        100 * r.train.stated_mfu, r.stated_step_s);
    if (r.stated_train_seconds > 0) {
      o += fmt::format(", {:.3g} tokens in {}, {:.0f} GPU-hours", r.train.train_tokens,
                       duration(r.stated_train_seconds),
                       r.stated_train_seconds / 3600 * r.layout.gpus());
      if (r.stated_train_cost > 0)
        o += fmt::format(", cost {:.0f} {}", r.stated_train_cost, r.currency);
    }
    o += "\n";
  }
  if (r.price_per_gpu_hour > 0 && (r.train_cost > 0 || r.stated_train_cost > 0))
    o += fmt::format("price     {:.2f} {} per GPU-hour ({})\n", r.price_per_gpu_hour, r.currency,
                     r.price_source.empty() ? "as given by --price" : r.price_source);
  return o;
}

std::string search_text(const SearchResult& s) {
  std::string o =
      fmt::format("searched {} layouts, {} did not fit in memory, {} cannot run their schedule\n",
                  s.tried, s.rejected_memory, s.rejected_invalid);
  if (s.best.empty()) return o + "no layout fits; add GPUs, use LoRA, or a smaller micro-batch\n";
  o += fmt::format("  {:<60}{:>9}{:>10}{:>7}{:>9}\n", "layout", "GiB", "tok/s", "MFU", "step s");
  for (const RankedPlan& p : s.best) {
    const PlanResult& r = p.plan;
    o += fmt::format("  {:<60}{:>9.1f}{:>10.0f}{:>6.1f}%{:>9.3f}\n      {}\n", layout_str(r),
                     r.memory.total() / kGiB, r.tokens_per_s, 100 * r.mfu, r.time.step(), p.reason);
  }
  return o;
}

std::string inference_text(const ModelConfig& m, const Cluster& c, const InferenceResult& r) {
  std::string o = fmt::format("serving {:.3f} B params on {} (tp={}), weights {}\n",
                              m.num_params() / 1e9, c.gpu.name, r.tp, r.weight_dtype);
  o += fmt::format("  weights      {:>8.2f} GiB per GPU\n", r.weight_bytes / kGiB);
  o += fmt::format("  KV cache     {:>8.2f} GiB per GPU\n", r.kv_bytes / kGiB);
  o += fmt::format("  overhead     {:>8.2f} GiB\n", r.overhead_bytes / kGiB);
  o += fmt::format("  capacity     {:>8.2f} GiB  -> {}\n", r.capacity_bytes / kGiB,
                   r.fits ? "fits" : "DOES NOT FIT");
  if (!r.fits)
    o += r.smallest_fitting_tp > 0
             ? fmt::format("  smallest tensor-parallel degree that fits: --tp {}\n",
                           r.smallest_fitting_tp)
             : std::string(
                   "  no tensor-parallel degree dividing the KV heads fits; try a smaller "
                   "--serve-dtype\n");
  if (r.context_exceeds_model)
    o += fmt::format(
        "  warning: context {} exceeds the {} tokens the model was trained on; quality beyond it "
        "is not "
        "assured (RoPE scaling or a long-context variant is needed)\n",
        r.context, r.model_context);
  o += fmt::format(
      "  decode step  {:.2f} ms ({}), {:.1f} tokens/s per sequence, {:.0f} tokens/s "
      "total\n",
      1e3 * r.decode_step_s, r.memory_bound ? "memory-bandwidth bound" : "compute bound",
      r.tokens_per_s_per_seq, r.tokens_per_s);
  return o;
}

}  // namespace braid::plan
