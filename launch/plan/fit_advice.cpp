// What to change so that a plan fits: each candidate is predicted whole (memory and step time).
#include "launch/plan/fit_advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "core/error.h"
#include "launch/plan/time_model.h"

namespace braid::plan {

namespace {

// A candidate plan: the options that differ from the user's, and its prediction if valid.
struct Candidate {
  TrainOptions t;
  Layout l;
  std::vector<std::string> parts;  // the options that differ, as typed
};

std::optional<FitChange> evaluate(const ModelConfig& m, const Candidate& cand, const Cluster& c) {
  PlanResult r;
  try {
    r = predict(m, cand.t, cand.l, c);
  } catch (const UserError&) {
    return std::nullopt;  // not a valid plan for this model and cluster (e.g. cp vs seq)
  }
  if (!r.fits) return std::nullopt;
  FitChange f;
  for (const std::string& p : cand.parts) f.what += (f.what.empty() ? "" : " ") + p;
  f.changes = static_cast<int>(cand.parts.size());
  f.total_bytes = r.memory.total();
  f.step_s = r.time.step();
  f.tokens_per_s = r.tokens_per_s;
  return f;
}

// Micro-batches below `mb` that divide the replica's share of the global batch, largest first.
std::vector<int> smaller_micro_batches(const TrainOptions& t, const Layout& l) {
  std::vector<int> out;
  for (int b = t.micro_batch - 1; b >= 1; --b)
    if (t.global_batch % (static_cast<int64_t>(l.dp) * b) == 0) out.push_back(b);
  return out;
}

// Sequence lengths below the plan's, halving down to 128 (each a multiple of 2 x cp).
std::vector<int> shorter_sequences(int seq, const Layout& l) {
  std::vector<int> out;
  for (int s = seq / 2; s >= 128; s /= 2)
    if (s % (2 * l.cp) == 0) out.push_back(s);
  return out;
}

// LoRA bases smaller than the plan's (bf16 > int8 > 4bit).
std::vector<std::string> smaller_bases(const TrainOptions& t) {
  if (t.lora_rank == 0) return {};
  if (t.lora_base == "bf16" || t.lora_base == "fp16") return {"int8", "4bit"};
  if (t.lora_base == "int8") return {"4bit"};
  return {};
}

std::vector<Checkpointing> more_recompute(Checkpointing c) {
  if (c == Checkpointing::None) return {Checkpointing::Selective, Checkpointing::Full};
  if (c == Checkpointing::Selective) return {Checkpointing::Full};
  return {};
}

// The combination of recomputation, micro-batch, ZeRO, LoRA base and (when `shorten`) a shorter
// sequence, on top of `start`, with the fewest changes, then the highest token rate.
std::optional<FitChange> smallest_combination(const ModelConfig& m, const Candidate& start, int seq,
                                              const Cluster& c, bool shorten) {
  const TrainOptions& t = start.t;
  const Layout& l = start.l;
  std::vector<std::optional<Checkpointing>> cks = {std::nullopt};
  for (Checkpointing ck : more_recompute(t.checkpointing)) cks.push_back(ck);
  std::vector<int> mbs = {0};
  for (int b : smaller_micro_batches(t, l)) mbs.push_back(b);
  std::vector<int> zeros = {-1};
  for (int z = t.zero + 1; z <= 3 && l.dp * l.cp > 1; ++z) zeros.push_back(z);
  std::vector<std::string> bases = {""};
  for (const std::string& q : smaller_bases(t)) bases.push_back(q);
  if (t.lora_rank == 0) bases.push_back("qlora");
  std::vector<int> seqs = {0};
  if (shorten)
    for (int s : shorter_sequences(seq, l)) seqs.push_back(s);
  std::optional<FitChange> best;
  std::tuple<int, double> best_rank;
  for (const auto& ck : cks)
    for (int b : mbs)
      for (int z : zeros)
        for (const std::string& q : bases)
          for (int s : seqs) {
            Candidate cand = start;
            if (ck) {
              cand.t.checkpointing = *ck;
              cand.parts.push_back(fmt::format("--checkpointing {}", enum_name(*ck)));
            }
            if (b > 0) {
              cand.t.micro_batch = b;
              cand.parts.push_back(fmt::format("--micro-batch {}", b));
            }
            if (z >= 0) {
              cand.t.zero = z;
              cand.parts.push_back(fmt::format("--zero {}", z));
            }
            if (q == "qlora") {
              cand.t.lora_rank = 16;
              cand.t.lora_base = "4bit";
              cand.parts.emplace_back("--lora-rank 16 --lora-base 4bit (QLoRA)");
            } else if (!q.empty()) {
              cand.t.lora_base = q;
              cand.parts.push_back(fmt::format("--lora-base {}", q));
            }
            if (s > 0) {
              cand.t.seq = s;
              cand.parts.push_back(fmt::format("--seq {}", s));
            }
            const std::optional<FitChange> f = evaluate(m, cand, c);
            if (!f) continue;
            const auto rank = std::make_tuple(f->changes, -f->tokens_per_s);
            if (!best || rank < best_rank) {
              best = f;
              best_rank = rank;
            }
          }
  return best;
}

}  // namespace

FitAdvice fit_advice(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                     const Cluster& c) {
  FitAdvice out;
  const int seq = t.seq > 0 ? t.seq : m.context_length;
  const Candidate base{t, l, {}};
  if (evaluate(m, base, c)) {
    for (int b = 64; b > t.micro_batch; --b) {
      Candidate cand = base;
      cand.t.micro_batch = b;
      if (t.global_batch % (static_cast<int64_t>(l.dp) * b) != 0) continue;
      if (evaluate(m, cand, c)) {
        out.largest_micro_batch = b;
        break;
      }
    }
    return out;
  }
  auto add_single = [&](const Candidate& cand) {
    if (std::optional<FitChange> f = evaluate(m, cand, c)) {
      out.single.push_back(*f);
      return true;
    }
    return false;
  };
  for (Checkpointing ck : more_recompute(t.checkpointing)) {
    Candidate cand = base;
    cand.t.checkpointing = ck;
    cand.parts = {fmt::format("--checkpointing {}", enum_name(ck))};
    if (add_single(cand)) break;  // full is only worth naming when selective does not fit
  }
  for (int z = t.zero + 1; z <= 3 && l.dp * l.cp > 1; ++z) {
    Candidate cand = base;
    cand.t.zero = z;
    cand.parts = {fmt::format("--zero {}", z)};
    if (add_single(cand)) break;
  }
  for (int b : smaller_micro_batches(t, l)) {
    Candidate cand = base;
    cand.t.micro_batch = b;
    cand.parts = {fmt::format("--micro-batch {}", b)};
    if (add_single(cand)) break;  // the largest that fits
  }
  for (int f : {2, 4, 8}) {
    if (l.dp % f != 0) continue;
    Candidate a = base;
    a.l.tp *= f;
    a.l.dp /= f;
    a.parts = {fmt::format("--tp {} --dp {}", a.l.tp, a.l.dp)};
    add_single(a);
    Candidate b = base;
    b.l.pp *= f;
    b.l.dp /= f;
    b.parts = {fmt::format("--pp {} --dp {}", b.l.pp, b.l.dp)};
    add_single(b);
  }
  for (const std::string& q : smaller_bases(t)) {
    Candidate cand = base;
    cand.t.lora_base = q;
    cand.parts = {fmt::format("--lora-base {}", q)};
    if (add_single(cand)) break;
  }
  if (t.lora_rank == 0) {
    Candidate cand = base;
    cand.t.lora_rank = 16;
    cand.t.lora_base = "4bit";
    cand.parts = {"--lora-rank 16 --lora-base 4bit (QLoRA)"};
    add_single(cand);
  }
  const bool fits_same_task = !out.single.empty();
  for (int s : shorter_sequences(seq, l)) {
    Candidate cand = base;
    cand.t.seq = s;
    cand.parts = {fmt::format("--seq {}", s)};
    if (add_single(cand)) break;
  }
  if (fits_same_task) return out;
  // No single change that keeps the task fits: the smallest combination that does, first on
  // these GPUs, then with the pipeline over 2, 4 or 8 times as many GPUs per node; a shorter
  // sequence (a different task) only when none of those fits.
  for (bool shorten : {false, true}) {
    for (int f : {1, 2, 4, 8}) {
      Candidate start = base;
      Cluster more = c;
      if (f > 1) {
        more.gpus_per_node = c.gpus_per_node * f;
        start.l.pp = l.pp * f;
        start.parts = {fmt::format("--gpus-per-node {} --pp {}", more.gpus_per_node, start.l.pp)};
      }
      out.combined = smallest_combination(m, start, seq, more, shorten);
      if (out.combined) return out;
    }
  }
  return out;
}

std::vector<std::string> fit_hints(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                                   const Cluster& c) {
  const FitAdvice a = fit_advice(m, t, l, c);
  std::vector<std::string> out;
  auto line = [](const FitChange& f) {
    return fmt::format("{} -> {:.1f} GiB per GPU, {:.0f} tokens/s", f.what, f.total_bytes / kGiB,
                       f.tokens_per_s);
  };
  for (const FitChange& f : a.single) out.push_back(line(f));
  if (a.combined) out.push_back(line(*a.combined));
  return out;
}

}  // namespace braid::plan
